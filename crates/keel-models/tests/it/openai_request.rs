//! What the `openai` provider sends: the Chat Completions request body and headers.

use keel_test_support::{MockLlm, MockResponse};
use keel_types::{Message, ModelParams, ToolCall};
use serde_json::json;

use crate::{API_KEY, assemble, events, provider, provider_with, request};

#[tokio::test]
async fn the_request_uses_the_chat_completions_format_and_bearer_auth() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["ok"]));
    let mut request = request(true);
    request.messages.push(Message::assistant(
        "",
        vec![ToolCall {
            id: "call_1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        }],
    ));
    request
        .messages
        .push(Message::tool_result("call_1", "sunny, 21°C"));
    request.params = ModelParams {
        temperature: Some(0.2),
        max_tokens: Some(256),
        top_p: Some(0.5),
        stop: vec!["END".into()],
        seed: Some(7),
        presence_penalty: Some(0.25),
        frequency_penalty: Some(-0.5),
    };

    events(&provider(&mock), request).await;

    let sent = mock.last_request().unwrap();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-test",
            "messages": [
                { "role": "system", "content": "You are terse." },
                { "role": "user", "content": "What is the weather in Paris?" },
                { "role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" }
                }] },
                { "role": "tool", "content": "sunny, 21°C", "tool_call_id": "call_1" }
            ],
            "tools": [{ "type": "function", "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": { "city": { "type": "string" } },
                    "required": ["city"]
                }
            } }],
            "stream": true,
            "stream_options": { "include_usage": true },
            "temperature": 0.2,
            "max_tokens": 256,
            "top_p": 0.5,
            "stop": ["END"],
            "seed": 7,
            "presence_penalty": 0.25,
            "frequency_penalty": -0.5
        })
    );
}

#[tokio::test]
async fn a_whole_answer_request_has_no_stream_options_and_no_tools_when_none() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("ok"));
    let mut request = request(false);
    request.tools = std::sync::Arc::from([]);

    events(&provider(&mock), request).await;

    let body = mock.last_request().unwrap().body;
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
    assert!(body.get("tools").is_none());
    assert!(body.get("temperature").is_none());
}

#[tokio::test]
async fn a_whole_answer_request_body_snapshot() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("ok"));
    let provider = provider_with(&mock, |c| {
        c.params = ModelParams {
            temperature: Some(0.3),
            ..ModelParams::default()
        };
    });

    events(&provider, request(false)).await;

    let sent = mock.last_request().unwrap();
    insta::assert_json_snapshot!("whole_answer_request", sent.body);
}

#[tokio::test]
async fn configured_params_are_defaults_that_the_request_overrides() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["ok"]));
    let provider = provider_with(&mock, |c| {
        c.params = ModelParams {
            temperature: Some(0.9),
            max_tokens: Some(100),
            seed: Some(1),
            ..ModelParams::default()
        };
    });
    let mut request = request(true);
    request.params.max_tokens = Some(5);
    request.params.stop = vec!["\n\n".into()];

    events(&provider, request).await;

    let body = mock.last_request().unwrap().body;
    assert_eq!(body["temperature"], json!(0.9));
    assert_eq!(body["max_tokens"], json!(5));
    assert_eq!(body["seed"], json!(1));
    assert_eq!(body["stop"], json!(["\n\n"]));
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["ok"]));
    let provider = provider_with(&mock, |c| c.api_key = None);

    events(&provider, request(true)).await;

    assert_eq!(mock.last_request().unwrap().header("authorization"), None);
}

#[tokio::test]
async fn a_base_url_with_a_trailing_slash_is_accepted() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["ok"]));
    let base = format!("{}/", mock.base_url());
    let provider = provider_with(&mock, |c| c.base_url = base);

    events(&provider, request(true)).await;

    assert_eq!(mock.last_request().unwrap().path, "/v1/chat/completions");
}

#[test]
fn the_config_debug_output_hides_the_key() {
    let mut config = keel_models::OpenAiConfig::new("m");
    config.api_key = Some(API_KEY.into());
    assert!(!format!("{config:?}").contains(API_KEY));
}

#[test]
fn an_invalid_base_url_is_refused_at_construction() {
    let mut config = keel_models::OpenAiConfig::new("m");
    config.base_url = "ftp://example.com".into();
    let error = keel_models::OpenAiProvider::new(config).unwrap_err();
    assert!(
        matches!(error, keel_models::ProviderError::InvalidBaseUrl { .. }),
        "{error}"
    );
}

/// The plain HTTP/1 transport (an `http://` endpoint without a proxy) and reqwest (a client
/// handed in, as for TLS or a proxy) send byte-for-byte the same request head and body, and
/// their answers decode to the same events.
#[tokio::test]
async fn both_transports_send_the_same_request_and_read_the_same_answer() {
    let mock = MockLlm::start().await;
    let plain = provider(&mock);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap();
    let mut config = keel_models::OpenAiConfig::new("gpt-test");
    config.base_url = mock.base_url();
    config.api_key = Some(API_KEY.into());
    let through_reqwest = keel_models::OpenAiProvider::with_client(config, client).unwrap();

    let mut sent = Vec::new();
    let mut answers = Vec::new();
    for provider in [&plain, &through_reqwest] {
        for stream in [true, false] {
            mock.push(if stream {
                MockResponse::text(["Hel", "lo"])
            } else {
                MockResponse::completion_text("Hello")
            });
            answers.push(events(provider, request(stream)).await);
            let request = mock.last_request().unwrap();
            assert_eq!(
                request.header("user-agent"),
                Some(concat!("keel/", env!("CARGO_PKG_VERSION")))
            );
            sent.push(request);
        }
    }
    assert_eq!(sent[0].header("accept"), Some("text/event-stream"));
    assert_eq!(sent[1].header("accept"), Some("application/json"));
    assert_eq!(sent[0], sent[2], "streamed requests differ");
    assert_eq!(sent[1], sent[3], "whole-answer requests differ");
    assert_eq!(answers[0], answers[2]);
    assert_eq!(answers[1], answers[3]);
    assert!(answers[0].len() > 2, "{:?}", answers[0]);
}

/// The plain transport reads a connection a page at a time: answers many times that size, and
/// streamed chunks that straddle its reads, arrive whole and in order, streamed or not.
#[tokio::test]
async fn answers_larger_than_the_read_buffer_arrive_whole() {
    let mock = MockLlm::start().await;
    let plain = provider(&mock);
    // 3,000 numbered pieces, about 40 KiB of SSE, with multi-byte characters across reads.
    let pieces: Vec<String> = (0..3000).map(|i| format!("{i}é ")).collect();
    let whole: String = pieces.concat();
    mock.push(MockResponse::text(&pieces));
    let streamed = assemble(&events(&plain, request(true)).await);
    assert_eq!(streamed.text, whole);
    // A 200 KiB JSON answer in one body.
    let long = "0123456789abcdéf".repeat(12 * 1024);
    mock.push(MockResponse::completion_text(&long));
    let answer = assemble(&events(&plain, request(false)).await);
    assert_eq!(answer.text, long);
}
