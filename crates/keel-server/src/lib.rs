//! Keel's HTTP service over a [`keel::Runtime`]: the OpenAI-compatible facade under `/v1`,
//! the runtime and operator API under `/api`, Prometheus `/metrics` and the OpenAPI document
//! at `/api/openapi.json`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let telemetry = keel_server::Telemetry::new();
//! let runtime = keel::Runtime::builder()
//!     .workspace("examples/quickstart")
//!     .observer(telemetry.observer())
//!     .build()?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8642").await?;
//! let shutdown = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! keel_server::serve(runtime, telemetry, listener, shutdown).await?;
//! # Ok(()) }
//! ```
//!
//! Every route is listed once in a route table (`openapi.rs`) from which the router, the
//! per-route auth layer and the OpenAPI document are built. Auth: when the workspace
//! configures API keys (`runtime.server.apiKeys`), every route but `/api/health` needs
//! `Authorization: Bearer <key>` (401 otherwise); `client` keys may use the facade and their
//! own requests (403 elsewhere), `operator` keys everything. Without keys there is no auth,
//! and callers should bind to loopback only (see [`auth_configured`]).
//!
//! Every error answers an OpenAI-style JSON body (see [`ApiError`]). The crate's README
//! describes the facade's headers, the limits and the metrics.

mod a2a;
mod agui;
mod anthropic;
mod approvals;
mod auth;
mod body;
mod branches;
mod conn;
mod console;
mod error;
mod evals;
mod follow;
mod health;
mod inventory;
mod live;
mod mcp;
mod memory;
mod metrics;
mod openai;
mod openapi;
mod reload;
mod requests;
mod sessions;
mod skills;
mod state;
mod tasks;
mod telemetry;
mod trace;
mod workflows;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::MethodRouter;
use tokio_util::sync::CancellationToken;

pub use auth::auth_configured;
pub use error::ApiError;
pub use mcp::{McpBackend, serve_mcp_stdio};
pub use openai::{PROGRESS_HEADER, SESSION_HEADER};
pub use telemetry::{MemoryProbe, MemoryUse, Telemetry};

use state::AppState;

/// Loads `runtime`'s workspace again and swaps it in (SIGHUP, `server.watch`, and `POST
/// /api/workspace/reload` all come here): the answer the route gives, or why the workspace
/// was refused (every error; the loaded one keeps serving).
pub async fn reload_workspace(runtime: &keel::Runtime) -> Result<serde_json::Value, String> {
    reload::reload_runtime(runtime, None)
        .await
        .map_err(|error| error.to_string())
}

/// The HTTP routes over `runtime`, with telemetry of their own: `/metrics` then shows the
/// store's counts but no latencies (use [`router_with`] and a runtime built with the
/// telemetry's observer for those).
pub fn router(runtime: keel::Runtime) -> Router {
    router_with(runtime, Telemetry::new())
}

/// The HTTP routes over `runtime`, reporting through `telemetry` (whose
/// [`Telemetry::observer`] should have been given to the runtime's builder).
pub fn router_with(runtime: keel::Runtime, telemetry: Telemetry) -> Router {
    build_router(runtime, telemetry, CancellationToken::new())
}

/// The routes, with `/mcp`'s sessions ended when `stop` fires.
fn build_router(runtime: keel::Runtime, telemetry: Telemetry, stop: CancellationToken) -> Router {
    telemetry.describe(&runtime.workspace());
    let keys = Arc::new(auth::Keys::from_runtime(&runtime));
    let server = &runtime.workspace().runtime.server;
    let body_limit = usize::try_from(server.max_body_bytes).unwrap_or(usize::MAX);
    let body_time = server.body_read_timeout.0;
    let mut by_path: BTreeMap<&'static str, MethodRouter<AppState>> = BTreeMap::new();
    for route in openapi::routes() {
        // Layers run outermost last-added: auth first, then the query's parameters, then the
        // body's media type, then the path's parameters.
        let mut handler = (route.handler)();
        if route.path.contains('{') {
            handler = handler.route_layer(axum::middleware::from_fn(body::require_utf8_path));
        }
        handler = handler
            .route_layer(axum::middleware::from_fn(body::require_json))
            .route_layer(axum::middleware::from_fn_with_state(
                route.query,
                openapi::check_query,
            ))
            .route_layer(axum::middleware::from_fn_with_state(
                (keys.clone(), route.access),
                auth::require_key,
            ));
        // The Messages facade answers every error, its auth's included, in Anthropic's shape.
        if route.path == anthropic::PATH {
            handler = handler.route_layer(axum::middleware::map_response(anthropic::error_shape));
        }
        let merged = match by_path.remove(route.path) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        by_path.insert(route.path, merged);
    }
    let mut router = Router::new();
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        // A caller's `traceparent` becomes the parent of the runs its request starts.
        .layer(axum::middleware::from_fn(trace::keep_incoming))
        .layer(axum::middleware::from_fn_with_state(
            body_time,
            conn::limit_body_time,
        ))
        // The console's sign-in reads the keys and keeps its sessions with them.
        .layer(axum::Extension(keys.clone()))
        .with_state(app_state(runtime, telemetry, !keys.is_empty(), stop))
}

