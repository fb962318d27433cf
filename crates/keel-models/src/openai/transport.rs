//! How a provider reaches its endpoint: one `POST` out, a status, headers and a body of chunks
//! back.
//!
//! Two transports sit behind [`Transport`]:
//!
//! - **plain HTTP/1** (hyper's connections in a pool of our own, [`super::http1`]) for an `http://`
//!   endpoint without credentials in its URL that no proxy applies to: the local model servers (Ollama, vLLM, llama.cpp, a
//!   mock), where Keel's own cost per request is what is left to measure. It skips what
//!   reqwest adds to every request — the redirect layer that parses the URL again, the
//!   timeout and body wrappers — about a sixth of Keel's CPU per run in `agent_runs`.
//! - **reqwest** for everything else: `https://` (rustls with the platform's verifier), a
//!   proxy from the environment (`HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, as reqwest reads
//!   them), `user:password@` in the URL, HTTP/2, and a client a caller hands in ([`super::OpenAiProvider::with_client`]).
//!
//! Both send the same request (method, path, `Host`, `Content-Type`, `Accept`,
//! `Authorization`, `User-Agent`, `Content-Length`) and follow no redirects: a model server
//! answering 3xx is reported as the error it is (a client handed in keeps its own policy).

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use http::response::Parts;
use http_body_util::{BodyExt, Full};
use hyper_util::client::proxy::matcher::Matcher;
use keel_types::ModelError;

use super::http_error;
use super::http1::{Http1Client, Lease, Pool};
use crate::ProviderError;

const AGENT: &str = concat!("keel/", env!("CARGO_PKG_VERSION"));
/// The plain transport reads a connection into a buffer of one page. hyper's default starts
/// at 8 KiB and grows with large reads, and a model's stream arrives a few hundred bytes at a
/// time, so the second page mostly sat allocated and untouched (an idle pooled connection
/// keeps no buffer at all now; see `http1.rs`).
const READ_BUFFER: usize = 4096;

/// One request: everything but the URL, which the transport holds.
/// W3C trace context's header.
const TRACEPARENT: &str = "traceparent";

pub(crate) struct Outgoing<'a> {
    pub body: Vec<u8>,
    pub accept: &'static str,
    /// Headers of the provider's own: its credentials (`Authorization`, `x-api-key`), its
    /// API version.
    pub headers: &'a [(http::HeaderName, HeaderValue)],
    /// The W3C `traceparent` of the model round's span, sent as a header.
    pub traceparent: Option<&'a str>,
}

