//! The event sequence of a reference run, snapshot-tested with ids, times and durations
//! redacted, and the Chat Completions bodies the `openai` provider sent during it. A change
//! here is a change of the public event contract or of what goes to the model: review it as
//! such.

use keel::{Event, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace};

use crate::common;

/// The reference run — the model reads the README with `read_file`, then answers — with the
/// mock that played the model, and the live and stored events.
struct ReferenceRun {
    mock: MockLlm,
    live: Vec<Event>,
    stored: Vec<Event>,
    _ws: TempWorkspace,
}

async fn reference_run() -> ReferenceRun {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "read_file",
        [r#"{"path":"#, r#""README.md"}"#],
    )]));
    mock.push(MockResponse::text(["The README ", "says hello."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, live) = common::run(&runtime, "What does the README say?").await;
    let stored = common::stored(&runtime, &response).await;
    ReferenceRun {
        mock,
        live,
        stored,
        _ws: ws,
    }
}

#[tokio::test]
async fn reference_run_event_sequence() {
    let ReferenceRun { live, stored, .. } = reference_run().await;

    // Live subscribers saw exactly the stored events, plus narration derived from them.
    let live_facts: Vec<_> = live
        .iter()
        .filter(|e| !e.payload.is_derived())
        .cloned()
        .collect();
    assert_eq!(live_facts, stored);
    assert!(
        live.iter()
            .any(|e| e.type_name() == "runtime.progress.narration")
    );

    insta::assert_json_snapshot!("reference_run", stored, {
        "[].id" => "[id]",
        "[].ts" => "[ts]",
        "[].requestId" => "[requestId]",
        "[].latencyMs" => "[ms]",
        "[].durationMs" => "[ms]",
        "[].event.durationMs" => "[ms]",
    });
}

#[tokio::test]
async fn reference_run_model_request_bodies() {
    let ReferenceRun { mock, .. } = reference_run().await;

    let bodies: Vec<_> = mock.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 2, "one request per model round");
    insta::assert_json_snapshot!("reference_run_model_requests", bodies);
}
