//! The `openai` provider: Chat Completions over HTTP, for OpenAI and every compatible server
//! (Ollama, vLLM, llama.cpp, LM Studio, …).
//!
//! Start at [`OpenAiProvider`]. A round is one `POST {base_url}/chat/completions`; streamed
//! answers are decoded incrementally (`sse::SseDecoder` then `decode::ChunkDecoder`), whole
//! answers are decoded at once (`decode::completion_events`), and both yield the same
//! [`ModelEvent`] sequence. Failures are classified in `http_error`, the one table from HTTP
//! status to [`ModelError`]. The provider never retries: the runtime does, using that
//! classification.

mod decode;
mod embeddings;
// The HTTP side, shared with the `anthropic` provider.
pub(crate) mod http1;
pub(crate) mod http_error;
pub(crate) mod transport;
mod wire;

pub use embeddings::OpenAiEmbedder;

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream;
use keel_types::{ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest, ModelStream};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use tracing::debug;

use crate::ProviderError;
use crate::sse::SseDecoder;
use decode::ChunkDecoder;
use http1::Pool;
use transport::{Body, Outgoing, Transport};

/// The endpoint used when a `Model` document names none.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Connect timeout and longest silence between two chunks, when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest answer (whole completion, or one SSE event) accepted.
const MAX_ANSWER_BYTES: usize = 32 << 20;
/// Largest error body read.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// After `[DONE]`, how long to wait for the body's end so the connection can be reused.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// How to reach an OpenAI-compatible endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The `model` sent in each request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// Defaults for sampling; a request's own values win field by field.
    pub params: ModelParams,
    /// Connect timeout, and the longest wait for the response head or between two chunks.
    pub timeout: Duration,
    /// When false, answers are always requested whole, even if a request asks to stream (for
    /// servers without SSE support).
    pub allow_stream: bool,
    /// At most this many idle connections to the endpoint stay open; one that comes back to
    /// a full pool is closed. [`crate::provider_for`] sets it to the workspace's
    /// `limits.maxConcurrentRuns`: a run waits for one model call before it makes the next,
    /// so more idle connections than runs could never all be used at once. Unbounded by
    /// default.
    pub max_idle_connections: usize,
}

impl OpenAiConfig {
    /// The default endpoint and timeout, no key, streaming allowed.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.into(),
            model: model.into(),
            api_key: None,
            params: ModelParams::default(),
            timeout: DEFAULT_TIMEOUT,
            allow_stream: true,
            max_idle_connections: usize::MAX,
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("params", &self.params)
            .field("timeout", &self.timeout)
            .field("allow_stream", &self.allow_stream)
            .field("max_idle_connections", &self.max_idle_connections)
            .finish()
    }
}

/// A Chat Completions provider. Cheap to share (`Arc`); one HTTP connection pool per provider.
pub struct OpenAiProvider {
    transport: Transport,
    model: String,
    /// `Authorization`, when there is a key.
    auth: Vec<(http::HeaderName, HeaderValue)>,
    params: ModelParams,
    timeout: Duration,
    allow_stream: bool,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("url", &format_args!("{}", self.transport.url()))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds a provider with its own connection pool: plain HTTP/1 for an `http://`
    /// endpoint no proxy applies to, reqwest (TLS, proxies, HTTP/2) for the others.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let url = endpoint(&config.base_url, "chat/completions")?;
        let pool = Pool::new(config.max_idle_connections);
        let transport = Transport::for_url(url, config.timeout, pool)?;
        Self::build(config, transport)
    }

    /// Builds a provider on an existing reqwest client (to share one pool between providers,
    /// or to configure TLS or a proxy yourself); every request goes through it.
    pub fn with_client(
        config: OpenAiConfig,
        client: reqwest::Client,
    ) -> Result<Self, ProviderError> {
        let url = endpoint(&config.base_url, "chat/completions")?;
        Self::build(config, Transport::Reqwest { client, url })
    }

    fn build(config: OpenAiConfig, transport: Transport) -> Result<Self, ProviderError> {
        let auth = bearer(config.api_key.as_deref())?
            .map(|value| (http::header::AUTHORIZATION, value))
            .into_iter()
            .collect();
        Ok(Self {
            transport,
            model: config.model,
            auth,
            params: config.params,
            timeout: config.timeout,
            allow_stream: config.allow_stream,
        })
    }
}

