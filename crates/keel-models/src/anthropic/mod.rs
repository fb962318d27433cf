//! The `anthropic` provider: the Messages API (`POST {baseUrl}/v1/messages`) over the same
//! HTTP transport as the `openai` provider (plain HTTP/1 or reqwest, one pool per provider).
//!
//! A round's request is written by `wire.rs` (system prompt top-level, tool calls as
//! `tool_use` blocks, tool results as `tool_result` blocks in a user turn); its answer, streamed
//! or whole, is decoded by `decode.rs` into the same [`ModelEvent`](keel_types::ModelEvent) sequence every provider
//! yields. Failures are classified by the shared table (`openai/http_error.rs`): 429 with its
//! `retry-after`, 5xx and 529 (`overloaded_error`) retryable, 400 fatal with its message kept.
//! The provider never retries: the runtime does.

mod decode;
mod wire;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use http::{HeaderName, HeaderValue};
use keel_types::{ModelError, ModelParams, ModelProvider, ModelRequest, ModelStream};

use crate::ProviderError;
use crate::openai::http1::Pool;
use crate::openai::transport::{Outgoing, Transport};
use crate::openai::{answer, endpoint, exchange};
use decode::EventDecoder;

/// The endpoint used when a `Model` document names none (`/v1/messages` is appended).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when neither the request nor the Model document sets it (the API requires
/// one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How to reach the Messages API.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// API base, e.g. `https://api.anthropic.com`; `/v1/messages` is appended.
    pub base_url: String,
    /// The `model` sent in each request.
    pub model: String,
    /// Sent as `x-api-key` when present.
    pub api_key: Option<String>,
    /// Defaults for sampling; a request's own values win field by field.
    pub params: ModelParams,
    /// Connect timeout, and the longest wait for the response head or between two chunks.
    pub timeout: Duration,
    /// When false, answers are always requested whole.
    pub allow_stream: bool,
    /// At most this many idle connections stay open (see `OpenAiConfig`).
    pub max_idle_connections: usize,
    /// Extended thinking's token budget (`params.thinking.budgetTokens`), if on.
    pub thinking_budget: Option<u32>,
    /// `cache: auto`: `cache_control` breakpoints on the stable prefix.
    pub cache: bool,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("params", &self.params)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A Messages API provider. Cheap to share (`Arc`).
pub struct AnthropicProvider {
    transport: Transport,
    model: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    params: ModelParams,
    timeout: Duration,
    allow_stream: bool,
    options: wire::Options,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("url", &format_args!("{}", self.transport.url()))
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// Builds a provider with its own connection pool.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let url = endpoint(&config.base_url, "v1/messages")?;
        let pool = Pool::new(config.max_idle_connections);
        let transport = Transport::for_url(url, config.timeout, pool)?;
        let mut headers = vec![(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        )];
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(key).map_err(|_| ProviderError::InvalidApiKey)?;
            value.set_sensitive(true);
            headers.push((HeaderName::from_static("x-api-key"), value));
        }
        Ok(Self {
            transport,
            model: config.model,
            headers,
            params: config.params,
            timeout: config.timeout,
            allow_stream: config.allow_stream,
            options: wire::Options {
                thinking: config.thinking_budget,
                cache: config.cache,
            },
        })
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    fn provider_name(&self) -> &str {
        "anthropic"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let stream = request.stream && self.allow_stream;
        let params = request.params.over(&self.params);
        let body = wire::request_body(
            &self.model,
            &request.messages,
            &request.tools,
            &params,
            self.options,
            stream,
        )?;
        let outgoing = Outgoing {
            body,
            accept: if stream {
                "text/event-stream"
            } else {
                "application/json"
            },
            headers: &self.headers,
            traceparent: request.traceparent.as_deref(),
        };
        let (head, response) =
            exchange(&self.transport, outgoing, self.timeout, &self.model).await?;
        answer::<EventDecoder>(
            &head,
            response,
            stream,
            self.timeout,
            decode::message_events,
        )
        .await
    }
}
