//! The `anthropic` provider against the mock LLM speaking the Messages API over real SSE on
//! 127.0.0.1: text, tool use (several calls, arguments split across many chunks), usage with
//! cache tokens, thinking blocks skipped, whole answers, and failures classified like the
//! `openai` provider's (529 and a mid-stream `overloaded_error` retryable, 429 with its
//! `retry-after`, 400 fatal with its message).

use std::time::Duration;

use keel_models::anthropic::{AnthropicConfig, AnthropicProvider};
use keel_test_support::{AnthropicSse, MockLlm, MockResponse, MockToolCall};
use keel_types::{Message, ModelError, ModelParams, ModelStopReason, ToolCall, Usage};
use serde_json::json;

use crate::{API_KEY, assemble, events, failure, request};

fn provider(mock: &MockLlm) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        base_url: format!("http://{}", mock.addr()),
        model: "claude-test".into(),
        api_key: Some(API_KEY.into()),
        params: ModelParams::default(),
        timeout: Duration::from_secs(5),
        allow_stream: true,
        max_idle_connections: usize::MAX,
        thinking_budget: None,
        cache: false,
    })
    .unwrap()
}

#[tokio::test]
async fn a_streamed_text_answer_with_cache_usage() {
    let mock = MockLlm::start().await;
    mock.push(
        AnthropicSse::new()
            .message_start(20, 100, 300)
            .ping()
            .thinking_block(0, "Let me think.", "sig-abc")
            .text_block(1, &["Sunny ", "in ", "Paris."])
            .end("end_turn", 6)
            .response(),
    );
    let answer = assemble(&events(&provider(&mock), request(true)).await);
    assert_eq!(answer.text, "Sunny in Paris.", "thinking is not the answer");
    assert_eq!(
        answer.usage,
        Some(Usage {
            prompt_tokens: 420,
            completion_tokens: 6,
            total_tokens: 426,
            cache_write_tokens: 100,
            cache_read_tokens: 300,
            ..Usage::default()
        })
    );
    assert_eq!(
        answer.thinking,
        [("Let me think.".to_owned(), "sig-abc".to_owned())],
        "the reasoning is kept, with its signature"
    );
    assert_eq!(answer.stop, Some(ModelStopReason::Stop));

    let sent = mock.last_request().unwrap();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(API_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.body["system"], "You are terse.");
    assert_eq!(sent.body["messages"][0]["role"], "user");
    assert_eq!(
        sent.body["tools"][0]["input_schema"]["required"],
        json!(["city"])
    );
    assert_eq!(sent.body["max_tokens"], 4096);
    assert_eq!(sent.body["stream"], true);
}

#[tokio::test]
async fn parallel_tool_calls_with_arguments_split_across_many_chunks() {
    let mock = MockLlm::start().await;
    let pieces: Vec<String> =
        r#"{"city": "Paris", "unit": "celsius"}"#.chars().map(String::from).collect();
    mock.push(MockResponse::anthropic_tool_use(&[
        MockToolCall::new("toolu_1", "get_weather", pieces.iter().map(String::as_str)),
        MockToolCall::new("toolu_2", "get_weather", [r#"{"city": "#, r#""Rome"}"#]),
    ]));
    let answer = assemble(&events(&provider(&mock), request(true)).await);
    assert_eq!(
        answer.calls,
        vec![
            (
                "toolu_1".to_owned(),
                "get_weather".to_owned(),
                r#"{"city": "Paris", "unit": "celsius"}"#.to_owned()
            ),
            (
                "toolu_2".to_owned(),
                "get_weather".to_owned(),
                r#"{"city": "Rome"}"#.to_owned()
            ),
        ]
    );
    assert_eq!(answer.stop, Some(ModelStopReason::ToolCalls));
}

#[tokio::test]
async fn tool_results_go_back_as_tool_result_blocks_of_one_user_turn() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::anthropic_text(&["Both sunny."]));
    let mut round = request(true);
    round.messages.push(Message::assistant(
        "",
        vec![
            ToolCall {
                id: "toolu_1".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
            },
            ToolCall {
                id: "toolu_2".into(),
                name: "get_weather".into(),
                arguments: r#"{"city":"Rome"}"#.into(),
            },
        ],
    ));
    round
        .messages
        .push(Message::tool_result("toolu_1", "sunny"));
    round
        .messages
        .push(Message::tool_result("toolu_2", "sunny too"));
    events(&provider(&mock), round).await;
    let messages = mock.last_request().unwrap().body["messages"].clone();
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "sunny too"},
        ]})
    );
}

