//! [`ApiError`]: every error the service answers, mapped to a status and an OpenAI-style
//! body (`{"error":{"message","type","param","code"}}`) in one table.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The header a state-changing request made with the console's session cookie carries its
/// CSRF token in (checked by `auth::require_key`, named by [`ApiError::Csrf`]'s message).
pub(crate) const CSRF_HEADER: &str = "x-keel-csrf";
/// An error answered to an HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The body is not valid JSON or does not have the expected shape.
    BadRequest {
        message: String,
        param: Option<&'static str>,
    },
    /// A field has the wrong JSON type; `param` names it (`temperature`, `messages[0].role`).
    InvalidType {
        param: String,
        /// What it must be, e.g. `a number`.
        expected: &'static str,
        /// What it was, e.g. `a string`.
        got: &'static str,
    },
    /// A field Keel knows but does not support (a sampling parameter the agent's own model
    /// settings decide); `reason` says why.
    UnsupportedParameter { param: String, reason: String },
    /// A supported field with a value Keel does not support (e.g. `n` other than 1).
    UnsupportedValue { param: String, message: String },
    /// A field the API does not have.
    UnknownParameter(String),
    /// A required field (named) is missing.
    MissingParameter(String),
    /// A session id (header, path, query or body; `param` says which) breaks the rule.
    InvalidSessionId {
        param: &'static str,
        error: keel_types::InvalidSessionId,
    },
    /// A path parameter (named) is not UTF-8 once percent-decoded.
    InvalidEncoding { param: String },
    /// A request with a body whose `Content-Type` is not JSON (the type sent, if any).
    UnsupportedMediaType(Option<String>),
    /// The body is larger than the server's limit (`server.maxBodyBytes`).
    PayloadTooLarge,
    /// The `model` names no agent of the workspace.
    ModelNotFound(String),
    /// No such route.
    NotFound,
    /// The route exists but not with this method.
    MethodNotAllowed,
    /// The run could not start or ended failed; the message is the run's own.
    RunFailed(String),
    /// The run was cancelled before it answered.
    RunCancelled,
    /// The server shut down before the run (named) answered; it can be resumed.
    RunInterrupted(String),
    /// No API key, or one that is not configured.
    Unauthorized,
    /// The API key's role may not use this route.
    Forbidden,
    /// A state-changing request made with the console's session cookie lacks its CSRF token.
    Csrf,
    /// The request continues a session another principal created; the message names the
    /// session id the caller sent and nothing of the session.
    SessionForbidden(String),
    /// A named resource (request, approval) does not exist; the message names it.
    ResourceNotFound(String),
    /// The resource is not in a state that allows the operation (e.g. already decided).
    Conflict(String),
    /// Every run slot and queue place is taken; try again after `retry_after` seconds.
    TooManyRequests { retry_after: u64 },
    /// The API key's daily budget (`server.apiKeys[].budget`) is spent; it renews at the
    /// end of the UTC day, `retry_after` seconds away.
    BudgetExceeded { message: String, retry_after: u64 },
    /// The server is shutting down and takes no new work.
    ShuttingDown,
    /// The run ran out of time (`server.requestTimeout` or `limits.runTimeout`).
    Timeout(String),
    /// The store or runtime failed; the message is safe to show.
    Internal(String),
}

