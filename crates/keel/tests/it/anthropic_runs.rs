//! An agent on `provider: anthropic` runs like any other: its tool round goes to the Messages
//! API as `tool_use` and `tool_result` blocks, the run's events name the provider, and a 529
//! (overloaded) is retried by the runtime.

use keel::{EventPayload, RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};
use serde_json::json;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_the_anthropic_provider_makes_a_tool_round_and_answers() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
    ));
    mock.push(MockResponse::anthropic_tool_use(&[MockToolCall::new(
        "toolu_1",
        "read_file",
        [r#"{"path": "#, r#""README.md"}"#],
    )]));
    mock.push(MockResponse::anthropic_text(&[
        "The README ",
        "says hello.",
    ]));
    let ws = WorkspaceBuilder::new()
        .runtime(
            "{ defaultAgent: claude, retry: { model: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 40ms } } }",
        )
        .model(
            "sonnet",
            &format!(
                "{{ provider: anthropic, baseUrl: \"http://{}\", model: claude-test, timeout: 5s }}",
                mock.addr()
            ),
        )
        .agent(
            "claude",
            "{ model: sonnet, instructions: Answer from the files., tools: [read_file] }",
        )
        .file("README.md", "Hello from the README.\n")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "What does the README say?").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("The README says hello."));

    let events = common::stored(&runtime, &response).await;
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ModelStarted { provider, .. } => Some(provider.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        ["anthropic", "anthropic", "anthropic"],
        "529 retried once"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::ModelRetry { .. }))
    );
    let requests = mock.requests();
    let last = &requests.last().unwrap().body;
    assert_eq!(last["system"], "Answer from the files.");
    assert_eq!(last["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(
        last["messages"][1]["content"][0]["input"],
        json!({"path": "README.md"})
    );
    let result = &last["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Hello from the README."),
        "{result}"
    );
}

/// Model `sonnet` (anthropic) falling back to `gpt` (openai), both at `mock`, and agent
/// `claude` on `sonnet` with `read_file`.
fn falling_back(mock: &MockLlm, fallbacks: &str) -> keel_test_support::TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(
            "{ defaultAgent: claude, retry: { model: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 40ms } } }",
        )
        .model(
            "sonnet",
            &format!(
                "{{ provider: anthropic, baseUrl: \"http://{}\", model: claude-test, timeout: 5s, fallbacks: {fallbacks} }}",
                mock.addr()
            ),
        )
        .openai_model_at("gpt", &mock.base_url())
        .agent("claude", "{ model: sonnet, tools: [read_file] }")
        .file("README.md", "Hello from the README.\n")
        .build()
}

/// Round 1: `sonnet` answers 529 to all three attempts, then `gpt` asks for `read_file`.
fn overloaded_then_the_fallbacks_tool_call(mock: &MockLlm) {
    for _ in 0..3 {
        mock.push(MockResponse::anthropic_error(
            529,
            "overloaded_error",
            "Overloaded",
        ));
    }
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "read_file",
        [r#"{"path": "README.md"}"#],
    )]));
}

/// The providers of the run's model attempts and its fallbacks (from → to).
fn attempts(events: &[keel::Event]) -> (Vec<String>, Vec<(String, String)>) {
    let mut providers = Vec::new();
    let mut fallbacks = Vec::new();
    for event in events {
        match &event.payload {
            EventPayload::ModelStarted { provider, .. } => providers.push(provider.clone()),
            EventPayload::ModelFallback {
                from, to, reason, ..
            } => {
                assert!(reason.message.contains("Overloaded"), "{reason:?}");
                fallbacks.push((from.clone(), to.clone()));
            }
            _ => {}
        }
    }
    (providers, fallbacks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_model_falls_back_and_the_run_stays_on_the_one_that_answered() {
    let mock = MockLlm::start().await;
    overloaded_then_the_fallbacks_tool_call(&mock);
    mock.push(MockResponse::text(["It says hello."]));
    let ws = falling_back(&mock, "[gpt]");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "What does the README say?").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("It says hello."));
    let (providers, fallbacks) = attempts(&common::stored(&runtime, &response).await);
    assert_eq!(
        providers,
        ["anthropic", "anthropic", "anthropic", "openai", "openai"]
    );
    assert_eq!(fallbacks, [("sonnet".to_owned(), "gpt".to_owned())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_that_is_not_sticky_lets_the_next_round_try_the_first_model_again() {
    let mock = MockLlm::start().await;
    overloaded_then_the_fallbacks_tool_call(&mock);
    mock.push(MockResponse::anthropic_text(&["Claude is back."]));
    let ws = falling_back(&mock, "{ models: [gpt], sticky: false }");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "What does the README say?").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("Claude is back."));
    let (providers, fallbacks) = attempts(&common::stored(&runtime, &response).await);
    assert_eq!(
        providers,
        ["anthropic", "anthropic", "anthropic", "openai", "anthropic"]
    );
    assert_eq!(fallbacks, [("sonnet".to_owned(), "gpt".to_owned())]);
}
