//! Failures of the `openai` provider are classified so the runtime knows what to retry.

use std::time::Duration;

use keel_test_support::{MockLlm, MockResponse, MockSse};
use keel_types::ModelError;
use serde_json::json;

use crate::{API_KEY, failure, provider, provider_with, request};

#[tokio::test]
async fn rate_limit_carries_the_retry_after_seconds() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::openai_error(
            429,
            "Rate limit reached",
            "requests",
            Some("rate_limit_exceeded"),
        )
        .header("Retry-After", "7"),
    );

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: "Rate limit reached".into()
        }
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn rate_limit_prefers_retry_after_ms() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::openai_error(429, "slow down", "requests", None)
            .header("retry-after-ms", "250")
            .header("retry-after", "1"),
    );

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(error.retry_after(), Some(Duration::from_millis(250)));
}

#[tokio::test]
async fn rate_limit_accepts_an_http_date() {
    let mock = MockLlm::start().await;
    let in_an_hour = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let date = in_an_hour
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap();
    mock.push(
        MockResponse::openai_error(429, "later", "requests", None).header("Retry-After", date),
    );

    let wait = failure(&provider(&mock), request(true))
        .await
        .retry_after()
        .expect("a wait parsed from the date");

    assert!(
        wait > Duration::from_secs(3500) && wait <= Duration::from_secs(3600),
        "{wait:?}"
    );
}

#[tokio::test]
async fn rate_limit_without_retry_after_has_no_wait() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::error(429, "too many"));

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: None,
            message: "too many".into()
        }
    );
}

#[tokio::test]
async fn http_500_is_a_retryable_server_error_with_the_servers_message() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        500,
        "The server had an error",
        "server_error",
        None,
    ));

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(
        error,
        ModelError::Server {
            status: 500,
            message: "The server had an error".into()
        }
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn http_503_with_an_html_body_is_a_server_error() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::error(503, "<html>Service Unavailable</html>"));

    let error = failure(&provider(&mock), request(false)).await;

    assert!(
        matches!(error, ModelError::Server { status: 503, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn http_401_and_403_are_auth_errors_without_the_key() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        401,
        "Incorrect API key provided",
        "invalid_request_error",
        Some("invalid_api_key"),
    ));
    mock.push(MockResponse::error(
        403,
        r#"{"error":{"message":"forbidden"}}"#,
    ));
    let provider = provider(&mock);

    let first = failure(&provider, request(true)).await;
    let second = failure(&provider, request(true)).await;

    assert_eq!(
        first,
        ModelError::Auth {
            status: 401,
            message: "Incorrect API key provided".into()
        }
    );
    assert_eq!(
        second,
        ModelError::Auth {
            status: 403,
            message: "forbidden".into()
        }
    );
    assert!(!first.is_retryable());
    for error in [first, second] {
        assert!(!error.to_string().contains(API_KEY));
        assert!(!format!("{error:?}").contains(API_KEY));
    }
}

#[tokio::test]
async fn context_length_400_is_its_own_kind() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        "invalid_request_error",
        Some("context_length_exceeded"),
    ));

    let error = failure(&provider(&mock), request(true)).await;

    let ModelError::ContextLength(message) = &error else {
        panic!("expected ContextLength, got {error:?}");
    };
    assert!(message.contains("maximum context length"));
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn other_400s_are_bad_requests_with_the_message() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        400,
        "Invalid schema for function 'get_weather'",
        "invalid_request_error",
        Some("invalid_function_parameters"),
    ));

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(
        error,
        ModelError::BadRequest {
            status: 400,
            message: "Invalid schema for function 'get_weather'".into()
        }
    );
}

#[tokio::test]
async fn a_long_error_message_is_truncated() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        400,
        "é".repeat(2000),
        "invalid_request_error",
        None,
    ));

    let error = failure(&provider(&mock), request(true)).await;

    let ModelError::BadRequest { message, .. } = error else {
        panic!("expected BadRequest");
    };
    assert!(message.len() <= 504, "{} bytes", message.len());
    assert!(message.ends_with('…'));
}