/// The `Authorization` header for a key, marked sensitive.
fn bearer(key: Option<&str>) -> Result<Option<HeaderValue>, ProviderError> {
    let Some(key) = key else { return Ok(None) };
    let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
        .map_err(|_| ProviderError::InvalidApiKey)?;
    value.set_sensitive(true);
    Ok(Some(value))
}

/// `{base_url}/{path}`, validated.
pub(crate) fn endpoint(base_url: &str, path: &str) -> Result<reqwest::Url, ProviderError> {
    let invalid = |reason: String| ProviderError::InvalidBaseUrl {
        url: base_url.to_owned(),
        reason,
    };
    let url = reqwest::Url::parse(&format!("{}/{path}", base_url.trim_end_matches('/')))
        .map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https".into()));
    }
    Ok(url)
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    fn provider_name(&self) -> &str {
        "openai"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let stream = request.stream && self.allow_stream;
        let body = serde_json::to_vec(&wire::ChatRequest {
            model: &self.model,
            messages: &request.messages,
            tools: &request.tools,
            params: request.params.over(&self.params),
            stream,
        })
        .map_err(|e| ModelError::BadRequest {
            status: 0,
            message: format!("cannot encode the request: {e}"),
        })?;
        let outgoing = Outgoing {
            body,
            accept: if stream {
                "text/event-stream"
            } else {
                "application/json"
            },
            headers: &self.auth,
            traceparent: request.traceparent.as_deref(),
        };
        let (head, response) =
            exchange(&self.transport, outgoing, self.timeout, &self.model).await?;
        answer::<ChunkDecoder>(
            &head,
            response,
            stream,
            self.timeout,
            decode::completion_events,
        )
        .await
    }
}

/// The answer to an exchange: streamed as it arrives when a stream was asked for and came;
/// otherwise read whole — decoded by `whole`, or as SSE when a server streams although asked
/// not to.
pub(crate) async fn answer<D: Frames>(
    head: &http::response::Parts,
    response: Body,
    stream: bool,
    timeout: Duration,
    whole: fn(&[u8]) -> Result<Vec<ModelEvent>, ModelError>,
) -> Result<ModelStream, ModelError> {
    let is_sse = head
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if stream && is_sse {
        return Ok(streamed::<D>(response, timeout));
    }
    let body = read_body(response, timeout, MAX_ANSWER_BYTES, false).await?;
    let events = if is_sse {
        sse_events::<D>(&body)?
    } else {
        whole(&body)?
    };
    Ok(Box::pin(stream::iter(events.into_iter().map(Ok))))
}

/// A provider's decoder of the data of a streamed answer's SSE events.
pub(crate) trait Frames: Default + Send + 'static {
    /// Whether the answer is complete (its end marker seen); the body's end is then awaited
    /// only briefly.
    fn is_done(&self) -> bool;
    /// Handles the data of one SSE event, appending the resulting deltas to `out`.
    fn on_data(&mut self, data: &[u8], out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError>;
    /// The body ended: appends what remains (`Usage`, `Stop`), or fails when the answer is
    /// incomplete.
    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError>;
}

impl Frames for ChunkDecoder {
    fn is_done(&self) -> bool {
        ChunkDecoder::is_done(self)
    }
    fn on_data(&mut self, data: &[u8], out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        ChunkDecoder::on_data(self, data, out)
    }
    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        ChunkDecoder::on_end(self, out)
    }
}

/// A streamed answer, decoded as it arrives.
fn streamed<D: Frames>(response: Body, idle: Duration) -> ModelStream {
    Box::pin(stream::unfold(
        Streaming::<D>::new(response, idle),
        Streaming::next_item,
    ))
}

/// The events of an answer that came whole but as SSE.
fn sse_events<D: Frames>(body: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
    let mut decoder = SseState::<D>::default();
    let mut events = VecDeque::new();
    decoder.feed(body, &mut events)?;
    decoder.end(&mut events)?;
    Ok(Vec::from(events))
}

