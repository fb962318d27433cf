//! The plain transport's client: HTTP/1.1 connections to one endpoint, on hyper's connection
//! API, kept in a pool of our own.
//!
//! A connection is back in the pool the moment its answer has been read to the end; the next
//! call takes it and waits the moment it needs to be ready. So the pool never holds more
//! connections than calls were in flight at once. hyper-util's pooled client, which this
//! replaced, handed a connection back from a task of its own, and a call that found none idle
//! meanwhile opened another: under `serve_load` at 1,000 concurrent completions its pool held
//! up to 1,098 connections for at most 1,000 calls in flight.
//!
//! The pool is a stack (the connection used last is used next, so the rest can expire), holds
//! at most [`Pool::max_idle`] connections, and closes one idle for [`Pool::idle_timeout`] (a
//! task runs while any are idle). A request on a kept-alive connection that the server closed
//! before answering (its idle close crossing the request) goes out once more on a new
//! connection, as browsers and most HTTP clients do: at worst the server answers it twice,
//! and the first answer never arrives.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use keel_types::ModelError;
use tokio::net::TcpStream;

use super::http_error::{self, timed_out};

type Sender = SendRequest<Full<Bytes>>;

/// How long an idle connection stays in the pool (reqwest's default too).
const POOL_IDLE: Duration = Duration::from_secs(90);

/// How a transport's pool keeps connections that are not in use.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pool {
    /// An idle connection is closed after this long.
    pub idle_timeout: Duration,
    /// At most this many idle connections are kept; one that comes back to a full pool is
    /// closed.
    pub max_idle: usize,
}

impl Pool {
    pub fn new(max_idle: usize) -> Self {
        Self {
            idle_timeout: POOL_IDLE,
            max_idle,
        }
    }
}

/// A pooled HTTP/1.1 client of one endpoint (`host:port`).
pub(super) struct Http1Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// What to connect to, as `host:port`.
    authority: String,
    connect_timeout: Duration,
    read_buffer: usize,
    pool: Pool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Idle connections, the one returned last on top.
    idle: Vec<Idle>,
    /// Whether a task is closing the expired ones.
    reaping: bool,
}

struct Idle {
    sender: Sender,
    since: Instant,
}

/// A connection lent to one exchange: handed back by [`Lease::release`] once its answer has
/// been read to the end, closed when dropped before.
pub(super) struct Lease {
    sender: Sender,
    shared: Arc<Shared>,
}

impl Http1Client {
    pub fn new(
        authority: String,
        connect_timeout: Duration,
        read_buffer: usize,
        pool: Pool,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                authority,
                connect_timeout,
                read_buffer,
                pool,
                state: Mutex::default(),
            }),
        }
    }

    /// Sends the request `make` builds (its URI in origin form, its `Host` header set) and
    /// waits for the response head. `make` runs again if the request has to go out again.
    pub async fn send(
        &self,
        make: impl Fn() -> Result<http::Request<Full<Bytes>>, ModelError>,
    ) -> Result<(http::Response<Incoming>, Lease), ModelError> {
        let (mut sender, mut reused) = match self.idle().await {
            Some(sender) => (sender, true),
            None => (self.connect().await?, false),
        };
        loop {
            match sender.try_send_request(make()?).await {
                Ok(response) => {
                    let lease = Lease {
                        sender,
                        shared: self.shared.clone(),
                    };
                    return Ok((response, lease));
                }
                Err(mut error) => {
                    let unsent = error.take_message().is_some();
                    let error = error.into_error();
                    // A kept-alive connection the server closed as the request went out (its
                    // idle close crossing ours): once more, on a new connection.
                    if reused && (unsent || closed_before_answering(&error)) {
                        tracing::debug!(%error, "A pooled model connection was closed; the request goes out on a new one.");
                        sender = self.connect().await?;
                        reused = false;
                        continue;
                    }
                    return Err(http_error::send_error(&error, timed_out(&error)));
                }
            }
        }
    }

    /// An idle connection ready for a request, if the pool has one.
    async fn idle(&self) -> Option<Sender> {
        loop {
            let Idle { mut sender, since } = self.shared.lock().idle.pop()?;
            if since.elapsed() >= self.shared.pool.idle_timeout {
                continue;
            }
            // Ready as soon as the connection's task has taken in the end of the last answer;
            // an error means it closed meanwhile.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    async fn connect(&self) -> Result<Sender, ModelError> {
        let shared = &self.shared;
        let stream = connect_tcp(&shared.authority, shared.connect_timeout)
            .await
            .map_err(|e| http_error::send_error(&e, e.kind() == std::io::ErrorKind::TimedOut))?;
        let (sender, connection) = http1::Builder::new()
            .read_buf_exact_size(Some(shared.read_buffer))
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http_error::send_error(&e, false))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "A model connection ended with an error.");
            }
        });
        Ok(sender)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `sender` for the next request, unless the pool is full.
    fn put(self: &Arc<Self>, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut state = self.lock();
        if state.idle.len() >= self.pool.max_idle {
            return;
        }
        state.idle.push(Idle {
            sender,
            since: Instant::now(),
        });
        if !state.reaping
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            state.reaping = true;
            runtime.spawn(reap(Reaping {
                shared: Arc::downgrade(self),
                stopped: false,
            }));
        }
    }
}

/// Closes the connections idle for longer than the timeout, until none is idle (or the
/// client is gone).
async fn reap(mut reaping: Reaping) {
    loop {
        let wait = {
            let Some(shared) = reaping.shared.upgrade() else {
                return;
            };
            let timeout = shared.pool.idle_timeout;
            let mut state = shared.lock();
            let now = Instant::now();
            state.idle.retain(|idle| {
                now.duration_since(idle.since) < timeout && !idle.sender.is_closed()
            });
            match state.idle.iter().map(|idle| idle.since).min() {
                Some(oldest) => (oldest + timeout).saturating_duration_since(now),
                None => {
                    state.reaping = false;
                    reaping.stopped = true;
                    return;
                }
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// The reaper's hold on its client: if its task is dropped unfinished (its runtime shut
/// down, maybe before the task ever ran), the next connection put back starts another.
struct Reaping {
    shared: Weak<Shared>,
    /// Whether the reaper said so itself.
    stopped: bool,
}

impl Drop for Reaping {
    fn drop(&mut self) {
        if !self.stopped
            && let Some(shared) = self.shared.upgrade()
        {
            shared.lock().reaping = false;
        }
    }
}

impl Lease {
    /// The answer was read to its end: the connection goes back to the pool.
    pub fn release(self) {
        self.shared.put(self.sender);
    }
}

/// Whether `error` says the connection ended before any answer began: closed, reset or
/// broken while the request went out.
fn closed_before_answering(error: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    if error.is_incomplete_message() || error.is_canceled() || error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted);
        }
        source = cause.source();
    }
    false
}

/// A TCP connection to `authority` (`host:port`) with `TCP_NODELAY`, trying its addresses in
/// turn, each within `timeout`.
async fn connect_tcp(authority: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = None;
    for address in tokio::net::lookup_host(authority).await? {
        match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Ok(Err(error)) => last = Some(error),
            Err(_) => {
                last = Some(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to {address} timed out"),
                ));
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{authority} resolves to no address"),
        )
    }))
}
