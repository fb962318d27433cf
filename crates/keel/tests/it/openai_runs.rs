//! Whole runs against the `openai` provider and a mock server speaking real SSE on 127.0.0.1.

use keel::{AdapterEvent, ErrorCode, EventPayload, FinishReason};
use keel::{RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockSse, MockToolCall};

use crate::common::{self, assert_well_formed, failure_code, types};

fn final_text(text: &str) -> MockResponse {
    MockResponse::text(text.split_inclusive(' ').collect::<Vec<_>>())
}

#[tokio::test]
async fn tool_call_arguments_split_over_chunks_are_assembled() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "read_file",
        [r#"{"pa"#, r#"th": "READ"#, r#"ME.md"#, r#""}"#],
    )]));
    mock.push(final_text("The README says hello."));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "What does the README say?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.output.as_deref(), Some("The README says hello."));
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    let start = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Adapter {
                event: AdapterEvent::ToolStart { arguments, .. },
            } => Some(arguments.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(start, serde_json::json!({ "path": "README.md" }));
    // The model's second round received the file's contents as the tool result.
    let second = &mock.requests()[1];
    assert!(
        second
            .last_content_of("tool")
            .unwrap()
            .contains("Hello from the README.")
    );
}

#[tokio::test]
async fn two_tool_calls_in_one_answer_run_and_answer_in_call_order() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("call_a", "list_dir", [r#"{"path":"."}"#]),
        MockToolCall::new("call_b", "read_file", [r#"{"path":"#, r#""README.md"}"#]),
    ]));
    mock.push(final_text("Done."));
    let ws = common::workspace(&mock.base_url(), &["list_dir", "read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Look around.").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let second = &mock.requests()[1];
    let tool_ids: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(tool_ids, vec!["call_a", "call_b"]);
    let events = common::stored(&runtime, &response).await;
    let guards = events
        .iter()
        .filter(|e| e.type_name() == "runtime.tool.guard")
        .count();
    assert_eq!(guards, 2);
}

#[tokio::test]
async fn rate_limit_then_success_retries_once() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::openai_error(429, "slow down", "requests", Some("rate_limit_exceeded"))
            .header("Retry-After", "0"),
    );
    mock.push(final_text("Hello after waiting."));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Hi").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    let retries: Vec<_> = events
        .iter()
        .filter(|e| e.type_name() == "runtime.model.retry")
        .collect();
    assert_eq!(retries.len(), 1, "{:?}", types(&events));
    match &retries[0].payload {
        EventPayload::ModelRetry {
            attempt,
            error,
            delay_ms,
            ..
        } => {
            assert_eq!(*attempt, 1);
            assert_eq!(error.code, ErrorCode::ModelUnavailable);
            assert_eq!(*delay_ms, 0, "Retry-After: 0 is honoured");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn three_server_errors_fail_the_run_with_a_typed_error() {
    let mock = MockLlm::start().await;
    for _ in 0..3 {
        mock.push(MockResponse::openai_error(
            500,
            "boom",
            "server_error",
            None,
        ));
    }
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Hi").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::ModelError);
    let error = response.error.clone().unwrap();
    assert_eq!(error.code, ErrorCode::ModelUnavailable);
    assert!(error.message.contains("500"), "{}", error.message);
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.type_name() == "runtime.model.retry")
            .count(),
        2
    );
    assert_eq!(mock.request_count(), 3, "maxAttempts is 3");
    let record = runtime
        .runs()
        .get(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, RunStatus::Failed);
}

#[tokio::test]
async fn malformed_chunk_fails_the_run_and_keeps_the_log_intact() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .role()
            .text("Partial ")
            .raw("data: {\"choices\": [{\"delta\": {\"content\": 5\n\n"),
    ));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Hi").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(
        response.error.as_ref().unwrap().code,
        ErrorCode::ModelMalformedStream
    );
    assert_eq!(mock.request_count(), 1, "a malformed stream is not retried");
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert_eq!(failure_code(&events), Some(ErrorCode::ModelMalformedStream));
    // The event log parses line by line (nothing torn, nothing half-written) and holds the
    // run's events, each once.
    let logged = keel_test_support::logged_lines(ws.path(), response.request_id.as_str());
    assert_eq!(logged.len(), events.len());
}
