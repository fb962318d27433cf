//! The runtime's lifecycle around runs: history supplied with a request, per-request time
//! budgets, owners, retries, graceful shutdown (runs that finish, runs that are interrupted and
//! resumed), event observers and run counts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::{
    Error, Event, EventObserver, Message, RequestId, RequestOptions, RunFilter, RunStatus, Runtime,
    RuntimeError,
};
use keel::{ErrorCode, EventPayload, FinishReason, ToolCall};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::Value;

use crate::common::{self, assert_well_formed, types};

/// The spec of tool `slow`.
const SLOW_TOOL: &str = r#"
description: Takes half a minute.
schema: { type: object }
impl: { kind: command, command: ["sleep", "30"], timeout: 60s }
policy: allow
"#;

fn runtime(ws: &keel_test_support::TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

fn earlier_conversation() -> Vec<Message> {
    vec![
        Message::user("What is the capital of France?"),
        Message::assistant(
            "",
            vec![ToolCall {
                id: "call_old".into(),
                name: "lookup".into(),
                arguments: "{}".into(),
            }],
        ),
        Message::tool_result("call_old", "Paris"),
        Message::assistant("Paris.", vec![]),
    ]
}

/// `(role, content)` of the messages a model request carried.
fn roles_and_contents(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn supplied_history_goes_before_the_input_and_is_recorded_in_the_log() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Berlin."]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    let handle = runtime
        .request(RequestOptions {
            input: "And of Germany?".into(),
            history: earlier_conversation(),
            ..Default::default()
        })
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    let sent = roles_and_contents(mock.requests()[0].messages());
    let roles: Vec<&str> = sent.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(sent[5].1, "And of Germany?");
    assert_eq!(
        mock.requests()[0].messages()[2]["tool_calls"][0]["id"],
        "call_old"
    );

    let events = common::stored(&runtime, &response).await;
    match &events[0].payload {
        EventPayload::RequestStarted { history, .. } => {
            assert_eq!(history, &earlier_conversation());
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_history_the_model_wire_would_refuse_is_rejected_naming_the_message() {
    let mock = MockLlm::start().await;
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    let mut history = earlier_conversation();
    history.remove(2); // the tool result
    let error = runtime
        .request(RequestOptions {
            input: "Hi".into(),
            history,
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
    match error {
        Error::Runtime(RuntimeError::InvalidInput(message)) => {
            assert!(message.contains("history[1]"), "{message}");
            assert!(message.contains("call_old"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let error = runtime
        .request(RequestOptions {
            input: "Hi".into(),
            history: vec![Message::user("ok"), Message::user("")],
            ..Default::default()
        })
        .await
        .err()
        .unwrap();
    assert!(error.to_string().contains("history[1]"), "{error}");
    assert_eq!(mock.request_count(), 0);
    assert!(
        runtime
            .runs()
            .list(&RunFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_request_timeout_tightens_the_run_timeout() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["slow ", "answer"]).chunk_delay(Duration::from_secs(10)));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    let handle = runtime
        .request(RequestOptions {
            input: "Take your time".into(),
            timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::Timeout);
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert_eq!(common::failure_code(&events), Some(ErrorCode::Timeout));
}

#[tokio::test]
async fn owners_are_recorded_and_filter_the_list() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text(["ok"]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    for owner in [Some("alice"), Some("bob"), None, Some("alice")] {
        let handle = runtime
            .request(RequestOptions {
                input: "hi".into(),
                owner: owner.map(str::to_owned),
                ..Default::default()
            })
            .await
            .unwrap();
        handle.wait().await.unwrap();
    }
    let alice = runtime
        .runs()
        .list(&RunFilter {
            owner: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(alice.len(), 2);
    assert!(alice.iter().all(|r| r.owner.as_deref() == Some("alice")));
    let mut counts = runtime.runs().counts().await.unwrap();
    counts.sort_by_key(|(status, _)| status.as_str());
    assert_eq!(counts, [(RunStatus::Completed, 4)]);
}

#[tokio::test]
async fn retry_repeats_an_ended_run_and_refuses_unknown_and_live_runs() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["first"]));
    mock.push(MockResponse::text(["second"]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    let session = keel::SessionId::from("ses_retry");
    let handle = runtime
        .request(RequestOptions {
            input: "Answer me".into(),
            session_id: Some(session.clone()),
            history: vec![
                Message::user("context"),
                Message::assistant("noted", vec![]),
            ],
            mode: Some(keel::PermissionMode::Plan),
            ..Default::default()
        })
        .await
        .unwrap();
    let first = handle.wait().await.unwrap();
    assert_eq!(first.status, RunStatus::Completed);

    let retried = runtime
        .retry(&first.request_id, Some("carol".into()))
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(retried.output.as_deref(), Some("second"));
    let record = runtime
        .runs()
        .get(&retried.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.links.retry_of.as_ref(), Some(&first.request_id));
    assert_eq!(record.input, "Answer me");
    assert_eq!(record.session_id.as_ref(), Some(&session));
    assert_eq!(record.owner.as_deref(), Some("carol"));
    // The model saw the same prompt: the original's own turn is not part of the history.
    let requests = mock.requests();
    assert_eq!(
        roles_and_contents(requests[1].messages()),
        roles_and_contents(requests[0].messages())
    );
    let events = common::stored(&runtime, &retried).await;
    match &events[0].payload {
        EventPayload::RequestStarted { history, mode, .. } => {
            assert_eq!(history.len(), 2);
            assert_eq!(mode.map(|m| m.as_str()), Some("plan"));
        }
        other => panic!("{other:?}"),
    }

    match runtime
        .retry(&RequestId::from("run_nope"), None)
        .await
        .err()
    {
        Some(Error::Runtime(RuntimeError::NotFound(message))) => {
            assert!(message.contains("run_nope"), "{message}");
        }
        other => panic!("{other:?}"),
    }

    mock.push(MockResponse::text(["slow"]).chunk_delay(Duration::from_secs(30)));
    let live = runtime
        .request(RequestOptions {
            input: "Be slow".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    match runtime.retry(live.request_id(), None).await.err() {
        Some(Error::Runtime(RuntimeError::Conflict(message))) => {
            assert!(message.contains("running"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    live.cancel();
    assert_eq!(live.wait().await.unwrap().status, RunStatus::Cancelled);
}

#[tokio::test]
async fn shutdown_lets_runs_that_end_within_the_grace_period_finish() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["done"]).delay(Duration::from_millis(300)));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = runtime(&ws);
    let handle = runtime
        .request(RequestOptions {
            input: "Finish soon".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runtime.runs().active(), 1);
    let report = runtime.shutdown(Duration::from_secs(20)).await;
    assert_eq!(report.finished, 1);
    assert_eq!(report.interrupted, 0);
    assert_eq!(runtime.runs().active(), 0);
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);

    let refused = runtime
        .request(RequestOptions {
            input: "Too late".into(),
            ..Default::default()
        })
        .await
        .err();
    assert!(
        matches!(refused, Some(Error::Runtime(RuntimeError::ShuttingDown))),
        "{refused:?}"
    );
    let refused = runtime.retry(&response.request_id, None).await.err();
    assert!(matches!(
        refused,
        Some(Error::Runtime(RuntimeError::ShuttingDown))
    ));
    let refused = runtime.tools().call(None, "read_file", "{}").await.err();
    assert!(matches!(refused, Some(RuntimeError::ShuttingDown)));
}

#[tokio::test]
async fn shutdown_interrupts_a_run_stuck_in_a_slow_tool_and_the_run_resumes() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "slow",
        ["{}"],
    )]));
    let ws = common::builder(&mock.base_url(), &["slow"], "")
        .tool("slow", SLOW_TOOL)
        .build();
    let runtime = runtime(&ws);
    let mut handle = runtime
        .request(RequestOptions {
            input: "Do the slow thing".into(),
            history: vec![Message::user("earlier"), Message::assistant("sure", vec![])],
            ..Default::default()
        })
        .await
        .unwrap();
    // Shut down once the tool is running.
    while let Some(event) = handle.next_event().await {
        if matches!(
            &event.payload,
            EventPayload::Adapter {
                event: keel::AdapterEvent::ToolStart { .. }
            }
        ) {
            break;
        }
    }
    let id = handle.request_id().clone();
    let report = runtime.shutdown(Duration::from_millis(200)).await;
    assert_eq!(report.finished, 0);
    assert_eq!(report.interrupted, 1);
    // Durable before shutdown returned.
    let record = runtime.runs().get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Interrupted);
    assert_eq!(
        record.error.as_ref().map(|e| e.code),
        Some(ErrorCode::Shutdown)
    );
    let events = runtime.runs().events(&id, 0).await.unwrap();
    assert_well_formed(&events);
    assert_eq!(
        events.last().unwrap().type_name(),
        "runtime.request.interrupted",
        "{:?}",
        types(&events)
    );
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Interrupted);
    assert_eq!(response.finish_reason, FinishReason::Interrupted);

    // A new runtime (a restarted process) resumes it.
    mock.push(MockResponse::text(["Resumed and done."]));
    let restarted = Runtime::builder().workspace(ws.path()).build().unwrap();
    let resumed = restarted.resume(&id).await.unwrap().wait().await.unwrap();
    assert_eq!(resumed.status, RunStatus::Completed, "{resumed:?}");
    assert_eq!(resumed.output.as_deref(), Some("Resumed and done."));
    let events = restarted.runs().events(&id, 0).await.unwrap();
    let names = types(&events);
    let interrupted = names
        .iter()
        .position(|t| *t == "runtime.request.interrupted")
        .unwrap();
    assert_eq!(
        names[interrupted + 1],
        "runtime.request.resumed",
        "{names:?}"
    );
    assert_eq!(names.last(), Some(&"runtime.request.completed"));
    assert_eq!(events.iter().filter(|e| e.payload.is_final()).count(), 1);
    // The resumed prompt still carries the supplied history, and the slow call's unknown
    // outcome (the tool is not idempotent).
    let sent = roles_and_contents(mock.requests()[1].messages());
    assert_eq!(sent[1], ("user".into(), "earlier".into()));
    assert_eq!(sent[2], ("assistant".into(), "sure".into()));
    assert_eq!(sent[3], ("user".into(), "Do the slow thing".into()));
    assert!(sent[5].1.contains("interrupted"), "{sent:?}");
    let record = restarted.runs().get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.error, None);
    assert_eq!(record.links.resumed, 1);
}

/// Collects what it observes.
#[derive(Default)]
struct Collector {
    seen: Mutex<Vec<Event>>,
}

impl EventObserver for Collector {
    fn observe(&self, event: &Event) {
        self.seen.lock().unwrap().push(event.clone());
    }
}

#[tokio::test]
async fn observers_see_every_stored_event_once_in_order_without_a_subscriber() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "read_file",
        [r#"{"path":"README.md"}"#],
    )]));
    mock.push(MockResponse::text(["It ", "says ", "hello."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let (first, second) = (
        Arc::new(Collector::default()),
        Arc::new(Collector::default()),
    );
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .observer(first.clone())
        .observer(second.clone())
        .build()
        .unwrap();
    // Nobody reads the handle's events.
    let handle = runtime
        .request(RequestOptions {
            input: "Read the README".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    let stored = common::stored(&runtime, &response).await;
    assert!(stored.len() > 8, "{:?}", types(&stored));
    for collector in [&first, &second] {
        let seen = collector.seen.lock().unwrap().clone();
        assert_eq!(
            seen, stored,
            "every stored event once, in order, nothing else"
        );
    }
}
