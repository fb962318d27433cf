//! Streamed and whole answers of the `openai` provider decode into the same deltas.

use keel_test_support::{MockLlm, MockResponse, MockSse, MockToolCall};
use keel_types::{ModelEvent, ModelStopReason, Usage};
use serde_json::json;

use crate::{assemble, events, provider, provider_with, request};

#[tokio::test]
async fn text_deltas_arrive_in_order_then_usage_then_stop() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["The sky ", "is ", "clear."]));

    let events = events(&provider(&mock), request(true)).await;

    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta {
                text: "The sky ".into()
            },
            ModelEvent::TextDelta { text: "is ".into() },
            ModelEvent::TextDelta {
                text: "clear.".into()
            },
            ModelEvent::Usage {
                usage: Usage {
                    prompt_tokens: 10,
                    completion_tokens: 3,
                    total_tokens: 13,
                    ..Usage::default()
                }
            },
            ModelEvent::Stop {
                reason: ModelStopReason::Stop
            },
        ]
    );
}

#[tokio::test]
async fn cached_and_reasoning_tokens_are_read_from_the_usage_details() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .role()
            .text("Done.")
            .finish("stop")
            .chunk(json!({
                "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": "m", "choices": [],
                "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                          "prompt_tokens_details": {"cached_tokens": 1920},
                          "completion_tokens_details": {"reasoning_tokens": 256}}
            }))
            .done(),
    ));
    let answer = assemble(&events(&provider(&mock), request(true)).await);
    assert_eq!(
        answer.usage,
        Some(Usage {
            cache_read_tokens: 1920,
            reasoning_tokens: 256,
            ..Usage::new(2006, 300)
        })
    );
}

#[tokio::test]
async fn tool_call_arguments_split_over_many_chunks_are_assembled() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_abc",
        "get_weather",
        ["{\"ci", "ty\": \"Pa", "ris\", \"unit", "\": \"C\"}"],
    )]));

    let events = events(&provider(&mock), request(true)).await;
    let answer = assemble(&events);

    assert_eq!(
        answer.calls,
        vec![(
            "call_abc".to_owned(),
            "get_weather".to_owned(),
            r#"{"city": "Paris", "unit": "C"}"#.to_owned()
        )]
    );
    let arg_deltas = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallArgsDelta { .. }))
        .count();
    assert_eq!(arg_deltas, 4, "each fragment is passed on as it arrives");
    assert_eq!(answer.stop, Some(ModelStopReason::ToolCalls));
}

#[tokio::test]
async fn two_interleaved_tool_calls_in_one_answer_keep_their_arguments_apart() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .role()
            .tool_call_start(0, "call_1", "get_weather")
            .tool_call_args(0, "{\"city\":")
            .tool_call_start(1, "call_2", "get_time")
            .tool_call_args(1, "{\"tz\":")
            .tool_call_args(0, "\"Paris\"}")
            .tool_call_args(1, "\"CET\"}")
            .finish("tool_calls")
            .usage(12, 8)
            .done(),
    ));

    let answer = assemble(&events(&provider(&mock), request(true)).await);

    assert_eq!(
        answer.calls,
        vec![
            (
                "call_1".into(),
                "get_weather".into(),
                r#"{"city":"Paris"}"#.into()
            ),
            ("call_2".into(), "get_time".into(), r#"{"tz":"CET"}"#.into()),
        ]
    );
    assert_eq!(
        answer.usage,
        Some(Usage {
            prompt_tokens: 12,
            completion_tokens: 8,
            total_tokens: 20,
            ..Usage::default()
        })
    );
}

#[tokio::test]
async fn text_and_a_tool_call_in_one_answer() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .role()
            .text("Let me check.")
            .tool_call_start(0, "call_9", "get_weather")
            .tool_call_args(0, "{}")
            .finish("tool_calls")
            .done(),
    ));

    let answer = assemble(&events(&provider(&mock), request(true)).await);

    assert_eq!(answer.text, "Let me check.");
    assert_eq!(answer.calls.len(), 1);
    assert_eq!(answer.usage, None, "no usage chunk, no usage event");
    assert_eq!(answer.stop, Some(ModelStopReason::ToolCalls));
}

