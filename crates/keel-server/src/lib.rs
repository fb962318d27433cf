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
//!   is the agent id.
//!
//! Every error answers an OpenAI-style JSON body (see [`ApiError`]).

mod error;
mod openai;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

pub use error::ApiError;

/// The largest request body accepted (1 MiB); larger bodies answer 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The HTTP routes over `runtime`.
pub fn router(runtime: keel::Runtime) -> Router {
    Router::new()
        .route("/api/health", get(health))
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(runtime)
}

async fn health() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
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
