//! [`MockLlm`]: an OpenAI-compatible Chat Completions server on `127.0.0.1:0` for tests.
//!
//! A test pushes [`MockResponse`]s into a FIFO queue; each `POST /v1/chat/completions` takes
//! the next one, or asks the default responder when the queue is empty. Every request is
//! recorded (headers and parsed JSON body) for assertions. Streamed answers are real
//! `text/event-stream` bodies whose frames are written to the socket as they are produced.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use futures_util::{StreamExt, stream};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::mock_response::{MockBody, MockResponse};

/// Decides the answer when the queue is empty.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> MockResponse + Send + Sync>;

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names are lower-case; repeated headers are joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The `messages` array of the body (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// The role of the last message (`user`, `tool`, …).
    pub fn last_role(&self) -> Option<&str> {
        self.messages().last()?.get("role")?.as_str()
    }

    /// The content of the last message with the given role, when it is a string.
    pub fn last_content_of(&self, role: &str) -> Option<&str> {
        self.messages()
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some(role))?
            .get("content")?
            .as_str()
    }

    /// Whether the client asked for a streamed answer.
    /// The request's size in tokens, estimated as Keel estimates a prompt: 4 bytes a token,
    /// plus 4 per message; the tool definitions by their JSON.
    pub fn estimated_tokens(&self) -> u64 {
        let chars = |value: &Value| -> u64 {
            match value {
                Value::String(text) => text.len() as u64,
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| {
                        ["text", "content", "thinking"]
                            .iter()
                            .filter_map(|k| p.get(*k).and_then(Value::as_str))
                            .map(|t| t.len() as u64)
                            .sum::<u64>()
                    })
                    .sum(),
                _ => 0,
            }
        };
        let mut tokens: u64 = self
            .messages()
            .iter()
            .map(|m| {
                let calls: u64 = m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| {
                                chars(&c["function"]["name"]) + chars(&c["function"]["arguments"])
                            })
                            .sum()
                    })
                    .unwrap_or(0);
                (chars(&m["content"]) + calls).div_ceil(4) + 4
            })
            .sum();
        if let Some(system) = self.body.get("system") {
            tokens += chars(system).div_ceil(4) + 4;
        }
        if let Some(tools) = self.body.get("tools") {
            tokens += (tools.to_string().len() as u64).div_ceil(4);
        }
        tokens
    }

    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }
}

struct Shared {
    queue: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
    default: Mutex<Responder>,
    /// Words the embeddings endpoint treats as another word (`puppy` → `dog`).
    synonyms: Mutex<BTreeMap<String, String>>,
    /// Requests to `/v1/embeddings`.
    embeddings: Mutex<u64>,
    /// The context window enforced, in estimated tokens ([`RecordedRequest::estimated_tokens`]).
    context_window: Mutex<Option<u64>>,
}

/// Locks a mutex, ignoring poisoning (a panicking test must not hide the recorded requests).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The mock server. Dropping it stops accepting connections.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for MockLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockLlm").field("addr", &self.addr).finish()
    }
}

impl MockLlm {
    /// Binds `127.0.0.1:0` and serves in the background of the current tokio runtime.
    ///
    /// # Panics
    /// When no loopback port can be bound: the test cannot run without it.
    pub async fn start() -> Self {
        match Self::try_start().await {
            Ok(mock) => mock,
            Err(e) => panic!("cannot start the mock LLM server: {e}"),
        }
    }

