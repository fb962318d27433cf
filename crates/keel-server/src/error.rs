//! [`ApiError`]: every error the service answers, mapped to a status and an OpenAI-style
//! body (`{"error":{"message","type","param","code"}}`) in one table.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to an HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The body is not valid JSON or does not have the expected shape.
    BadRequest {
        message: String,
        param: Option<&'static str>,
    },
    /// The body is larger than [`crate::MAX_BODY_BYTES`].
    PayloadTooLarge,
    /// The `model` names no agent of the workspace.
    ModelNotFound(String),
    /// No such route.
    NotFound,
    /// The run could not start or ended failed; the message is the run's own.
    RunFailed(String),
    /// The run was cancelled before it answered.
    RunCancelled,
    /// No API key, or one that is not configured.
    Unauthorized,
    /// The API key's role may not use this route.
    Forbidden,
    /// A named resource (request, approval) does not exist; the message names it.
    ResourceNotFound(String),
    /// The resource is not in a state that allows the operation (e.g. already decided).
    Conflict(String),
    /// The store or runtime failed; the message is safe to show.
    Internal(String),
}

impl ApiError {
    /// The HTTP status, the OpenAI error `type`, the `param` and the `code`.
    fn parts(
        &self,
    ) -> (
        StatusCode,
        &'static str,
        Option<&'static str>,
        Option<&'static str>,
    ) {
        match self {
            Self::BadRequest { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                *param,
                None,
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
                Some("not_found"),
            ),
            Self::RunFailed(_) => (StatusCode::BAD_GATEWAY, "server_error", None, None),
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
            Self::PayloadTooLarge => format!(
                "the request body is larger than {} bytes",
                crate::MAX_BODY_BYTES
            ),
            Self::ModelNotFound(model) => format!("The model `{model}` does not exist"),
            Self::NotFound => "no such route".into(),
            Self::RunFailed(message) => message.clone(),
            Self::RunCancelled => "the request was cancelled".into(),
            Self::Unauthorized => {
                "a valid API key is required (Authorization: Bearer <key>)".into()
            }
            Self::Forbidden => "this API key may not use this route".into(),
            Self::ResourceNotFound(message) | Self::Conflict(message) => message.clone(),
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
        (self.status(), axum::Json(self.body())).into_response()
    }
}
