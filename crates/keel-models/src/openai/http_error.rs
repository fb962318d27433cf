//! Classification of failures into [`ModelError`]: the single table from HTTP status (and
//! error body) to error kind, `Retry-After` parsing, and transport errors. Messages quote the
//! server's `error.message` (truncated) and never contain request headers, so the API key
//! cannot leak into an error.

use std::time::{Duration, SystemTime};

use keel_types::ModelError;
use reqwest::header::{HeaderMap, LOCATION, RETRY_AFTER};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc2822;

/// Longest server message quoted in an error.
const MESSAGE_LEN: usize = 500;

/// What an error body said, as far as it could be understood.
#[derive(Debug, Default)]
struct ErrorDetails {
    message: String,
    code: Option<String>,
    kind: Option<String>,
}

impl ErrorDetails {
    /// Reads `{"error": {"message", "type", "code"}}`, `{"error": "text"}` or
    /// `{"message", "type", "code"}` (vLLM); any other body is quoted as text.
    fn from_body(body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => Self::from_json(&value),
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                Self {
                    message: crate::truncate(text.trim(), 200).into_owned(),
                    ..Self::default()
                }
            }
        }
    }

    fn from_json(value: &Value) -> Self {
        let error = match value.get("error") {
            Some(Value::String(text)) => {
                return Self {
                    message: crate::truncate(text, MESSAGE_LEN).into_owned(),
                    ..Self::default()
                };
            }
            Some(error @ Value::Object(_)) => error,
            _ => value,
        };
        let text = |key: &str| match error.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        Self {
            message: text("message")
                .map(|m| crate::truncate(&m, MESSAGE_LEN).into_owned())
                .unwrap_or_default(),
            code: text("code"),
            kind: text("type"),
        }
    }

    /// Whether the error says the prompt is too long for the model.
    fn is_context_length(&self) -> bool {
        if self.code.as_deref() == Some("context_length_exceeded") {
            return true;
        }
        let message = self.message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "context length",
            "context window",
            "context size",
        ]
        .iter()
        .any(|marker| message.contains(marker))
    }

    fn message_or(&self, fallback: impl FnOnce() -> String) -> String {
        if self.message.is_empty() {
            fallback()
        } else {
            self.message.clone()
        }
    }
}

/// The one table from HTTP status to error kind.
fn classify(status: u16, retry_after: Option<Duration>, details: &ErrorDetails) -> ModelError {
    let message = details.message_or(|| {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no error message")
            .to_owned()
    });
    match status {
        429 => ModelError::RateLimited {
            retry_after,
            message,
        },
        401 | 403 => ModelError::Auth { status, message },
        500.. => ModelError::Server { status, message },
        400..=499 if details.is_context_length() => ModelError::ContextLength(message),
        _ => ModelError::BadRequest { status, message },
    }
}

/// Classifies a non-success HTTP answer. A redirect is not followed (a `POST` to a model
/// should not move); it is a `BadRequest` naming where the server points.
pub(crate) fn classify_status(status: u16, headers: &HeaderMap, body: &[u8]) -> ModelError {
    if (300..400).contains(&status) {
        let target = headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map_or_else(
                || "nowhere".to_owned(),
                |l| format!("`{}`", crate::truncate(l, 200)),
            );
        return ModelError::BadRequest {
            status,
            message: format!(
                "the endpoint redirects to {target}; Keel does not follow redirects: set the \
                 model's `baseUrl` to where it should go"
            ),
        };
    }
    let details = ErrorDetails::from_body(body);
    let retry_after = if status == 429 {
        retry_after(headers, SystemTime::now())
    } else {
        None
    };
    classify(status, retry_after, &details)
}

/// Classifies an `error` object sent inside an HTTP 200 answer (a chunk or a body). Without a numeric
/// code its status is inferred from the error type; unknown failures count as server errors.
pub(crate) fn classify_stream_error(error: &Value) -> ModelError {
    let details = ErrorDetails::from_json(&serde_json::json!({ "error": error }));
    let numeric = details
        .code
        .as_deref()
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| (400..600).contains(c));
    let markers = [details.kind.as_deref(), details.code.as_deref()];
    let says = |needle: &str| markers.iter().flatten().any(|m| m.contains(needle));
    let status = numeric.unwrap_or(if says("rate_limit") {
        429
    } else if says("auth") || says("api_key") || says("permission") {
        401
    } else if says("invalid_request") || details.is_context_length() {
        400
    } else {
        500
    });
    classify(status, None, &details)
}

/// How long the server asks us to wait: `retry-after-ms` (milliseconds), else `Retry-After`
/// in seconds or as an HTTP date (relative to `now`).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        && let Ok(duration) = Duration::try_from_secs_f64(ms / 1000.0)
    {
        return Some(duration);
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = OffsetDateTime::parse(value, &Rfc2822).ok()?;
    let now = OffsetDateTime::from(now);
    Some(Duration::try_from(date - now).unwrap_or(Duration::ZERO))
}

/// A failure sending the request or waiting for the response head.
pub(crate) fn send_error(error: &(dyn std::error::Error + 'static), timed_out: bool) -> ModelError {
    let text = short_chain(error);
    if timed_out {
        ModelError::Timeout(text)
    } else {
        ModelError::Connect(text)
    }
}

/// A failure reading the body after the response began.
pub(crate) fn body_error(error: &(dyn std::error::Error + 'static), timed_out: bool) -> ModelError {
    let text = short_chain(error);
    if timed_out {
        ModelError::Timeout(text)
    } else {
        ModelError::MalformedStream(format!(
            "the connection broke before the answer was complete: {text}"
        ))
    }
}

/// Whether `error` or one of its sources is an I/O timeout (a connect timeout).
pub(crate) fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(error) = source {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = error.source();
    }
    false
}

/// `error: source: source…` ([`keel_types::error_chain`]), truncated.
fn short_chain(error: &(dyn std::error::Error + 'static)) -> String {
    crate::truncate(&keel_types::error_chain(error), MESSAGE_LEN).into_owned()
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn retry_after_accepts_seconds_dates_and_milliseconds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                now
            ),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "1500"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
    }

    #[test]
    fn a_date_in_the_past_means_no_wait() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn vllm_context_errors_are_recognised() {
        let body = br#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}"#;
        let err = classify_status(400, &HeaderMap::new(), body);
        assert!(matches!(err, ModelError::ContextLength(m) if m.contains("4096")));
    }

    #[test]
    fn plain_text_bodies_are_quoted_shortly() {
        let body = "x".repeat(5000);
        let err = classify_status(502, &HeaderMap::new(), body.as_bytes());
        let ModelError::Server { status, message } = err else {
            panic!("expected a server error");
        };
        assert_eq!(status, 502);
        assert!(message.len() < 300);
    }

    #[test]
    fn stream_errors_are_classified_by_type() {
        let err = classify_stream_error(
            &serde_json::json!({"message": "slow down", "type": "rate_limit_error"}),
        );
        assert!(matches!(err, ModelError::RateLimited { .. }));
        let err = classify_stream_error(&serde_json::json!({"message": "boom"}));
        assert!(matches!(err, ModelError::Server { status: 500, .. }));
    }
}
