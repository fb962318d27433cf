//! Redaction: a secret matching `redaction.patterns` never reaches the log, whether a tool
//! argument or the model's answer carries it, and a file a tool writes is logged as its size
//! and sha256, never its contents — in the store and in the JSONL mirror alike.

use keel::{AdapterEvent, EventPayload};
use keel::{RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::json;

use crate::common::{self, assert_well_formed};

const SECRET: &str = "tok_a1b2c3d4e5f6";
const BODY: &str = "FILE-BODY-7f3c: the contents nobody may read in the log\n";

#[tokio::test]
async fn secrets_and_written_contents_never_reach_the_log() {
    let mock = MockLlm::start().await;
    let write = json!({ "path": "notes.txt", "content": BODY }).to_string();
    let grep = json!({ "pattern": SECRET }).to_string();
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("call_write", "write_file", [write.as_str()]),
        MockToolCall::new("call_grep", "grep", [grep.as_str()]),
    ]));
    mock.push(MockResponse::text([format!("Done. The key was {SECRET}.")]));
    let ws = common::agent_and_model(&mock.base_url(), &["write_file", "grep"], "")
        .runtime("{ defaultAgent: assistant, redaction: { patterns: ['tok_[a-z0-9]{12}'] } }")
        .policy("edits", "rules: [{ tool: write_file, decision: allow }]")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Write the notes").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    // The tool received the real arguments.
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), BODY);

    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    let mirror =
        keel_test_support::logged_lines(ws.path(), response.request_id.as_str()).join("\n");
    assert!(!mirror.is_empty(), "the run is in the event log");
    let stored = serde_json::to_string(&events).unwrap();
    for log in [&stored, &mirror] {
        assert!(!log.contains("FILE-BODY-7f3c"), "file contents in the log");
        assert!(!log.contains(SECRET), "secret in the log");
        assert!(log.contains("[REDACTED]"));
    }

    let started = |tool: &str| {
        events.iter().find_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolStart {
                        tool: t, arguments, ..
                    },
            } if t == tool => Some(arguments.clone()),
            _ => None,
        })
    };
    assert_eq!(
        started("write_file").unwrap(),
        json!({
            "path": "notes.txt",
            "content": {
                "size": BODY.len(),
                "sha256": "e951e30a1a7c63978dbff424c0690276035d5dbe6ab262baf2c2a6ac05f96aad"
            }
        })
    );
    assert_eq!(started("grep").unwrap(), json!({ "pattern": "[REDACTED]" }));
    let answer = events.iter().find_map(|e| match &e.payload {
        EventPayload::RequestCompleted { output, .. } => Some(output.clone()),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("Done. The key was [REDACTED]."));
}
