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