    /// Like [`MockLlm::start`], returning the bind error instead of panicking.
    pub async fn try_start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            default: Mutex::new(Arc::new(|_: &RecordedRequest| empty_queue_response())),
            synonyms: Mutex::new(BTreeMap::new()),
            embeddings: Mutex::new(0),
            context_window: Mutex::new(None),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            shared,
            shutdown: Some(shutdown),
        })
    }

    /// Refuses a chat or messages request whose estimated size
    /// ([`RecordedRequest::estimated_tokens`]) is over `tokens`, with the provider's own
    /// context-length error (OpenAI's 400 `context_length_exceeded`, or Anthropic's 400
    /// `invalid_request_error` "prompt is too long"), as a model with that window does.
    pub fn context_window(&self, tokens: u64) -> &Self {
        *lock(&self.shared.context_window) = Some(tokens);
        self
    }

    /// Makes `POST /v1/embeddings` treat `word` as `concept` (e.g. `puppy` as `dog`), so a
    /// test can show embeddings finding what full-text search cannot.
    pub fn embedding_synonym(&self, word: &str, concept: &str) -> &Self {
        lock(&self.shared.synonyms).insert(word.to_lowercase(), concept.to_lowercase());
        self
    }

    /// How many `POST /v1/embeddings` requests were served.
    pub fn embedding_requests(&self) -> u64 {
        *lock(&self.shared.embeddings)
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues an answer for the next request.
    pub fn push(&self, response: MockResponse) -> &Self {
        lock(&self.shared.queue).push_back(response);
        self
    }

    /// Sets the responder used when the queue is empty. The default answers HTTP 500 with an
    /// OpenAI-style error saying the queue is empty.
    pub fn respond_with(
        &self,
        responder: impl Fn(&RecordedRequest) -> MockResponse + Send + Sync + 'static,
    ) -> &Self {
        *lock(&self.shared.default) = Arc::new(responder);
        self
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The most recent request, if any.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        lock(&self.shared.requests).last().cloned()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// How many queued answers are still unused.
    pub fn pending(&self) -> usize {
        lock(&self.shared.queue).len()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

fn empty_queue_response() -> MockResponse {
    MockResponse::openai_error(
        500,
        "mock LLM: no response queued for this request",
        "server_error",
        None,
    )
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::POST && uri.path() == "/v1/embeddings" {
        return embeddings(&shared, &body);
    }
    // Chat Completions and the Anthropic Messages API share one queue: the test pushes the
    // answers in the wire format of the provider it drives.
    if method != Method::POST || !matches!(uri.path(), "/v1/chat/completions" | "/v1/messages") {
        return plain(
            StatusCode::NOT_FOUND,
            "mock LLM serves POST /v1/chat/completions, /v1/messages and /v1/embeddings",
        );
    }
    let recorded = record(&method, &uri, &headers, &body);
    let window = *lock(&shared.context_window);
    if let Some(window) = window.filter(|w| recorded.estimated_tokens() > *w) {
        let tokens = recorded.estimated_tokens();
        let anthropic = recorded.path == "/v1/messages";
        lock(&shared.requests).push(recorded);
        let body = match anthropic {
            true => serde_json::json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": format!("prompt is too long: {tokens} tokens > {window} maximum")}}),
            false => serde_json::json!({"error": {"message": format!(
                "This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        };
        return render(MockResponse::error(400, body.to_string()));
    }
    let queued = lock(&shared.queue).pop_front();
    let response = match queued {
        Some(response) => response,
        None => {
            let responder = Arc::clone(&lock(&shared.default));
            responder(&recorded)
        }
    };
    lock(&shared.requests).push(recorded);
    if !response.delay.is_zero() {
        tokio::time::sleep(response.delay).await;
    }
    render(response)
}

fn record(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> RecordedRequest {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        map.entry(name.as_str().to_owned())
            .and_modify(|existing| {
                existing.push_str(", ");
                existing.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    RecordedRequest {
        method: method.as_str().to_owned(),
        path: uri.path().to_owned(),
        headers: map,
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    }
}

fn render(response: MockResponse) -> Response {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (content_type, body) = match response.body {
        MockBody::Full { content_type, body } => (content_type, Body::from(body)),
        MockBody::Sse { frames, abort } => (
            "text/event-stream".to_owned(),
            sse_body(frames, abort, response.chunk_delay),
        ),
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    let headers = out.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in response.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            headers.append(name, value);
        }
    }
    out
}

/// A body yielding one frame per poll (so each frame is its own HTTP chunk), waiting
/// `chunk_delay` between frames, and breaking the connection at the end when `abort` is set.
fn sse_body(frames: Vec<Bytes>, abort: bool, chunk_delay: Duration) -> Body {
    let frames = stream::unfold(
        (frames.into_iter(), true),
        move |(mut frames, first)| async move {
            let frame = frames.next()?;
            if !first && !chunk_delay.is_zero() {
                tokio::time::sleep(chunk_delay).await;
            }
            Some((Ok::<_, std::io::Error>(frame), (frames, false)))
        },
    );
    // The pause lets hyper flush the frames before the connection is torn down.
    let ending = stream::iter(abort.then_some(())).then(|()| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Err::<Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "mock LLM aborted the stream",
        ))
    });
    Body::from_stream(frames.chain(ending))
}

/// Dimensions of the mock's embeddings.
const EMBEDDING_DIMS: usize = 64;

/// `POST /v1/embeddings`, deterministically: each word (after synonyms) adds 1 to one of 64
/// dimensions picked by its FNV-1a hash; the vector is normalised. Texts sharing words (or
/// synonyms) are similar; others are not.
fn embeddings(shared: &Shared, body: &[u8]) -> Response {
    *lock(&shared.embeddings) += 1;
    let request: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(_) => return plain(StatusCode::BAD_REQUEST, "the body is not JSON"),
    };
    let inputs: Vec<String> = match &request["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => {
            return plain(
                StatusCode::BAD_REQUEST,
                "`input` must be a string or strings",
            );
        }
    };
    let synonyms = lock(&shared.synonyms).clone();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let mut vector = [0f32; EMBEDDING_DIMS];
            for word in text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
            {
                let word = synonyms.get(&word).cloned().unwrap_or(word);
                let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                vector[(hash % EMBEDDING_DIMS as u64) as usize] += 1.0;
            }
            let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6);
            let vector: Vec<f32> = vector.iter().map(|v| v / norm).collect();
            serde_json::json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let body = serde_json::json!({
        "object": "list",
        "data": data,
        "model": request["model"],
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    });
    let mut out = Response::new(Body::from(body.to_string()));
    out.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut out = Response::new(Body::from(text));
    *out.status_mut() = status;
    out
}