#[tokio::test]
async fn frames_split_at_odd_places_and_crlf_endings_decode_the_same() {
    let mock = MockLlm::start().await;
    let chunk = json!({"choices":[{"index":0,"delta":{"content":"héllo"},"finish_reason":null}]});
    let frame = format!("data: {chunk}\r\n\r\n");
    let (a, b) = frame.as_bytes().split_at(frame.find('é').unwrap() + 1); // inside 'é'
    mock.push(
        MockResponse::sse(
            MockSse::new()
                .raw(": keep-alive comment\n\n")
                .raw_bytes(a)
                .raw_bytes(b)
                .finish("length")
                .done(),
        )
        .chunk_delay(std::time::Duration::from_millis(5)),
    );

    let answer = assemble(&events(&provider(&mock), request(true)).await);

    assert_eq!(answer.text, "héllo");
    assert_eq!(answer.stop, Some(ModelStopReason::Length));
}

#[tokio::test]
async fn a_whole_completion_yields_the_same_events_as_a_stream() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("All good."));
    mock.push(MockResponse::completion_tool_calls([
        MockToolCall::new("call_1", "get_weather", [r#"{"city":"Paris"}"#]),
        MockToolCall::new("call_2", "get_weather", [r#"{"city":"Rome"}"#]),
    ]));
    let provider = provider(&mock);

    let text = events(&provider, request(false)).await;
    let calls = assemble(&events(&provider, request(false)).await);

    assert_eq!(
        text,
        vec![
            ModelEvent::TextDelta {
                text: "All good.".into()
            },
            ModelEvent::Usage {
                usage: Usage {
                    prompt_tokens: 10,
                    completion_tokens: 5,
                    total_tokens: 15,
                    ..Usage::default()
                }
            },
            ModelEvent::Stop {
                reason: ModelStopReason::Stop
            },
        ]
    );
    assert_eq!(
        calls.calls,
        vec![
            (
                "call_1".into(),
                "get_weather".into(),
                r#"{"city":"Paris"}"#.into()
            ),
            (
                "call_2".into(),
                "get_weather".into(),
                r#"{"city":"Rome"}"#.into()
            ),
        ]
    );
    assert_eq!(calls.stop, Some(ModelStopReason::ToolCalls));
}

#[tokio::test]
async fn a_server_that_streams_when_asked_not_to_is_still_understood() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["a", "b"]));

    let answer = assemble(&events(&provider(&mock), request(false)).await);

    assert_eq!(answer.text, "ab");
    assert_eq!(answer.stop, Some(ModelStopReason::Stop));
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_still_understood() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("whole"));

    let answer = assemble(&events(&provider(&mock), request(true)).await);

    assert_eq!(answer.text, "whole");
}

#[tokio::test]
async fn streaming_disabled_in_the_config_asks_for_whole_answers() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("whole"));
    let provider = provider_with(&mock, |c| c.allow_stream = false);

    let answer = assemble(&events(&provider, request(true)).await);

    assert_eq!(answer.text, "whole");
    let sent = mock.last_request().unwrap();
    assert_eq!(sent.body["stream"], json!(false));
    assert!(sent.body.get("stream_options").is_none());
}

#[tokio::test]
async fn one_provider_serves_many_concurrent_rounds() {
    let mock = MockLlm::start().await;
    mock.respond_with(|req| {
        let input = req.last_content_of("user").unwrap_or_default().to_owned();
        MockResponse::text([format!("echo: {input}")])
    });
    let provider = std::sync::Arc::new(provider(&mock));

    let mut handles = Vec::new();
    for i in 0..20 {
        let provider = std::sync::Arc::clone(&provider);
        handles.push(tokio::spawn(async move {
            let mut request = request(true);
            request.messages[1] = keel_types::Message::user(format!("n{i}"));
            assemble(&events(provider.as_ref(), request).await).text
        }));
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), format!("echo: n{i}"));
    }
    assert_eq!(mock.request_count(), 20);
}
