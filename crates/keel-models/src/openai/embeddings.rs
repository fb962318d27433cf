//! Embeddings from an OpenAI-compatible `/embeddings` endpoint (memory's hybrid recall).

use std::fmt;

use async_trait::async_trait;
use keel_types::{Embedder, ModelError};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;

use super::http_error::{body_error, classify_status, send_error};
use super::transport::{is_loopback, reqwest_client};
use super::{OpenAiConfig, endpoint};
use crate::ProviderError;

/// A client of `{base_url}/embeddings`.
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: reqwest::Url,
    model: String,
    auth: Option<HeaderValue>,
    timeout: std::time::Duration,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("url", &self.url.as_str())
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let url = endpoint(&config.base_url, "embeddings")?;
        let client = reqwest_client(url.scheme() == "http", is_loopback(&url), config.timeout)?;
        let auth = super::bearer(config.api_key.as_deref())?;
        Ok(Self {
            client,
            url,
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
        let mut request = self
            .client
            .post(self.url.clone())
            .timeout(self.timeout)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let response = request
            .send()
            .await
            .map_err(|e| send_error(&e, e.is_timeout()))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| body_error(&e, e.is_timeout()))?;
        if !(200..300).contains(&status) {
            return Err(classify_status(status, &headers, &bytes));
        }
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
