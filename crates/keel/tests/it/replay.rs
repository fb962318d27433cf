//! Replay re-executes a run from its log and reproduces its event sequence; fork continues a
//! copy of a run's first events.

use keel::EventPayload;
use keel::{RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use crate::common::{self, assert_well_formed};

async fn drain(mut handle: keel::RunHandle) -> keel::RunResponse {
    while handle.next_event().await.is_some() {}
    handle.wait().await.unwrap()
}

#[tokio::test]
async fn replay_reproduces_the_event_sequence_without_calling_the_model() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::openai_error(429, "slow down", "requests", None).header("Retry-After", "0"),
    );
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "read_file",
        [r#"{"path":"#, r#""README.md"}"#],
    )]));
    mock.push(MockResponse::text(["The README ", "says ", "hello."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (original, _) = common::run(&runtime, "What does the README say?").await;
    assert_eq!(original.status, RunStatus::Completed);
    let requests_before = mock.request_count();

    let replay = drain(runtime.replay(&original.request_id).await.unwrap()).await;

    assert_eq!(replay.status, RunStatus::Completed);
    assert_eq!(replay.output, original.output);
    assert_eq!(
        mock.request_count(),
        requests_before,
        "the replay never calls the model"
    );
    assert_eq!(
        runtime
            .runs()
            .divergence(&original.request_id, &replay.request_id)
            .await
            .unwrap(),
        None
    );
    let a = common::stored(&runtime, &original).await;
    let b = common::stored(&runtime, &replay).await;
    assert_eq!(a.len(), b.len());
    assert!(
        b.iter().any(|e| e.type_name() == "runtime.model.retry"),
        "the retry is replayed too"
    );
    let record = runtime
        .runs()
        .get(&replay.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.links.replay_of.as_ref(), Some(&original.request_id));
}

#[tokio::test]
async fn replay_reports_where_a_changed_workspace_diverges() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "read_file",
        [r#"{"path":"README.md"}"#],
    )]));
    mock.push(MockResponse::text(["It says hello."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (original, _) = common::run(&runtime, "Read it").await;
    ws.write("README.md", "# Changed\n");

    let replay = drain(runtime.replay(&original.request_id).await.unwrap()).await;

    let divergence = runtime
        .runs()
        .divergence(&original.request_id, &replay.request_id)
        .await
        .unwrap()
        .expect("the tool result differs");
    let events = common::stored(&runtime, &original).await;
    let result_seq = events
        .iter()
        .find(|e| {
            e.type_name() == "runtime.adapter.event"
                && matches!(
                    &e.payload,
                    EventPayload::Adapter {
                        event: keel::AdapterEvent::ToolResult { .. }
                    }
                )
        })
        .unwrap()
        .seq;
    assert_eq!(divergence.seq, result_seq);
    assert!(divergence.found.unwrap().to_string().contains("# Changed"));
}

#[tokio::test]
async fn fork_continues_a_copy_of_the_first_events_with_the_live_model() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "read_file",
        [r#"{"path":"README.md"}"#],
    )]));
    mock.push(MockResponse::text(["First ending."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (original, _) = common::run(&runtime, "Read it").await;
    let events = common::stored(&runtime, &original).await;
    // Fork right after the tool result: the model is asked again for the final answer.
    let at = events
        .iter()
        .find(|e| {
            matches!(
                &e.payload,
                EventPayload::Adapter {
                    event: keel::AdapterEvent::ToolResult { .. }
                }
            )
        })
        .unwrap()
        .seq;
    mock.push(MockResponse::text(["Second ending."]));

    let fork = drain(runtime.fork(&original.request_id, at).await.unwrap()).await;

    assert_eq!(fork.status, RunStatus::Completed, "{fork:?}");
    assert_eq!(fork.output.as_deref(), Some("Second ending."));
    let forked = common::stored(&runtime, &fork).await;
    assert_well_formed(&forked);
    assert_eq!(forked[at as usize].type_name(), "runtime.request.forked");
    for (copy, source) in forked.iter().zip(&events).take(at as usize) {
        assert_eq!(without_ids(copy), without_ids(source));
        assert_eq!(copy.request_id, fork.request_id);
    }
    // The live model saw the copied conversation, tool result included.
    let last = mock.last_request().unwrap();
    assert!(
        last.last_content_of("tool")
            .unwrap()
            .contains("Hello from the README.")
    );
    let record = runtime.runs().get(&fork.request_id).await.unwrap().unwrap();
    assert_eq!(
        record.links.forked_from.as_ref(),
        Some(&original.request_id)
    );
    assert_eq!(record.links.fork_seq, Some(at));

    let past_end = runtime
        .fork(&original.request_id, events.len() as u64)
        .await;
    assert!(
        past_end.is_err(),
        "cannot fork at or after the terminal event"
    );
}

/// An event without the fields a copy changes.
fn without_ids(event: &keel::Event) -> serde_json::Value {
    let mut value = serde_json::to_value(event).unwrap();
    let map = value.as_object_mut().unwrap();
    for key in ["id", "requestId", "sessionId"] {
        map.remove(key);
    }
    value
}