#[tokio::test]
async fn a_whole_answer_is_decoded_like_a_streamed_one() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json(&json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "Oslo, then.", "signature": "EqQBCgIYAh=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 30, "output_tokens": 8},
    })));
    let answer = assemble(&events(&provider(&mock), request(false)).await);
    assert_eq!(answer.text, "Checking.");
    assert_eq!(
        answer.thinking,
        [
            ("Oslo, then.".to_owned(), "EqQBCgIYAh==".to_owned()),
            (String::new(), "EmwKAhgBEgy3".to_owned())
        ]
    );
    assert_eq!(answer.calls[0].2, r#"{"city":"Oslo"}"#);
    assert_eq!(answer.stop, Some(ModelStopReason::ToolCalls));
    assert_eq!(answer.usage.unwrap().total_tokens, 38);
    assert_eq!(mock.last_request().unwrap().body["stream"], false);
}

#[tokio::test]
async fn max_tokens_and_refusal_map_to_keels_stop_reasons() {
    let mock = MockLlm::start().await;
    for (reason, expected) in [
        ("max_tokens", ModelStopReason::Length),
        ("refusal", ModelStopReason::ContentFilter),
        ("pause_turn", ModelStopReason::Paused),
        ("stop_sequence", ModelStopReason::Stop),
    ] {
        mock.push(
            AnthropicSse::new()
                .message_start(5, 0, 0)
                .text_block(0, &["partial"])
                .end(reason, 1)
                .response(),
        );
        let answer = assemble(&events(&provider(&mock), request(true)).await);
        assert_eq!(answer.stop, Some(expected), "{reason}");
    }
}

#[tokio::test]
async fn failures_are_classified_like_the_openai_providers() {
    let mock = MockLlm::start().await;
    // 529 overloaded: retryable.
    mock.push(MockResponse::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
    ));
    let error = failure(&provider(&mock), request(true)).await;
    assert!(error.is_retryable(), "{error:?}");
    // An `error` event mid-stream: retryable when it says overloaded.
    mock.push(
        AnthropicSse::new()
            .message_start(5, 0, 0)
            .text_block(0, &["Half"])
            .error("overloaded_error", "Overloaded")
            .response(),
    );
    let error = failure(&provider(&mock), request(true)).await;
    assert!(error.is_retryable(), "{error:?}");
    // 429 with retry-after.
    mock.push(
        MockResponse::anthropic_error(429, "rate_limit_error", "Slow down")
            .header("retry-after", "3"),
    );
    let error = failure(&provider(&mock), request(true)).await;
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(3)),
            message: "Slow down".into()
        }
    );
    // 400 invalid request: fatal, its message kept.
    mock.push(MockResponse::anthropic_error(
        400,
        "invalid_request_error",
        "messages: roles must alternate",
    ));
    let error = failure(&provider(&mock), request(true)).await;
    assert!(!error.is_retryable());
    assert!(
        error.to_string().contains("roles must alternate"),
        "{error}"
    );
    // A stream that stops without its stop reason is malformed.
    mock.push(
        AnthropicSse::new()
            .message_start(5, 0, 0)
            .text_block(0, &["cut"])
            .response(),
    );
    let error = failure(&provider(&mock), request(true)).await;
    assert!(matches!(error, ModelError::MalformedStream(_)), "{error:?}");
}
