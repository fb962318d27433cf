//! Parsing what clients send: JSON bodies, query strings, enum values and session ids, each
//! failing with a 400 that names what is wrong.

use std::collections::HashMap;
use std::str::FromStr;

use axum::body::HttpBody;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequestParts, Path, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use keel::SessionId;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ApiError;

/// The middleware of every route: a request that carries a body must say it is JSON
/// (`Content-Type: application/json`, with or without parameters such as `charset`, or a
/// `+json` type such as `application/merge-patch+json`, or JSON lines —
/// `application/x-ndjson`, which `POST /api/memory/import` takes); anything else is a 415. A
/// request without a body needs no type.
pub(crate) async fn require_json(request: Request, next: Next) -> Result<Response, ApiError> {
    let body = request.body();
    let has_body = !body.is_end_stream() && body.size_hint().exact() != Some(0);
    if has_body && !is_json(request.headers()) {
        let found = request
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        return Err(ApiError::UnsupportedMediaType(found));
    }
    Ok(next.run(request).await)
}

/// The middleware of every route with path parameters: a parameter that is not UTF-8 once
/// percent-decoded (`/api/sessions/%ff%fe`) is a JSON 400 `invalid_encoding` naming it, like
/// every other error, instead of the router's plain-text rejection.
pub(crate) async fn require_utf8_path(request: Request, next: Next) -> Result<Response, ApiError> {
    let (mut parts, body) = request.into_parts();
    let checked = Path::<HashMap<String, String>>::from_request_parts(&mut parts, &()).await;
    if let Err(PathRejection::FailedToDeserializePathParams(failed)) = checked
        && let ErrorKind::InvalidUtf8InPathParam { key } = failed.into_kind()
    {
        return Err(ApiError::InvalidEncoding { param: key });
    }
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// Whether the request's `Content-Type` is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", subtype)) => {
            matches!(subtype, "json" | "x-ndjson" | "jsonl") || subtype.ends_with("+json")
        }
        _ => false,
    }
}

/// Parses a JSON body, which must be an object; an empty body parses as `{}` when
/// `empty_ok`.
pub(crate) fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    empty_ok: bool,
) -> Result<T, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::BadRequest {
                message: rejection.body_text(),
                param: None,
            }
        }
    })?;
    let body: &[u8] = if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &body
    };
    let invalid = |e: serde_json::Error| ApiError::BadRequest {
        message: format!("invalid request body: {e}"),
        param: None,
    };
    // Every body is a JSON object; serde alone would also read a struct from an array.
    let value: Value = serde_json::from_slice(body).map_err(invalid)?;
    if !value.is_object() {
        return Err(ApiError::BadRequest {
            message: "invalid request body: expected a JSON object".into(),
            param: None,
        });
    }
    serde_json::from_value(value).map_err(invalid)
}

/// Parses a query string (`a=1&b=x`) into `T`: every value is a string, except that values
/// made only of digits also parse as numbers (for `limit`, `after`); empty values count as
/// absent. (The route table's [`crate::openapi::check_query`] has already checked each
/// declared parameter's value.)
pub(crate) fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    let mut map = serde_json::Map::new();
    for (key, value) in query_pairs(query)? {
        if value.is_empty() {
            continue;
        }
        let value = match value.parse::<u64>() {
            Ok(n) if is_numeric_param(&key) => Value::from(n),
            _ => Value::String(value),
        };
        map.insert(key, value);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| ApiError::BadRequest {
        message: format!("invalid query: {e}"),
        param: None,
    })
}

/// The decoded `key=value` pairs of a query string, in order.
pub(crate) fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(key)?, percent_decode(value)?))
        })
        .collect()
}

fn is_numeric_param(key: &str) -> bool {
    matches!(key, "limit" | "after" | "keep")
}

/// Parses an optional enum query value.
pub(crate) fn parse_opt_enum<T: FromStr>(
    value: Option<&str>,
    param: &'static str,
) -> Result<Option<T>, ApiError> {
    value.map(|v| parse_enum(v, param)).transpose()
}

/// Decodes `%XX` escapes and `+` (space) of a query component.
fn percent_decode(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::BadRequest {
        message: format!("invalid query encoding: `{text}`"),
        param: None,
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Checks a session id from the client against the one rule (1–128 characters of
/// `[A-Za-z0-9._-]`); `param` names where it came from (header, path, query or body field).
pub(crate) fn session_id(text: &str, param: &'static str) -> Result<SessionId, ApiError> {
    SessionId::parse(text).map_err(|error| ApiError::InvalidSessionId { param, error })
}

/// A store or runtime failure, without internals beyond the error's own message.
pub(crate) fn internal(error: impl Into<keel::Error>) -> ApiError {
    ApiError::Internal(error.into().to_string())
}

/// Parses an enum value (`status=`) by its wire name.
pub(crate) fn parse_enum<T: FromStr>(value: &str, param: &'static str) -> Result<T, ApiError> {
    value.parse().map_err(|_| ApiError::BadRequest {
        message: format!("invalid `{param}`: `{value}`"),
        param: Some(param),
    })
}