#[tokio::test]
async fn a_chunk_that_is_not_json_is_a_malformed_stream_naming_it() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .text("partial ")
            .raw("data: {not json\n\n")
            .finish("stop")
            .done(),
    ));

    let items = crate::run(&provider(&mock), request(true)).await.unwrap();

    assert_eq!(
        items[0],
        Ok(keel_types::ModelEvent::TextDelta {
            text: "partial ".into()
        }),
        "deltas before the bad chunk are delivered"
    );
    let Err(ModelError::MalformedStream(message)) = &items[1] else {
        panic!("expected MalformedStream, got {:?}", items[1]);
    };
    assert!(
        message.contains("not valid JSON") && message.contains("{not json"),
        "{message}"
    );
    assert_eq!(items.len(), 2, "the stream ends after the error");
}

#[tokio::test]
async fn a_chunk_of_an_impossible_shape_is_a_malformed_stream() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new()
            .chunk(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}))
            .finish("tool_calls")
            .done(),
    ));

    let error = failure(&provider(&mock), request(true)).await;

    assert!(
        matches!(&error, ModelError::MalformedStream(m) if m.contains("before its name")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_stream_cut_before_done_is_malformed() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(MockSse::new().role().text("Half an ans")));

    let error = failure(&provider(&mock), request(true)).await;

    assert!(
        matches!(&error, ModelError::MalformedStream(m) if m.contains("ended before the answer was complete")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_broken_connection_mid_stream_is_malformed() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        MockSse::new().role().text("Half").abort(),
    ));

    let error = failure(&provider(&mock), request(true)).await;

    assert!(matches!(error, ModelError::MalformedStream(_)), "{error:?}");
}

#[tokio::test]
async fn a_finish_reason_without_done_still_completes() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(MockSse::new().text("ok").finish("stop")));

    let answer = crate::assemble(&crate::events(&provider(&mock), request(true)).await);

    assert_eq!(answer.text, "ok");
    assert_eq!(answer.stop, Some(keel_types::ModelStopReason::Stop));
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_classified() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(MockSse::new().text("a").chunk(
        json!({"error": {"message": "overloaded", "type": "server_error"}}),
    )));

    let error = failure(&provider(&mock), request(true)).await;

    assert_eq!(
        error,
        ModelError::Server {
            status: 500,
            message: "overloaded".into()
        }
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = keel_models::OpenAiConfig::new("m");
    config.base_url = format!("http://127.0.0.1:{port}/v1");
    let provider = keel_models::OpenAiProvider::new(config).unwrap();

    let error = failure(&provider, request(true)).await;

    assert!(matches!(error, ModelError::Connect(_)), "{error:?}");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn no_response_head_within_the_timeout_is_a_timeout() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["late"]).delay(Duration::from_secs(2)));
    let provider = provider_with(&mock, |c| c.timeout = Duration::from_millis(200));

    let error = failure(&provider, request(true)).await;

    assert!(matches!(error, ModelError::Timeout(_)), "{error:?}");
}

#[tokio::test]
async fn a_silent_gap_between_chunks_is_a_timeout() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["a", "b", "c"]).chunk_delay(Duration::from_secs(2)));
    let provider = provider_with(&mock, |c| c.timeout = Duration::from_millis(300));

    let items = crate::run(&provider, request(true)).await.unwrap();

    assert!(
        matches!(items.last(), Some(Err(ModelError::Timeout(_)))),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_says_where_it_points() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::error(308, "")
            .header("location", "https://models.example/v1/chat/completions"),
    );

    let error = failure(&provider(&mock), request(true)).await;

    let ModelError::BadRequest { status, message } = &error else {
        panic!("expected BadRequest, got {error:?}");
    };
    assert_eq!(*status, 308);
    assert!(
        message.contains("`https://models.example/v1/chat/completions`")
            && message.contains("baseUrl"),
        "{message}"
    );
    assert!(!error.is_retryable());
    assert_eq!(mock.requests().len(), 1, "the redirect was followed");
}
