//! Cancellation reaches the model stream and tool processes: the run ends with
//! `runtime.request.cancelled` and no child process is left running.

use std::time::Duration;

use keel::EventPayload;
use keel::{RequestOptions, RunStatus, Runtime};
use keel_test_support::process::{alive, read_pid, wait_gone};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use crate::common::{self, assert_well_formed, types};

/// The spec of tool `slow`.
const SLOW_TOOL: &str = r#"
description: Forks a grandchild and sleeps (`$$$$` is a literal `$$` after interpolation).
schema: { type: object }
impl:
  kind: command
  command: ["sh", "-c", "sleep 30 & echo $! > grandchild.pid; echo $$$$ > child.pid; wait"]
  timeout: 60s
policy: allow
"#;

#[tokio::test]
async fn cancelling_during_a_tool_kills_its_process_group() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c",
        "slow",
        ["{}"],
    )]));
    let ws = common::builder(&mock.base_url(), &["slow"], "")
        .tool("slow", SLOW_TOOL)
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut handle = runtime
        .request(RequestOptions {
            input: "Be slow".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    let child = read_pid(&ws.join("child.pid")).await;
    let grandchild = read_pid(&ws.join("grandchild.pid")).await;
    assert!(alive(grandchild));
    assert!(runtime.cancel(handle.request_id()).await.unwrap());
    let mut live = Vec::new();
    while let Some(event) = handle.next_event().await {
        live.push(event);
    }
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Cancelled);
    assert!(
        wait_gone(child).await,
        "the tool process {child} is still running"
    );
    assert!(
        wait_gone(grandchild).await,
        "the forked grandchild {grandchild} is still running"
    );
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert_eq!(
        events.last().unwrap().type_name(),
        "runtime.request.cancelled",
        "{:?}",
        types(&events)
    );
    assert!(
        live.iter()
            .any(|e| matches!(e.payload, EventPayload::RequestCancelled { .. }))
    );
    let record = runtime
        .runs()
        .get(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
}

#[tokio::test]
async fn cancelling_during_a_model_stream_ends_the_run() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::text(["one ", "two ", "three ", "four"]).chunk_delay(Duration::from_secs(30)),
    );
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut handle = runtime
        .request(RequestOptions {
            input: "Count slowly".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // Cancel once the model round is under way.
    while let Some(event) = handle.next_event().await {
        if event.type_name() == "runtime.model.started" {
            handle.cancel();
            break;
        }
    }
    // Were the stream not closed, the run would complete once the slow chunks arrived.
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Cancelled);
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
}

#[tokio::test]
async fn cancelling_a_run_ends_its_exec_sessions_and_their_processes() {
    let mock = MockLlm::start().await;
    // An exec session that records its pid and sleeps, then a call that waits forever.
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "exec_start",
        [r#"{"command": "echo $$ > session.pid; sleep 600 & echo $! > sleeper.pid; wait", "waitMs": 0}"#],
    )]));
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c2",
        "slow",
        ["{}"],
    )]));
    let ws = common::builder(&mock.base_url(), &["exec_start", "slow"], "")
        .tool("slow", SLOW_TOOL)
        .policy("open", "rules: [{ tool: exec_start, decision: allow }]")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut handle = runtime
        .request(RequestOptions {
            input: "Start a session, then be slow".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let session = read_pid(&ws.join("session.pid")).await;
    let sleeper = read_pid(&ws.join("sleeper.pid")).await;
    // The second call is running: the session stays open meanwhile.
    read_pid(&ws.join("child.pid")).await;
    assert!(alive(session) && alive(sleeper));
    assert!(runtime.cancel(handle.request_id()).await.unwrap());
    while handle.next_event().await.is_some() {}
    assert_eq!(handle.wait().await.unwrap().status, RunStatus::Cancelled);
    assert!(
        wait_gone(session).await,
        "the session's shell {session} is still running"
    );
    assert!(
        wait_gone(sleeper).await,
        "its child {sleeper} is still running"
    );
}
