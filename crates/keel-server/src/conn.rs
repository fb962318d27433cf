//! Connections: the accept loop of [`crate::serve`] and what it does against slow and idle
//! clients, so a crowd of half-open connections cannot pin the server.
//!
//! 1. Counting: at most `server.maxConnections` connections are held, at most
//!    `server.maxConnectionsPerClient` per client IP address; a connection beyond either is
//!    closed as soon as it is accepted (before anything is read from it).
//! 2. Headers: hyper closes a connection that has not sent a whole request head within
//!    `server.headerReadTimeout` of opening or of its previous answer — which also bounds how
//!    long a kept-alive connection may sit idle.
//! 3. Bodies: [`limit_body_time`] (a layer of the router) fails a request body that has not
//!    arrived within `server.bodyReadTimeout` of its headers; the handler answers 400.
//! 4. Shutdown: when `stop` fires the loop stops accepting, asks every connection to finish
//!    its request in flight and close, and waits for them; dropping the loop's future drops
//!    every connection with it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use keel_workspace::spec::ServerSpec;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long the loop waits after a failed `accept` (e.g. out of file descriptors) before it
/// tries again, so it does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What the accept loop allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
}

impl ConnLimits {
    pub(crate) fn from_spec(spec: &ServerSpec) -> Self {
        Self {
            header_read_timeout: spec.header_read_timeout.0,
            max_connections: usize::try_from(spec.max_connections).unwrap_or(usize::MAX),
            max_connections_per_client: usize::try_from(spec.max_connections_per_client)
                .unwrap_or(usize::MAX),
        }
    }
}

/// The open connections, in all and per client address.
struct Counts {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
    /// `total`, for `/metrics` (`keel_http_connections`).
    gauge: Gauge,
}

impl Counts {
    fn set_total(&mut self, total: usize) {
        self.total = total;
        self.gauge.set(i64::try_from(total).unwrap_or(i64::MAX));
    }
}

/// One counted connection; it is uncounted when dropped (when its task ends, however).
struct Slot {
    counts: Arc<Mutex<Counts>>,
    client: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let total = counts.total.saturating_sub(1);
        counts.set_total(total);
        if let Some(n) = counts.by_client.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_client.remove(&self.client);
            }
        }
    }
}

/// A slot for a connection from `client`, or `None` when a limit is reached.
fn take_slot(counts: &Arc<Mutex<Counts>>, limits: ConnLimits, client: IpAddr) -> Option<Slot> {
    let mut guard = counts.lock().unwrap_or_else(PoisonError::into_inner);
    let of_client = guard.by_client.get(&client).copied().unwrap_or(0);
    if guard.total >= limits.max_connections || of_client >= limits.max_connections_per_client {
        return None;
    }
    let total = guard.total + 1;
    guard.set_total(total);
    guard.by_client.insert(client, of_client + 1);
    Some(Slot {
        counts: counts.clone(),
        client,
    })
}

/// Serves `app` on `listener` until `stop` fires and the open connections have closed;
/// `gauge` follows how many are open.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
    gauge: Gauge,
) {
    let counts = Arc::new(Mutex::new(Counts {
        total: 0,
        by_client: HashMap::new(),
        gauge,
    }));
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = connections.join_next() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "Accepting a connection failed.");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let Some(slot) = take_slot(&counts, limits, peer.ip()) else {
            tracing::debug!(client = %peer.ip(), "Connection limit reached; connection closed.");
            drop(stream);
            continue;
        };
        connections.spawn(serve_connection(
            stream,
            app.clone(),
            limits,
            stop.clone(),
            slot,
        ));
    }
    while connections.join_next().await.is_some() {}
}

/// Serves one connection until the client closes it, a limit closes it, or `stop` fires
/// (then the request in flight is answered first).
async fn serve_connection(
    stream: TcpStream,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
    _slot: Slot,
) {
    // Streams are written frame by frame: without `TCP_NODELAY` the frames after the first
    // wait for the client's delayed acknowledgement (about 40 ms on Linux) whenever the run
    // is faster than that (`cargo bench -p keel-cli --bench protocols`).
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY could not be set on a connection");
    }
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "Connection ended with an error.");
    }
}

/// The router layer that gives each request body `timeout` to arrive (counted from when its
/// headers did).
pub(crate) async fn limit_body_time(
    State(timeout): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let body = Body::new(DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(timeout)),
    });
    next.run(Request::from_parts(parts, body)).await
}

/// A body that fails once its deadline has passed before it ended.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive within server.bodyReadTimeout",
            ))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
