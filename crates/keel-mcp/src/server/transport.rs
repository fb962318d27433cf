//! The ways the server is reached: [`serve_stdio`] (one session on this process's stdin and
//! stdout, as MCP clients launch servers; [`serve_io`] on any byte stream) and
//! [`HttpService`] (MCP's streamable HTTP, a session per client, for a web server to mount
//! at a path of its choosing behind its own authentication).

use std::convert::Infallible;
use std::fmt::Display;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use super::backend::Backend;
use super::handler::Handler;

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client's opening handshake failed.
    #[error("the MCP session did not start: {0}")]
    Start(String),
    /// The session's task failed.
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// Serves `backend` over this process's stdin and stdout until the client closes them or
/// `shutdown` is cancelled. Nothing else may write to stdout meanwhile: it carries only
/// JSON-RPC messages. A client that goes away before its handshake is not an error.
pub async fn serve_stdio(
    backend: Arc<dyn Backend>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    serve_io(backend, stdin, stdout, shutdown).await
}

/// Serves `backend` as one session over a byte stream (newline-delimited JSON-RPC, as over
/// stdio) until the client closes it or `shutdown` is cancelled.
pub async fn serve_io<R, W>(
    backend: Arc<dyn Backend>,
    reader: R,
    writer: W,
    shutdown: CancellationToken,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let running = match Handler::new(backend)
        .serve_with_ct((reader, writer), shutdown)
        .await
    {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::debug!(%reason, "The MCP client left before its handshake.");
            return Ok(());
        }
        Err(error) => return Err(ServeError::Start(error.to_string())),
    };
    let reason = running
        .waiting()
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    tracing::debug!(?reason, "The MCP session ended.");
    Ok(())
}

/// How [`HttpService`] guards itself.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The `Host` values (a host, or `host:port`) requests may carry — the protection of a
    /// server on loopback against DNS rebinding; `None` accepts any (when the mounting server
    /// authenticates every request itself).
    pub allowed_hosts: Option<Vec<String>>,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Cancelled when the server shuts down: every session and its streams end.
    pub stop: CancellationToken,
}

/// MCP's streamable HTTP over a [`Backend`] (`POST` JSON-RPC messages, `GET` the session's
/// event stream, `DELETE` the session), sessions kept in memory. Mount it at one path; it
/// answers every method there. Put a [`super::Caller`] into a request's extensions to name
/// who calls.
#[derive(Clone)]
pub struct HttpService {
    inner: StreamableHttpService<Handler, LocalSessionManager>,
}

/// Builds the streamable-HTTP service over `backend`.
pub fn http_service(backend: Arc<dyn Backend>, options: HttpOptions) -> HttpService {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(options.stop)
        .with_max_request_body_bytes(options.max_body_bytes);
    config = match options.allowed_hosts {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => config.disable_allowed_hosts(),
    };
    let handler = Handler::new(backend);
    let inner = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    HttpService { inner }
}

impl HttpService {
    /// Answers one HTTP request (an event stream's response ends with its stream).
    pub async fn handle<B>(&self, request: http::Request<B>) -> http::Response<HttpBody>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send + 'static,
        B::Error: Display,
    {
        self.inner.handle(request).await.map(HttpBody)
    }
}

impl<B> tower_service::Service<http::Request<B>> for HttpService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send + 'static,
    B::Error: Display,
{
    type Response = http::Response<HttpBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}

/// The body of an [`HttpService`] response: JSON, or an event stream.
pub struct HttpBody(BoxBody<Bytes, Infallible>);

impl http_body::Body for HttpBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}
