//! An agent on `provider: anthropic` runs like any other: its tool round goes to the Messages
//! API as `tool_use` and `tool_result` blocks, the run's events name the provider, and a 529
//! (overloaded) is retried by the runtime.

use keel::{EventPayload, RunStatus, Runtime, Thinking};
use keel_test_support::{AnthropicSse, MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};
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

/// Reasoning with characters a careless encoder would change.
const THOUGHT: &str = "Let me read it first.\n  \"quoted\", tabs\t, ünïcødé ✓ and \\u0041 as text";
const SIGNATURE: &str = "EqQBCgIYAhIM+/9kZW1vc2lnbmF0dXJlGgw=";

/// Round 1: thinking, then a call reading a file that does not exist (40 input tokens, 200
/// written to the cache).
fn thinking_then_a_failing_call() -> MockResponse {
    AnthropicSse::new()
        .message_start(30, 200, 0)
        .thinking_block(0, THOUGHT, SIGNATURE)
        .tool_use_block(
            1,
            &MockToolCall::new(
                "toolu_1",
                "read_file",
                [r#"{"path": "#, r#""missing.txt"}"#],
            ),
        )
        .end("tool_use", 7)
        .response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_goes_back_byte_for_byte_a_failed_call_is_an_error_and_the_prefix_is_cached() {
    let mock = MockLlm::start().await;
    mock.push(thinking_then_a_failing_call());
    mock.push(
        AnthropicSse::new()
            .message_start(35, 0, 200)
            .thinking_block(0, "It is missing.", "sig-b")
            .text_block(1, &["There is ", "no such file."])
            .end("end_turn", 4)
            .response(),
    );
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: claude }")
        .model(
            "sonnet",
            &format!(
                "{{ provider: anthropic, baseUrl: \"http://{}\", model: claude-test, cache: auto, params: {{ thinking: {{ budgetTokens: 2048 }} }} }}",
                mock.addr()
            ),
        )
        .agent(
            "claude",
            "{ model: sonnet, instructions: Answer from the files., tools: [read_file] }",
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "What does missing.txt say?").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(
        response.output.as_deref(),
        Some("There is no such file."),
        "the reasoning is never the answer"
    );
    assert_eq!(response.usage.cache_write_tokens, 200);
    assert_eq!(response.usage.cache_read_tokens, 200);
    assert_eq!(response.usage.prompt_tokens, 230 + 235);

    let events = common::stored(&runtime, &response).await;
    let thinking: Vec<Vec<Thinking>> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ModelCompleted { thinking, .. } => Some(thinking.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        thinking[0],
        [Thinking::Thinking {
            thinking: THOUGHT.into(),
            signature: SIGNATURE.into()
        }],
        "recorded in the round's event"
    );

    let requests = mock.requests();
    let first = &requests[0].body;
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(first["max_tokens"], 4096 + 2048);
    assert_eq!(
        first["system"],
        json!([{"type": "text", "text": "Answer from the files.", "cache_control": {"type": "ephemeral"}}])
    );
    let tools = first["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    let second = &requests[1].body;
    assert_eq!(
        second["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}),
        "the block goes back first and unchanged"
    );
    assert_eq!(second["messages"][1]["content"][1]["type"], "tool_use");
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["is_error"], true, "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falling_back_to_another_provider_leaves_thinking_out_and_says_so() {
    let mock = MockLlm::start().await;
    mock.push(thinking_then_a_failing_call());
    for _ in 0..3 {
        mock.push(MockResponse::anthropic_error(
            529,
            "overloaded_error",
            "Overloaded",
        ));
    }
    mock.push(MockResponse::text(["No such file."]));
    let ws = falling_back(&mock, "[gpt]");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "What does missing.txt say?").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    let events = common::stored(&runtime, &response).await;
    let note = events.iter().find_map(|e| match &e.payload {
        EventPayload::ModelFallback { note, .. } => note.clone(),
        _ => None,
    });
    assert_eq!(
        note.as_deref(),
        Some("1 thinking block(s) written by anthropic are not sent to openai")
    );
    let last = mock.requests().last().unwrap().body.clone();
    assert!(!last.to_string().contains(SIGNATURE), "{last}");
    // The assistant turn (after the user's) keeps its call, translated.
    assert_eq!(last["messages"][1]["tool_calls"][0]["id"], "toolu_1");
}
