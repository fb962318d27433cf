//! The plain transport's client: HTTP/1.1 connections to one endpoint, on hyper's connection
//! API, kept in a pool of our own.
//!
//! **An idle connection is only its socket.** Each exchange puts hyper's connection state
//! (its buffers, its request channel) around a socket for the one request and its answer, and
//! takes the socket back out when the answer has been read to the end. hyper keeps about
//! 24 KiB per connection (an 8 KiB write buffer, the 4 KiB read buffer, a channel block of
//! 10 KiB); kept for every idle connection, that was half of `keel serve`'s live heap at rest
//! after `serve_load` (44 → 22 MiB), and a resident set that grew round after round as the
//! pool followed the load and later requests touched later pages of the kept buffers. No
//! task runs per connection either: whoever awaits the exchange (the reader of the answer)
//! drives it, which spares a wake-up of another task per chunk of the answer.
//!
//! A connection is back in the pool the moment its answer has been read to the end, before
//! its caller goes on. So the pool never holds more connections than calls were in flight at
//! once. hyper-util's pooled client, which this replaced, handed a connection back from a task
//! of its own, and a call that found none idle meanwhile opened another: under `serve_load` at
//! 1,000 concurrent completions its pool held up to 1,098 connections for at most 1,000 calls
//! in flight.
//!
//! The pool is a stack (the connection used last is used next, so the rest can expire), holds
//! at most [`Pool::max_idle`] connections, and closes one idle for [`Pool::idle_timeout`] (a
//! task runs while any are idle). An idle socket the server closed (or wrote to unasked) is
//! noticed when it is next taken, or by that task, and closed; one whose answer said
//! `Connection: close` (or came as HTTP/1.0) is not kept. A request on a kept-alive
//! connection that the server closed before answering (its idle close crossing the request)
//! goes out once more on a new connection, as browsers and most HTTP clients do: at worst the
//! server answers it twice, and the first answer never arrives.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use keel_types::ModelError;
use tokio::net::TcpStream;

use super::http_error::{self, timed_out};

type Sender = SendRequest<Full<Bytes>>;
type Conn = Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// How long an idle connection stays in the pool (reqwest's default too).
const POOL_IDLE: Duration = Duration::from_secs(90);

/// How a transport's pool keeps connections that are not in use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool {
    /// An idle connection is closed after this long.
    pub idle_timeout: Duration,
    /// At most this many idle connections are kept; one that comes back to a full pool is
    /// closed.
    pub max_idle: usize,
}

impl Pool {
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            idle_timeout: POOL_IDLE,
            max_idle,
        }
    }
}

/// A pooled HTTP/1.1 client of one endpoint (`host:port`).
pub(crate) struct Http1Client {
    shared: Arc<Shared>,
}

struct Shared {
    /// What to connect to, as `host:port`.
    authority: String,
    connect_timeout: Duration,
    /// hyper's settings for each exchange's connection state.
    builder: http1::Builder,
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

/// A kept-alive connection between exchanges: only its socket, which is all an idle
/// connection needs.
struct Idle {
    stream: TcpStream,
    since: Instant,
}

/// A connection lent to one exchange, driven by whoever awaits the exchange (there is no task
/// per connection): handed back by [`Lease::release`] once its answer has been read to the
/// end, closed when dropped before.
pub(crate) struct Lease {
    /// Boxed: hyper's connection state is some 700 bytes, and the lease moves into the body.
    conn: Box<Conn>,
    /// Dropped at the end of the answer, which ends hyper's side of the exchange.
    sender: Sender,
    /// Whether hyper's side has ended (it is not polled again).
    ended: bool,
    /// Whether the answer lets the connection be used again (HTTP/1.1 without
    /// `Connection: close`).
    reusable: bool,
    shared: Arc<Shared>,
}

/// How an attempt to send a request on a connection ended.
enum Attempt {
    Answered(http::Response<Incoming>),
    Failed {
        unsent: bool,
        error: hyper::Error,
    },
    /// The connection ended without a word about the request.
    Ended,
}

impl Http1Client {
    pub(super) fn new(
        authority: String,
        connect_timeout: Duration,
        read_buffer: usize,
        pool: Pool,
    ) -> Self {
        let mut builder = http1::Builder::new();
        builder.read_buf_exact_size(Some(read_buffer));
        Self {
            shared: Arc::new(Shared {
                authority,
                connect_timeout,
                builder,
                pool,
                state: Mutex::default(),
            }),
        }
    }

    /// Sends the request `make` builds (its URI in origin form, its `Host` header set) and
    /// waits for the response head. `make` runs again if the request has to go out again.
    pub(super) async fn send(
        &self,
        make: impl Fn() -> Result<http::Request<Full<Bytes>>, ModelError>,
    ) -> Result<(http::Response<Incoming>, Lease), ModelError> {
        let (mut stream, mut reused) = match self.shared.take_idle() {
            Some(stream) => (stream, true),
            None => (self.connect().await?, false),
        };
        loop {
            let mut lease = self.shared.lease(stream).await?;
            let failure = match lease.request(make()?).await {
                Attempt::Answered(response) => {
                    lease.reusable = keeps_alive(&response);
                    return Ok((response, lease));
                }
                Attempt::Failed { unsent, error } => {
                    if !(reused && (unsent || closed_before_answering(&error))) {
                        return Err(http_error::send_error(&error, timed_out(&error)));
                    }
                    error.to_string()
                }
                Attempt::Ended if reused => "the connection ended".to_owned(),
                Attempt::Ended => {
                    return Err(ModelError::Connect(format!(
                        "the connection to {} closed before an answer began",
                        self.shared.authority
                    )));
                }
            };
            // A kept-alive connection the server closed as the request went out (its idle
            // close crossing ours): once more, on a new connection.
            tracing::debug!(error = %failure, "A pooled model connection was closed; the request goes out on a new one.");
            stream = self.connect().await?;
            reused = false;
        }
    }