/// Sends `outgoing` and waits for a successful response head, within `timeout`. A
/// non-success answer is read (up to [`MAX_ERROR_BYTES`]) and classified.
pub(crate) async fn exchange(
    transport: &Transport,
    outgoing: Outgoing<'_>,
    timeout: Duration,
    model: &str,
) -> Result<(http::response::Parts, Body), ModelError> {
    let (head, body) = match tokio::time::timeout(timeout, transport.send(outgoing)).await {
        Err(_) => {
            return Err(ModelError::Timeout(format!(
                "no response within {timeout:?}"
            )));
        }
        Ok(result) => result?,
    };
    if head.status.is_success() {
        return Ok((head, body));
    }
    let text = read_body(body, timeout, MAX_ERROR_BYTES, true)
        .await
        .unwrap_or_default();
    let status = head.status.as_u16();
    debug!(status, model, "Model endpoint answered with an error.");
    Err(http_error::classify_status(status, &head.headers, &text))
}

/// Reads a whole body, each chunk within `idle`. Past `limit` the body is either truncated
/// (`truncate`, for error bodies) or refused.
pub(crate) async fn read_body(
    mut response: Body,
    idle: Duration,
    limit: usize,
    truncate: bool,
) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => {
                return Err(ModelError::Timeout(format!(
                    "no data from the model for {idle:?}"
                )));
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => chunk,
        };
        if body.len() + chunk.len() > limit {
            if truncate {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..room]);
                return Ok(body);
            }
            return Err(ModelError::MalformedStream(format!(
                "the answer is larger than {limit} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
}

/// SSE framing plus chunk decoding.
#[derive(Debug, Default)]
struct SseState<D> {
    sse: SseDecoder,
    chunks: D,
}

impl<D: Frames> SseState<D> {
    fn feed(&mut self, bytes: &[u8], out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        self.sse.push(bytes);
        while let Some(data) = self.sse.next_event() {
            self.chunks.on_data(data, out)?;
        }
        if self.sse.buffered() > MAX_ANSWER_BYTES {
            return Err(ModelError::MalformedStream(format!(
                "an SSE event is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if let Some(data) = self.sse.finish() {
            self.chunks.on_data(data, out)?;
        }
        self.chunks.on_end(out)
    }
}

/// A streamed answer being read. Deltas decoded from one network read are queued in
/// `pending` and handed out one by one; an error is handed out after the deltas before it.
struct Streaming<D> {
    response: Body,
    decoder: SseState<D>,
    pending: VecDeque<ModelEvent>,
    failed: Option<ModelError>,
    finished: bool,
    idle: Duration,
}

impl<D: Frames> Streaming<D> {
    fn new(response: Body, idle: Duration) -> Self {
        Self {
            response,
            decoder: SseState::default(),
            pending: VecDeque::new(),
            failed: None,
            finished: false,
            idle,
        }
    }

    async fn next_item(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if let Some(error) = self.failed.take() {
                return Some((Err(error), self));
            }
            if self.finished {
                return None;
            }
            if let Err(error) = self.advance().await {
                self.finished = true;
                self.failed = Some(error);
            }
        }
    }

    /// Reads one network chunk and decodes it.
    async fn advance(&mut self) -> Result<(), ModelError> {
        let done = self.decoder.chunks.is_done();
        // After `[DONE]` the body's end is read too, so the connection returns to the pool;
        // a server that keeps it open gets a short grace, then the answer completes anyway.
        let wait = if done {
            self.idle.min(DRAIN_GRACE)
        } else {
            self.idle
        };
        match tokio::time::timeout(wait, self.response.chunk()).await {
            Ok(Ok(Some(bytes))) => self.decoder.feed(&bytes, &mut self.pending),
            Ok(Ok(None)) => self.complete(),
            _ if done => self.complete(),
            Err(_) => Err(ModelError::Timeout(format!(
                "no data from the model for {wait:?}"
            ))),
            Ok(Err(e)) => Err(e),
        }
    }

    fn complete(&mut self) -> Result<(), ModelError> {
        self.finished = true;
        self.decoder.end(&mut self.pending)
    }
}
