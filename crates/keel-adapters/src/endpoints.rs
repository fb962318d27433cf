//! A run's endpoints on loopback, for its program alone: the model endpoint (OpenAI Chat
//! Completions under `/v1`, its API key the run's secret) and the tools endpoint (MCP under
//! `/<secret>/mcp`, the secret in the path so an MCP client needs no header). Anything
//! without the secret is refused; the server lives as long as the run's program.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use keel_mcp::server::{HttpOptions, HttpService, http_service};
use keel_runtime::adapter::RunCalls;
use keel_types::{RequestId, ToolSpec};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::chat;

/// The largest request body either endpoint takes.
const MAX_BODY: usize = 32 << 20;

/// A run's endpoints, served until dropped.
pub(crate) struct Endpoints {
    pub addr: SocketAddr,
    pub secret: String,
    _stop: DropGuard,
}

impl Endpoints {
    /// The model endpoint's base URL (what `OPENAI_BASE_URL` is set to).
    pub(crate) fn model_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The tools endpoint's URL.
    pub(crate) fn tools_url(&self) -> String {
        format!("http://{}/{}/mcp", self.addr, self.secret)
    }
}

#[derive(Clone)]
struct Served {
    secret: Arc<str>,
    calls: RunCalls,
    model: Arc<str>,
    mcp: HttpService,
}

/// Starts a run's endpoints on a free loopback port.
pub(crate) async fn start(
    request_id: RequestId,
    tools: Vec<ToolSpec>,
    calls: RunCalls,
    model: &str,
) -> std::io::Result<Endpoints> {
    let secret = secret()?;
    let stop = CancellationToken::new();
    let mcp = http_service(
        Arc::new(crate::tools::RunTools {
            request_id,
            tools,
            calls: calls.clone(),
        }),
        HttpOptions {
            allowed_hosts: Some(vec!["127.0.0.1".into(), "localhost".into()]),
            max_body_bytes: MAX_BODY,
            stop: stop.clone(),
        },
    );
    let served = Served {
        secret: secret.clone().into(),
        calls,
        model: model.into(),
        mcp,
    };
    let router = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/{secret}/mcp", any(mcp_call))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(served);
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(error) = served.await {
            tracing::warn!(%error, "A run's adapter endpoints stopped.");
        }
    });
    Ok(Endpoints {
        addr,
        secret,
        _stop: stop.drop_guard(),
    })
}

/// 32 random bytes, hex.
fn secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two secrets are equal, in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(headers: &HeaderMap, secret: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|key| same(key.trim().as_bytes(), secret.as_bytes()))
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    (status, axum::Json(chat::error_body(message, kind))).into_response()
}

fn unauthorized() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "this endpoint serves one Keel run: use the API key its program was given",
        "invalid_request_error",
    )
}

async fn models(State(served): State<Served>, headers: HeaderMap) -> Response {
    if !authorized(&headers, &served.secret) {
        return unauthorized();
    }
    axum::Json(json!({
        "object": "list",
        "data": [{"id": &*served.model, "object": "model", "created": 0, "owned_by": "keel"}],
    }))
    .into_response()
}

async fn chat_completions(
    State(served): State<Served>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&headers, &served.secret) {
        return unauthorized();
    }
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => {
            let message = format!("the body is not JSON: {e}");
            return error(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
        }
    };
    let request = match chat::read_request(&body) {
        Ok(request) => request,
        Err(bad) => return error(StatusCode::BAD_REQUEST, &bad.0, "invalid_request_error"),
    };
    let reply = match served.calls.model(request.ask).await {
        Ok(reply) => reply,
        // The run has ended (a budget, the model's failure, a cancel): the program can only
        // stop, so a status its client does not retry.
        Err(refused) => return error(StatusCode::BAD_REQUEST, &refused.message, "keel_run_ended"),
    };
    let id = format!("chatcmpl-{}", nonce());
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if !request.stream {
        return axum::Json(chat::completion(&id, created, &reply)).into_response();
    }
    let mut sse = String::new();
    for chunk in chat::chunks(&id, created, &reply, request.include_usage) {
        sse.push_str("data: ");
        sse.push_str(&chunk.to_string());
        sse.push_str("\n\n");
    }
    sse.push_str("data: [DONE]\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from(sse))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn nonce() -> String {
    format!(
        "{:x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

async fn mcp_call(
    State(served): State<Served>,
    Path(secret): Path<String>,
    request: Request,
) -> Response {
    if !same(secret.as_bytes(), served.secret.as_bytes()) {
        return StatusCode::NOT_FOUND.into_response();
    }
    served.mcp.handle(request).await.map(Body::new)
}