impl ApiError {
    /// The HTTP status, the OpenAI error `type`, the `param` and the `code`.
    fn parts(&self) -> (StatusCode, &'static str, Option<&str>, Option<&'static str>) {
        match self {
            Self::BadRequest { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                *param,
                None,
            ),
            Self::InvalidType { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("invalid_type"),
            ),
            Self::UnsupportedParameter { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("unsupported_parameter"),
            ),
            Self::UnsupportedValue { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("unsupported_value"),
            ),
            Self::UnknownParameter(param) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("unknown_parameter"),
            ),
            Self::MissingParameter(param) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("missing_required_parameter"),
            ),
            Self::InvalidSessionId { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("invalid_session_id"),
            ),
            Self::InvalidEncoding { param } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                Some("invalid_encoding"),
            ),
            Self::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                None,
                Some("unsupported_media_type"),
            ),
            Self::PayloadTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                None,
                Some("payload_too_large"),
            ),
            Self::ModelNotFound(_) => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
            Self::NotFound => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                None,
                Some("unknown_route"),
            ),
            Self::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                None,
                Some("method_not_allowed"),
            ),
            Self::RunFailed(_) => (StatusCode::BAD_GATEWAY, "server_error", None, None),
            Self::RunInterrupted(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                None,
                Some("interrupted"),
            ),
            Self::RunCancelled => (
                StatusCode::BAD_GATEWAY,
                "server_error",
                None,
                Some("cancelled"),
            ),
            Self::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
            ),
            Self::Forbidden => (
                StatusCode::FORBIDDEN,
                "invalid_request_error",
                None,
                Some("forbidden"),
            ),
            Self::Csrf => (
                StatusCode::FORBIDDEN,
                "invalid_request_error",
                None,
                Some("csrf"),
            ),
            Self::SessionForbidden(_) => (
                StatusCode::FORBIDDEN,
                "invalid_request_error",
                None,
                Some("session_forbidden"),
            ),
            Self::ResourceNotFound(_) => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                None,
                Some("not_found"),
            ),
            Self::Conflict(_) => (
                StatusCode::CONFLICT,
                "invalid_request_error",
                None,
                Some("conflict"),
            ),
            Self::TooManyRequests { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                None,
                Some("rate_limit_exceeded"),
            ),
            Self::BudgetExceeded { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "insufficient_quota",
                None,
                Some("budget_exceeded"),
            ),
            Self::ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                None,
                Some("shutting_down"),
            ),
            Self::Timeout(_) => (
                StatusCode::GATEWAY_TIMEOUT,
                "server_error",
                None,
                Some("timeout"),
            ),
            Self::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                None,
                None,
            ),
        }
    }

    /// The human-readable message.
    fn message(&self) -> String {
        match self {
            Self::BadRequest { message, .. } => message.clone(),
            Self::InvalidType {
                param,
                expected,
                got,
            } => format!("invalid type for `{param}`: expected {expected}, but got {got}"),
            Self::UnsupportedParameter { param, reason } => {
                format!("unsupported parameter: `{param}` {reason}")
            }
            Self::UnsupportedValue { message, .. } => message.clone(),
            Self::UnknownParameter(param) => {
                format!("unrecognized request argument supplied: `{param}`")
            }
            Self::MissingParameter(param) => format!("missing required parameter: `{param}`"),
            Self::InvalidSessionId { error, .. } => error.to_string(),
            Self::InvalidEncoding { param } => {
                format!("the path parameter `{param}` is not valid UTF-8 once percent-decoded")
            }
            Self::UnsupportedMediaType(Some(found)) => format!(
                "the request body must be JSON (Content-Type: application/json), not `{found}`"
            ),
            Self::UnsupportedMediaType(None) => {
                "the request body must be JSON: send Content-Type: application/json".into()
            }
            Self::PayloadTooLarge => {
                "the request body is larger than this server accepts (server.maxBodyBytes)".into()
            }
            Self::ModelNotFound(model) => format!("The model `{model}` does not exist"),
            Self::NotFound => "no such route".into(),
            Self::MethodNotAllowed => "this route does not accept this method".into(),
            Self::RunFailed(message) => message.clone(),
            Self::RunCancelled => "the request was cancelled".into(),
            Self::RunInterrupted(id) => format!(
                "the server shut down before the request finished; request `{id}` is recorded as interrupted and can be resumed"
            ),
            Self::Unauthorized => {
                "a valid API key is required (Authorization: Bearer <key>)".into()
            }
            Self::Forbidden => "this API key may not use this route".into(),
            Self::Csrf => format!(
                "a request made with the console's session cookie must carry its CSRF token in `{}`",
                CSRF_HEADER
            ),
            Self::BudgetExceeded { message, .. } => message.clone(),
            Self::ResourceNotFound(message)
            | Self::Conflict(message)
            | Self::Timeout(message)
            | Self::SessionForbidden(message) => message.clone(),
            Self::TooManyRequests { retry_after } => format!(
                "the server is at capacity (every run slot and queue place is taken); retry after {retry_after}s"
            ),
            Self::ShuttingDown => "the server is shutting down; retry on another instance".into(),
            // 5xx bodies never carry internals: the detail goes to the log only.
            Self::Internal(detail) => {
                tracing::error!(%detail, "Internal error answering a request.");
                "the server failed to answer; see its log".into()
            }
        }
    }

    /// The OpenAI-style error object (`{"error":{..}}`).
    pub fn body(&self) -> serde_json::Value {
        let (_, kind, param, code) = self.parts();
        json!({
            "error": { "message": self.message(), "type": kind, "param": param, "code": code }
        })
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match self {
            Self::TooManyRequests { retry_after } | Self::BudgetExceeded { retry_after, .. } => {
                Some(retry_after)
            }
            Self::ShuttingDown => Some(5),
            _ => None,
        };
        let unauthorized = matches!(self, Self::Unauthorized);
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        // Every 401 names its scheme (RFC 9110): a bearer key, no OAuth — so an MCP client
        // that meets it does not start an OAuth discovery flow.
        if unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(WWW_AUTHENTICATE),
            );
        }
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The challenge of every 401: an API key as a bearer token.
pub(crate) const WWW_AUTHENTICATE: &str = "Bearer realm=\"keel\"";

/// Maps a runtime failure: what the caller got wrong is 4xx, the rest 5xx without internals.
pub(crate) fn runtime_error(error: impl Into<keel::Error>) -> ApiError {
    use keel::RuntimeError;
    use keel_types::StoreError;
    match error.into() {
        keel::Error::Runtime(RuntimeError::UnknownAgent { name, .. }) => {
            ApiError::ModelNotFound(name)
        }
        keel::Error::Runtime(RuntimeError::NoDefaultAgent) => ApiError::BadRequest {
            message: "no agent given and the workspace has no default agent".into(),
            param: Some("agent"),
        },
        keel::Error::Runtime(
            RuntimeError::InvalidInput(message)
            | RuntimeError::Skill(message)
            | RuntimeError::Memory(message),
        ) => ApiError::BadRequest {
            message,
            param: None,
        },
        keel::Error::Runtime(RuntimeError::NotFound(message)) => {
            ApiError::ResourceNotFound(message)
        }
        keel::Error::Runtime(RuntimeError::Conflict(message)) => ApiError::Conflict(message),
        keel::Error::Runtime(RuntimeError::ShuttingDown) => ApiError::ShuttingDown,
        keel::Error::Runtime(e @ RuntimeError::SessionForbidden(_)) => {
            ApiError::SessionForbidden(e.to_string())
        }
        keel::Error::Runtime(RuntimeError::Store(StoreError::NotFound(id)))
        | keel::Error::Store(StoreError::NotFound(id)) => {
            ApiError::ResourceNotFound(format!("no request `{id}`"))
        }
        keel::Error::Runtime(e @ RuntimeError::ModelUnavailable { .. }) => {
            ApiError::RunFailed(e.to_string())
        }
        other => ApiError::Internal(other.to_string()),
    }
}