/// The state every route shares, `/mcp`'s service included.
fn app_state(
    runtime: keel::Runtime,
    telemetry: Telemetry,
    keys_configured: bool,
    stop: CancellationToken,
) -> AppState {
    let admission = Arc::new(state::Admission::for_runtime(&runtime));
    let mcp = mcp::http_service(mcp::HttpMount {
        runtime: runtime.clone(),
        admission: admission.clone(),
        request_timeout: state::request_timeout(&runtime),
        keys_configured,
        stop,
    });
    let parts = state::StateParts {
        telemetry,
        openapi: openapi::openapi(keys_configured),
        admission,
        mcp,
    };
    AppState::new(runtime, parts)
}

/// `GET /v1/capabilities`: what this server offers.
///
/// - `object`: always `"capabilities"`;
/// - `streaming`: `POST /v1/chat/completions` accepts `stream: true` (SSE chunks);
/// - `tools`: `"workspace"` — tools come from the workspace inventory; client-sent `tools` are
///   ignored;
/// - `progressEvents`: Keel progress events can be opted into on the chat stream with the
///   header named by `progressHeader` (`true`); they arrive as SSE events named `keel`;
/// - `sessionHeader`: the header that makes a chat request a turn of a stored session.
pub async fn capabilities() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "object": "capabilities",
        "streaming": true,
        "tools": "workspace",
        "progressEvents": true,
        "progressHeader": PROGRESS_HEADER,
        "sessionHeader": SESSION_HEADER,
    }))
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// What a graceful shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownSummary {
    /// Runs that finished within the grace period.
    pub finished: usize,
    /// Runs stopped at the end of the grace period and recorded `interrupted`.
    pub interrupted: usize,
}

/// Serves `runtime` on `listener` until `shutdown` completes, then shuts down gracefully:
/// no new connections or runs are accepted, runs in flight get `server.shutdownGrace` to
/// finish, and the rest are stopped and recorded `interrupted` (resumable with
/// `keel runs resume`). Connections still open a few seconds after that are dropped.
///
/// Slow and idle clients are held to `server.headerReadTimeout`, `server.bodyReadTimeout`,
/// `server.maxConnections` and `server.maxConnectionsPerClient` (see the crate's README).
pub async fn serve(
    runtime: keel::Runtime,
    telemetry: Telemetry,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<ShutdownSummary> {
    let grace = runtime.workspace().runtime.server.shutdown_grace.0;
    let stop = CancellationToken::new();
    let limits = conn::ConnLimits::from_spec(&runtime.workspace().runtime.server);
    // MCP sessions outlive the accept loop: their calls in flight get the grace period too.
    let mcp_stop = CancellationToken::new();
    // On a shared store: take over, claim queued requests, follow the other replicas.
    let replica = runtime.serve_replica(Some(Arc::new(telemetry.clone())));
    let connections = telemetry.connections();
    let app = build_router(runtime.clone(), telemetry, mcp_stop.clone());
    let server = conn::accept_loop(listener, app, limits, stop.clone(), connections);
    let mut server = std::pin::pin!(server);
    tokio::select! {
        () = &mut server => return Ok(ShutdownSummary { finished: 0, interrupted: 0 }),
        () = shutdown => {}
    }
    stop.cancel();
    drop(replica);
    let report = runtime.shutdown(grace).await;
    mcp_stop.cancel();
    // The runs left interrupted go to the other replicas now, not when the lease expires.
    if let Err(error) = runtime.release_lease().await {
        tracing::warn!(%error, "Cannot release the store lease; it expires by itself.");
    }
    // Runs have ended, so their streams end (MCP sessions are closed); give connections a
    // moment to drain.
    match tokio::time::timeout(Duration::from_secs(5), &mut server).await {
        Ok(()) => {}
        Err(_) => tracing::warn!("connections still open after shutdown; closing them"),
    }
    Ok(ShutdownSummary {
        finished: report.finished,
        interrupted: report.interrupted,
    })
}
