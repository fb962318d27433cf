//! Keel's HTTP service: an axum [`Router`] over a [`keel::Runtime`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = keel::Runtime::builder().workspace("examples/quickstart").build()?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8642").await?;
//! axum::serve(listener, keel_server::router(runtime)).await?;
//! # Ok(()) }
//! ```
//!
//! Routes:
//! - `GET /api/health` → `{"status":"ok"}`;
//! - `GET /v1/models` → the workspace's agents as OpenAI models;
//! - `POST /v1/chat/completions` → OpenAI Chat Completions (stream and non-stream), `model`
//!   is the agent id;
//! - `GET /v1/capabilities` → what this server offers (see [`capabilities`]);
//! - operator API under `/api`: `POST /api/requests` (`{input, agent?, sessionId?, wait?}` →
//!   202 `{requestId}`, or 200 and the final `RunResponse` with `wait: true`),
//!   `GET /api/requests?status=&agent=&session=&limit=`, `GET /api/requests/{id}`,
//!   `GET /api/requests/{id}/events?after=SEQ` (JSON page, or SSE with
//!   `Accept: text/event-stream`, resumable with `Last-Event-ID`),
//!   `POST /api/requests/{id}/cancel`, `GET /api/approvals?status=`,
//!   `POST /api/approvals/{id}/approve|deny` (`{reason?}`; 409 when already decided).
//!
//! Auth: when the workspace configures API keys (`runtime.server.apiKeys`), every route but
//! `/api/health` needs `Authorization: Bearer <key>` (401 otherwise); `client` keys may use
//! `/v1/*` only (403 elsewhere), `operator` keys everything. Without keys there is no auth,
//! and callers should bind to loopback only (see [`auth_configured`]).
//!
//! Every error answers an OpenAI-style JSON body (see [`ApiError`]).

mod api;
mod auth;
mod error;
mod openai;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

pub use auth::auth_configured;
pub use error::ApiError;

/// The largest request body accepted (1 MiB); larger bodies answer 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The HTTP routes over `runtime`.
pub fn router(runtime: keel::Runtime) -> Router {
    let keys = Arc::new(auth::Keys::from_runtime(&runtime));
    Router::new()
        .route("/api/health", get(health))
        .route("/v1/models", get(openai::models))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route(
            "/api/requests",
            post(api::create_request).get(api::list_requests),
        )
        .route("/api/requests/{id}", get(api::get_request))
        .route("/api/requests/{id}/events", get(api::request_events))
        .route("/api/requests/{id}/cancel", post(api::cancel_request))
        .route("/api/approvals", get(api::list_approvals))
        .route("/api/approvals/{id}/approve", post(api::approve))
        .route("/api/approvals/{id}/deny", post(api::deny))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(runtime)
        .layer(axum::middleware::from_fn_with_state(
            keys,
            auth::require_key,
        ))
}

async fn health() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /v1/capabilities`: what this server offers.
///
/// - `object`: always `"capabilities"`;
/// - `streaming`: `POST /v1/chat/completions` accepts `stream: true` (SSE chunks);
/// - `tools`: `"workspace"` — tools come from the workspace inventory; client-sent `tools` are
///   ignored;
/// - `progressEvents`: whether Keel progress events can be opted into on the OpenAI stream
///   (not yet).
pub async fn capabilities() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "object": "capabilities",
        "streaming": true,
        "tools": "workspace",
        "progressEvents": false,
    }))
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

/// Serves the router on `listener` until `shutdown` completes, then stops accepting and lets
/// requests in flight finish.
pub async fn serve(
    runtime: keel::Runtime,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(runtime))
        .with_graceful_shutdown(shutdown)
        .await
}
