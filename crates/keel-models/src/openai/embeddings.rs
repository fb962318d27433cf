//! Embeddings from an OpenAI-compatible `/embeddings` endpoint (memory's hybrid recall).

use std::fmt;

use async_trait::async_trait;
use keel_types::{Embedder, ModelError};
use reqwest::header::HeaderValue;
use serde::Deserialize;

use super::http1::Pool;
use super::transport::{Outgoing, Transport};
use super::{MAX_ANSWER_BYTES, OpenAiConfig, endpoint, exchange, read_body};
use crate::ProviderError;

/// A client of `{base_url}/embeddings`, on the same transports as the chat provider.
pub struct OpenAiEmbedder {
    transport: Transport,
    model: String,
    auth: Vec<(http::HeaderName, HeaderValue)>,
    timeout: std::time::Duration,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("url", &format_args!("{}", self.transport.url()))
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let url = endpoint(&config.base_url, "embeddings")?;
        let pool = Pool::new(config.max_idle_connections);
        let transport = Transport::for_url(url, config.timeout, pool)?;
        let auth = super::bearer(config.api_key.as_deref())?
            .map(|value| (http::header::AUTHORIZATION, value))
            .into_iter()
            .collect();
        Ok(Self {
            transport,
            model: config.model,
            auth,
            timeout: config.timeout,
        })
    }
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_name(&self) -> &str {
        &self.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let body = serde_json::json!({"model": self.model, "input": texts});
        let outgoing = Outgoing {
            body: body.to_string().into_bytes(),
            accept: "application/json",
            headers: &self.auth,
            traceparent: None,
        };
        let (_, response) = exchange(&self.transport, outgoing, self.timeout, &self.model).await?;
        let bytes = read_body(response, self.timeout, MAX_ANSWER_BYTES, false).await?;
        let parsed: Response = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::MalformedStream(format!("the embeddings response does not parse: {e}"))
        })?;
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in parsed.data {
            let slot = vectors.get_mut(item.index).ok_or_else(|| {
                ModelError::MalformedStream(format!(
                    "the embeddings response has index {} for {} inputs",
                    item.index,
                    texts.len()
                ))
            })?;
            *slot = Some(item.embedding);
        }
        vectors
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| {
                    ModelError::MalformedStream(format!("the embeddings response lacks input {i}"))
                })
            })
            .collect()
    }
}