    async fn connect(&self) -> Result<TcpStream, ModelError> {
        let shared = &self.shared;
        connect_tcp(&shared.authority, shared.connect_timeout)
            .await
            .map_err(|e| http_error::send_error(&e, e.kind() == std::io::ErrorKind::TimedOut))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection still open, if the pool has one.
    fn take_idle(&self) -> Option<TcpStream> {
        let mut state = self.lock();
        while let Some(Idle { stream, since }) = state.idle.pop() {
            if since.elapsed() < self.pool.idle_timeout && still_open(&stream) {
                return Some(stream);
            }
        }
        None
    }

    /// hyper's state for one exchange on `stream`.
    async fn lease(self: &Arc<Self>, stream: TcpStream) -> Result<Lease, ModelError> {
        let (sender, conn) = self
            .builder
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http_error::send_error(&e, false))?;
        Ok(Lease {
            conn: Box::new(conn),
            sender,
            ended: false,
            reusable: false,
            shared: self.clone(),
        })
    }

    /// Keeps `stream` for the next request, unless the pool is full.
    fn put(self: &Arc<Self>, stream: TcpStream) {
        let mut state = self.lock();
        if state.idle.len() >= self.pool.max_idle {
            return;
        }
        state.idle.push(Idle {
            stream,
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

/// Whether an idle connection is still open: the server has neither closed it nor sent
/// anything unasked. Costs no system call unless the socket has become readable.
fn still_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Whether `response` leaves its connection open for another request.
fn keeps_alive(response: &http::Response<Incoming>) -> bool {
    response.version() == http::Version::HTTP_11
        && !response
            .headers()
            .get_all(http::header::CONNECTION)
            .iter()
            .any(|value| {
                value.to_str().is_ok_and(|v| {
                    v.split(',')
                        .any(|token| token.trim().eq_ignore_ascii_case("close"))
                })
            })
}

/// Closes the connections idle for longer than the timeout (or closed by the server), until
/// none is idle (or the client is gone).
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
                now.duration_since(idle.since) < timeout && still_open(&idle.stream)
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
    /// Sends `request` and waits for the response head, driving the connection meanwhile.
    async fn request(&mut self, request: http::Request<Full<Bytes>>) -> Attempt {
        let mut response = pin!(self.sender.try_send_request(request));
        let outcome = poll_fn(|cx| {
            if let Poll::Ready(outcome) = response.as_mut().poll(cx) {
                return Poll::Ready(Some(outcome));
            }
            if Self::drive_conn(&mut self.conn, &mut self.ended, cx) {
                // hyper answers a pending request when its connection ends; if it has not, it
                // never will.
                return Poll::Ready(match response.as_mut().poll(cx) {
                    Poll::Ready(outcome) => Some(outcome),
                    Poll::Pending => None,
                });
            }
            Poll::Pending
        })
        .await;
        match outcome {
            Some(Ok(response)) => Attempt::Answered(response),
            Some(Err(mut error)) => Attempt::Failed {
                unsent: error.take_message().is_some(),
                error: error.into_error(),
            },
            None => Attempt::Ended,
        }
    }

    /// Moves the exchange on (reads the answer into its body, writes what is left to write);
    /// call it whenever the body is polled.
    pub(super) fn drive(&mut self, cx: &mut Context<'_>) {
        Self::drive_conn(&mut self.conn, &mut self.ended, cx);
    }

    /// Polls `conn` unless it has ended; whether it has ended.
    fn drive_conn(conn: &mut Conn, ended: &mut bool, cx: &mut Context<'_>) -> bool {
        if !*ended && conn.poll_without_shutdown(cx).is_ready() {
            // An error reaches the response or its body, which are the ones to report it.
            *ended = true;
        }
        *ended
    }

    /// The answer was read to its end: the connection goes back to the pool.
    pub(super) fn release(self) {
        let Self {
            mut conn,
            sender,
            ended,
            reusable,
            shared,
        } = self;
        if ended || !reusable {
            return;
        }
        // With no sender left, hyper's side of an idle connection ends at once.
        drop(sender);
        let mut cx = Context::from_waker(Waker::noop());
        match conn.poll_without_shutdown(&mut cx) {
            Poll::Ready(Ok(())) => shared.put_back(conn),
            Poll::Ready(Err(error)) => {
                tracing::debug!(%error, "A model connection ended with an error.");
            }
            Poll::Pending => {
                // Not seen; finish it on a task rather than lose the connection.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if poll_fn(|cx| conn.poll_without_shutdown(cx)).await.is_ok() {
                            shared.put_back(conn);
                        }
                    });
                }
            }
        }
    }
}

impl Shared {
    /// Pools the socket of an exchange that has ended cleanly, unless hyper read past the
    /// answer (nothing should follow it).
    fn put_back(self: &Arc<Self>, conn: Box<Conn>) {
        let parts = conn.into_parts();
        if parts.read_buf.is_empty() {
            self.put(parts.io.into_inner());
        }
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