/// A provider's way to its endpoint, with its connection pool.
pub(crate) enum Transport {
    Plain {
        client: Http1Client,
        /// The endpoint, as shown.
        uri: http::Uri,
        /// The request target: the endpoint's path and query.
        path: http::Uri,
        /// The `Host` header, made once.
        host: HeaderValue,
    },
    Reqwest {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

impl Transport {
    /// The plain transport when `url` is `http://`, carries no credentials and no proxy of the
    /// environment applies to it (a loopback host never goes through one), reqwest otherwise.
    pub(crate) fn for_url(
        url: reqwest::Url,
        timeout: Duration,
        pool: Pool,
    ) -> Result<Self, ProviderError> {
        Self::choose(url, timeout, &Matcher::from_env(), pool)
    }

    fn choose(
        url: reqwest::Url,
        timeout: Duration,
        proxies: &Matcher,
        pool: Pool,
    ) -> Result<Self, ProviderError> {
        let uri: http::Uri = url.as_str().parse().map_err(|e: http::uri::InvalidUri| {
            ProviderError::InvalidBaseUrl {
                url: url.to_string(),
                reason: e.to_string(),
            }
        })?;
        let loopback = is_loopback(&url);
        // Credentials in the URL become a Basic `Authorization` header in reqwest only.
        let credentials = !url.username().is_empty() || url.password().is_some();
        if url.scheme() == "http" && !credentials && (loopback || proxies.intercept(&uri).is_none())
        {
            let host = host_header(&url)?;
            let invalid = |reason: String| ProviderError::InvalidBaseUrl {
                url: url.to_string(),
                reason,
            };
            let authority = match (url.host_str(), url.port_or_known_default()) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                _ => return Err(invalid("it names no host".into())),
            };
            let path = uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .parse()
                .map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
            let client = Http1Client::new(authority, timeout, READ_BUFFER, pool);
            return Ok(Self::Plain {
                client,
                uri,
                path,
                host,
            });
        }
        let client = reqwest_client(url.scheme() == "http", loopback, timeout, pool)?;
        Ok(Self::Reqwest { client, url })
    }

    /// The endpoint requests go to.
    pub(crate) fn url(&self) -> &dyn std::fmt::Display {
        match self {
            Self::Plain { uri, .. } => uri,
            Self::Reqwest { url, .. } => url,
        }
    }

    /// Sends `outgoing` and waits for the response head.
    pub(crate) async fn send(&self, outgoing: Outgoing<'_>) -> Result<(Parts, Body), ModelError> {
        match self {
            Self::Plain {
                client, path, host, ..
            } => {
                let body = Bytes::from(outgoing.body);
                let make = || {
                    let mut request = http::Request::post(path.clone())
                        .header(HOST, host.clone())
                        .header(CONTENT_TYPE, "application/json")
                        .header(ACCEPT, outgoing.accept)
                        .header(USER_AGENT, AGENT);
                    for (name, value) in outgoing.headers {
                        request = request.header(name, value.clone());
                    }
                    if let Some(parent) = outgoing.traceparent {
                        request = request.header(TRACEPARENT, parent);
                    }
                    request
                        .body(Full::new(body.clone()))
                        .map_err(|e| ModelError::BadRequest {
                            status: 0,
                            message: format!("cannot build the request: {e}"),
                        })
                };
                let (response, lease) = client.send(make).await?;
                let (parts, body) = response.into_parts();
                Ok((
                    parts,
                    Body::Plain {
                        body,
                        lease: Some(lease),
                    },
                ))
            }
            Self::Reqwest { client, url } => {
                let mut request = client
                    .post(url.clone())
                    .header(CONTENT_TYPE, "application/json")
                    .header(ACCEPT, outgoing.accept)
                    .body(outgoing.body);
                for (name, value) in outgoing.headers {
                    request = request.header(name, value.clone());
                }
                if let Some(parent) = outgoing.traceparent {
                    request = request.header(TRACEPARENT, parent);
                }
                let response = request
                    .send()
                    .await
                    .map_err(|e| http_error::send_error(&e, e.is_timeout()))?;
                let (parts, body) = http::Response::from(response).into_parts();
                Ok((parts, Body::Reqwest(body)))
            }
        }
    }
}

/// A response body being read.
pub(crate) enum Body {
    Plain {
        body: hyper::body::Incoming,
        /// The connection, driven while the body is read and back to the pool at its end.
        lease: Option<Lease>,
    },
    Reqwest(reqwest::Body),
}

impl Body {
    /// The next chunk of data, or `None` at the end (trailers are skipped).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, ModelError> {
        loop {
            let frame = match self {
                Self::Plain { body, lease } => {
                    // The connection is driven here, by the reader of its answer.
                    let frame = std::future::poll_fn(|cx| {
                        if let Some(lease) = lease.as_mut() {
                            lease.drive(cx);
                        }
                        hyper::body::Body::poll_frame(std::pin::Pin::new(&mut *body), cx)
                    })
                    .await
                    .transpose()
                    .map_err(|e| http_error::body_error(&e, http_error::timed_out(&e)))?;
                    if frame.is_none()
                        && let Some(lease) = lease.take()
                    {
                        lease.release();
                    }
                    frame
                }
                Self::Reqwest(body) => body
                    .frame()
                    .await
                    .transpose()
                    .map_err(|e| http_error::body_error(&e, e.is_timeout()))?,
            };
            let Some(frame) = frame else { return Ok(None) };
            if let Ok(data) = frame.into_data()
                && !data.is_empty()
            {
                return Ok(Some(data));
            }
        }
    }
}

/// reqwest's client for endpoints the plain transport does not take.
fn reqwest_client(
    plain_http: bool,
    loopback: bool,
    timeout: Duration,
    pool: Pool,
) -> Result<reqwest::Client, ProviderError> {
    // reqwest is built without a compiled-in TLS crypto provider; ring is ours. A provider
    // installed earlier by someone else is fine too, hence the ignored result.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .pool_idle_timeout(pool.idle_timeout)
        .pool_max_idle_per_host(pool.max_idle)
        .user_agent(AGENT)
        // As on the plain transport: a redirected POST would turn into a GET (301, 302) or
        // quietly go elsewhere; the 3xx is reported with its `Location` instead.
        .redirect(reqwest::redirect::Policy::none());
    if loopback {
        // A local server (a mock, Ollama, vLLM) is never behind the system proxy.
        builder = builder.no_proxy();
    }
    if plain_http {
        // A plain-HTTP endpoint needs no TLS: skip loading the system's root certificates
        // (milliseconds at every start). A redirect to https would fail verification, clearly.
        builder = builder.tls_certs_only(std::iter::empty());
    }
    builder
        .build()
        .map_err(|e| ProviderError::HttpClient(e.to_string()))
}

/// The `Host` header for `url`, as HTTP/1.1 wants it and reqwest sends it: the host, with the
/// port when it is not the scheme's default.
fn host_header(url: &reqwest::Url) -> Result<HeaderValue, ProviderError> {
    let invalid = |reason: String| ProviderError::InvalidBaseUrl {
        url: url.to_string(),
        reason,
    };
    let host = url
        .host_str()
        .ok_or_else(|| invalid("it names no host".into()))?;
    let value = match url.port() {
        Some(port) => HeaderValue::from_str(&format!("{host}:{port}")),
        None => HeaderValue::from_str(host),
    };
    value.map_err(|e| invalid(format!("its host is no valid `Host` header: {e}")))
}

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `[::1]`).
fn is_loopback(url: &reqwest::Url) -> bool {
    url.host_str().is_some_and(|host| {
        host == "localhost"
            || host == "[::1]"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(url: &str, proxies: &Matcher) -> bool {
        let url = reqwest::Url::parse(url).unwrap();
        let transport =
            Transport::choose(url, Duration::from_secs(5), proxies, Pool::new(usize::MAX)).unwrap();
        matches!(transport, Transport::Plain { .. })
    }

    #[test]
    fn plain_http_without_a_proxy_skips_reqwest() {
        let none = Matcher::builder().build();
        assert!(plain("http://127.0.0.1:8080/v1/chat/completions", &none));
        assert!(plain("http://gpu-box.lan:8000/v1/chat/completions", &none));
        assert!(!plain("https://api.openai.com/v1/chat/completions", &none));
        assert!(!plain(
            "http://user:secret@127.0.0.1:8080/v1/chat/completions",
            &none
        ));
    }

    #[test]
    fn the_host_header_names_the_port_only_when_it_is_not_the_default() {
        let host = |url: &str| host_header(&reqwest::Url::parse(url).unwrap()).unwrap();
        assert_eq!(host("http://127.0.0.1:8080/v1"), "127.0.0.1:8080");
        assert_eq!(host("http://gpu-box.lan/v1"), "gpu-box.lan");
        assert_eq!(host("http://gpu-box.lan:80/v1"), "gpu-box.lan");
        assert_eq!(host("http://[::1]:11434/v1"), "[::1]:11434");
    }

    #[test]
    fn a_proxy_of_the_environment_sends_plain_http_through_reqwest_except_on_loopback() {
        let proxies = Matcher::builder()
            .http("http://proxy.corp:3128")
            .no("internal.corp")
            .build();
        assert!(!plain(
            "http://gpu-box.lan:8000/v1/chat/completions",
            &proxies
        ));
        assert!(plain(
            "http://models.internal.corp/v1/chat/completions",
            &proxies
        ));
        assert!(plain(
            "http://localhost:11434/v1/chat/completions",
            &proxies
        ));
        assert!(plain("http://[::1]:11434/v1/chat/completions", &proxies));
        assert!(plain(
            "http://127.0.0.2:11434/v1/chat/completions",
            &proxies
        ));
    }

    /// An idle connection in the plain transport's pool is closed once the idle timeout has
    /// passed (the server sees its end), not kept until the server gives up on it.
    #[tokio::test]
    async fn an_idle_pooled_connection_is_closed_after_the_idle_timeout() {
        let mut server = test_server(Answer::Always).await;
        let pool = Pool {
            idle_timeout: Duration::from_millis(200),
            max_idle: usize::MAX,
        };
        let transport = plain_transport(&server.url, pool);
        exchange(&transport).await.unwrap();
        // Generous: the pool's timer fires within a few idle periods even on a loaded machine.
        tokio::time::timeout(Duration::from_secs(60), server.open.wait_for(|n| *n == 0))
            .await
            .expect("the idle connection was never closed")
            .unwrap();
        assert_eq!(*server.accepted.borrow(), 1);
    }

    /// The pool keeps at most `max_idle` connections once a burst is over: the others are
    /// closed as they come back, and the ones kept serve the next requests.
    #[tokio::test]
    async fn the_pool_keeps_at_most_max_idle_connections_after_a_burst() {
        let mut server = test_server(Answer::WhenReleased).await;
        let pool = Pool {
            idle_timeout: Duration::from_secs(600),
            max_idle: 2,
        };
        let transport = plain_transport(&server.url, pool);
        // `n` requests at once; the server answers none until all have arrived, so each
        // needs a connection of its own.
        let burst = |n: usize| {
            let (transport, mut arrived, release) =
                (&transport, server.arrived.clone(), server.release.clone());
            async move {
                let requests = (0..n).map(|_| exchange(transport));
                let gate = async {
                    let target = *arrived.borrow() + n;
                    arrived.wait_for(|a| *a >= target).await.unwrap();
                    release.send_replace(target);
                };
                let (answers, ()) = tokio::join!(futures_util::future::join_all(requests), gate);
                answers.into_iter().collect::<Result<Vec<()>, _>>().unwrap();
            }
        };

        let wait = Duration::from_secs(60);
        tokio::time::timeout(wait, burst(5)).await.unwrap();
        assert_eq!(
            *server.accepted.borrow(),
            5,
            "five at once, five connections"
        );
        // Two come back to the pool and stay; the other three are closed.
        tokio::time::timeout(wait, server.open.wait_for(|n| *n == 2))
            .await
            .expect("the pool kept more than two idle connections")
            .unwrap();
        // The next two requests at once reuse the two kept.
        tokio::time::timeout(wait, burst(2)).await.unwrap();
        assert_eq!(
            *server.accepted.borrow(),
            5,
            "the kept ones were not reused"
        );
    }

    /// How [`test_server`] answers.
    #[derive(Clone, Copy, PartialEq)]
    enum Answer {
        /// Every request, keeping the connection open.
        Always,
        /// The first request, then it closes the connection without saying so.
        ThenClose,
        /// Each request once `release` has reached its number (requests are numbered 1, 2…
        /// as they arrive).
        WhenReleased,
        /// Every request, saying `Connection: close` but leaving the connection open.
        SayingClose,
        /// Every request, its body chunked and written a piece at a time with pauses.
        InPieces,
    }

    /// A server on loopback answering each request (a head and the body `{}`) with `{}`,
    /// counting what arrives.
    struct TestServer {
        url: reqwest::Url,
        /// Connections accepted.
        accepted: Counts,
        /// Connections still open.
        open: Counts,
        /// Requests arrived.
        arrived: Counts,
        release: tokio::sync::watch::Sender<usize>,
    }

    type Counts = tokio::sync::watch::Receiver<usize>;

    async fn test_server(answer: Answer) -> TestServer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::sync::watch;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        let (accepted, accepted_rx) = watch::channel(0usize);
        let (open, open_rx) = watch::channel(0usize);
        let (arrived, arrived_rx) = watch::channel(0usize);
        let first = if answer == Answer::WhenReleased {
            0
        } else {
            usize::MAX
        };
        let (release, release_rx) = watch::channel(first);
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                accepted.send_modify(|n| *n += 1);
                open.send_modify(|n| *n += 1);
                let (open, arrived, mut release) =
                    (open.clone(), arrived.clone(), release_rx.clone());
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    'requests: loop {
                        let mut request = Vec::new();
                        while !request.ends_with(b"\r\n\r\n{}") {
                            let n = socket.read(&mut buf).await.unwrap_or(0);
                            if n == 0 {
                                break 'requests;
                            }
                            request.extend_from_slice(&buf[..n]);
                        }
                        arrived.send_modify(|n| *n += 1);
                        let mine = *arrived.borrow();
                        release.wait_for(|r| *r >= mine).await.unwrap();
                        let written = match answer {
                            Answer::SayingClose => socket.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}").await,
                            Answer::InPieces => write_in_pieces(&mut socket).await,
                            _ => socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").await,
                        };
                        if written.is_err() || answer == Answer::ThenClose {
                            break;
                        }
                    }
                    drop(socket);
                    open.send_modify(|n| *n -= 1);
                });
            }
        });
        TestServer {
            url: reqwest::Url::parse(&url).unwrap(),
            accepted: accepted_rx,
            open: open_rx,
            arrived: arrived_rx,
            release,
        }
    }

    /// `{}` as a chunked body of two pieces, each written on its own after a pause, so the
    /// reader waits for the connection between them.
    async fn write_in_pieces(socket: &mut tokio::net::TcpStream) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let pieces: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n",
            b"1\r\n}\r\n",
            b"0\r\n\r\n",
        ];
        for piece in pieces {
            socket.write_all(piece).await?;
            socket.flush().await?;
            // A slow server, not a wait for anything: the answer is whole whatever the timing.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// The plain transport to `url`, no proxy in the environment.
    fn plain_transport(url: &reqwest::Url, pool: Pool) -> Transport {
        let none = Matcher::builder().build();
        let transport = Transport::choose(url.clone(), Duration::from_secs(5), &none, pool);
        let transport = transport.unwrap();
        assert!(matches!(transport, Transport::Plain { .. }));
        transport
    }

    /// One exchange on `transport`, its answer (`{}`, in however many chunks) read to the end.
    async fn exchange(transport: &Transport) -> Result<(), ModelError> {
        let outgoing = Outgoing {
            body: b"{}".to_vec(),
            accept: "application/json",
            headers: &[],
            traceparent: None,
        };
        let (head, mut body) = transport.send(outgoing).await?;
        assert_eq!(head.status, 200);
        let mut answer = Vec::new();
        while let Some(chunk) = body.chunk().await? {
            answer.extend_from_slice(&chunk);
        }
        assert_eq!(answer, b"{}");
        Ok(())
    }

    /// A call made right after another's answer ended uses that connection: it is back in
    /// the pool by then, so nothing opens a second one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_one_after_another_share_one_connection() {
        let server = test_server(Answer::Always).await;
        let accepted = &server.accepted;
        let transport = plain_transport(&server.url, Pool::new(usize::MAX));
        for _ in 0..50 {
            exchange(&transport).await.unwrap();
        }
        assert_eq!(*accepted.borrow(), 1);
    }

    /// Callers at once open no more connections than calls are in flight: each connection
    /// is back in the pool when its answer ends, before its caller makes the next call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_open_no_more_connections_than_calls_in_flight() {
        let server = test_server(Answer::Always).await;
        let accepted = &server.accepted;
        let transport = plain_transport(&server.url, Pool::new(usize::MAX));
        let callers = (0..4).map(|_| async {
            for _ in 0..100 {
                exchange(&transport).await.unwrap();
            }
        });
        futures_util::future::join_all(callers).await;
        let opened = *accepted.borrow();
        assert!(
            (1..=4).contains(&opened),
            "{opened} connections for 4 callers"
        );
    }

    /// An idle connection the server closed is not used: the request goes out on a new one
    /// and succeeds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_the_server_closed_is_replaced() {
        let server = test_server(Answer::ThenClose).await;
        let accepted = &server.accepted;
        let transport = plain_transport(&server.url, Pool::new(usize::MAX));
        for _ in 0..20 {
            exchange(&transport).await.unwrap();
        }
        assert_eq!(*accepted.borrow(), 20);
    }

    /// An answer that arrives a piece at a time is read whole (the reader drives the
    /// connection while it waits), and its connection serves the next call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_in_pieces_arrives_whole_and_its_connection_is_reused() {
        let server = test_server(Answer::InPieces).await;
        let transport = plain_transport(&server.url, Pool::new(usize::MAX));
        for _ in 0..5 {
            exchange(&transport).await.unwrap();
        }
        assert_eq!(*server.accepted.borrow(), 1);
    }

    /// An answer saying `Connection: close` leaves its connection out of the pool, even when
    /// the server has not closed it yet: the next call opens another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_whose_answer_said_close_is_not_kept() {
        let server = test_server(Answer::SayingClose).await;
        let transport = plain_transport(&server.url, Pool::new(usize::MAX));
        for _ in 0..3 {
            exchange(&transport).await.unwrap();
        }
        assert_eq!(*server.accepted.borrow(), 3);
        assert_eq!(*server.arrived.borrow(), 3, "no request went out twice");
    }

    /// The pool's idle timeout still holds after the runtime that first pooled a connection
    /// (and ran the task closing idle ones) has ended: the next runtime's gets its own.
    #[test]
    fn idle_connections_expire_after_the_first_runtime_ended() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let TestServer {
            url,
            accepted,
            mut open,
            ..
        } = runtime.block_on(test_server(Answer::Always));
        let pool = Pool {
            idle_timeout: Duration::from_millis(200),
            max_idle: usize::MAX,
        };
        let transport = plain_transport(&url, pool);
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        first.block_on(exchange(&transport)).unwrap();
        drop(first);
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        second.block_on(exchange(&transport)).unwrap();
        // The second exchange's connection is idle in the pool now; nothing else runs on the
        // second runtime but the task that closes it.
        second.block_on(async {
            let wait = Duration::from_secs(60);
            tokio::time::timeout(wait, open.wait_for(|n| *n == 0))
                .await
                .expect("an idle connection outlived the idle timeout")
                .unwrap();
        });
        assert_eq!(*accepted.borrow(), 2);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        drop(listener);
        let url = reqwest::Url::parse(&url).unwrap();
        let transport = plain_transport(&url, Pool::new(usize::MAX));
        match exchange(&transport).await {
            Err(ModelError::Connect(message)) => {
                assert!(message.contains("refused"), "{message}");
            }
            other => panic!("expected a connect error, got {other:?}"),
        }
    }

    #[test]
    fn a_connect_timeout_is_told_apart_from_other_errors() {
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
        assert!(http_error::timed_out(&timeout));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!http_error::timed_out(&refused));
    }
}
