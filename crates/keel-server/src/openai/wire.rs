//! The Chat Completions wire: the part of a request the facade reads ([`ChatRequest`], serde
//! types whose JSON Schemas the OpenAPI document shows) and the answer objects — a whole
//! `chat.completion`, `chat.completion.chunk` SSE frames, the usage chunk and `[DONE]` — plus
//! how a run that did not complete becomes an error.

use axum::Json;
use bytes::Bytes;
use keel::{RunResponse, RunStatus};
use keel_types::run::FinishReason;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;

/// A Chat Completions request. Every field of the OpenAI API is checked (type, and whether
/// Keel honours it); these are the ones honoured. Sampling parameters (`temperature`,
/// `max_tokens`, …) are refused with a 400 (the agent's Model document decides), `n` must be
/// 1, and `tools`, `tool_choice`, `user` and `metadata` are accepted without effect.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatRequest {
    pub(super) model: String,
    pub(super) messages: Vec<ChatMessage>,
    #[serde(default)]
    pub(super) stream: Option<bool>,
    #[serde(default)]
    pub(super) stream_options: Option<StreamOptions>,
    /// OpenAI's request metadata (string values): the run's metadata.
    #[serde(default)]
    pub(super) metadata: std::collections::BTreeMap<String, String>,
    /// OpenAI's end-user id: the run's `metadata.user` unless `metadata` has one.
    #[serde(default)]
    pub(super) user: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    pub(super) include_usage: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatMessage {
    pub(super) role: String,
    #[serde(default)]
    pub(super) content: Option<Content>,
    #[serde(default)]
    pub(super) tool_calls: Vec<ChatToolCall>,
    #[serde(default)]
    pub(super) tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatToolCall {
    pub(super) id: String,
    pub(super) function: ChatFunction,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatFunction {
    pub(super) name: String,
    #[serde(default)]
    pub(super) arguments: String,
}

/// A message's content: a string, or an array of parts (text parts only).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Part {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) text: Option<String>,
}

/// What every answer object of one completion shares.
pub(super) struct Completion {
    pub(super) id: String,
    pub(super) model: String,
    pub(super) created: u64,
}

/// The OpenAI `finish_reason` of a completed run.
pub(super) fn finish_reason(response: &RunResponse) -> &'static str {
    match response.finish_reason {
        FinishReason::Length => "length",
        _ => "stop",
    }
}

fn usage_json(response: &RunResponse) -> Value {
    json!({
        "prompt_tokens": response.usage.prompt_tokens,
        "completion_tokens": response.usage.completion_tokens,
        "total_tokens": response.usage.total_tokens,
    })
}

/// The error of a run that did not complete, if it did not.
pub(crate) fn run_error(response: &RunResponse) -> Option<ApiError> {
    match response.status {
        RunStatus::Completed => None,
        RunStatus::Cancelled => Some(ApiError::RunCancelled),
        RunStatus::Interrupted => Some(ApiError::RunInterrupted(response.request_id.to_string())),
        _ if response.finish_reason == FinishReason::Timeout => Some(ApiError::Timeout(
            response
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the run ran out of time".into()),
        )),
        _ => Some(ApiError::RunFailed(
            response
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the run failed".into()),
        )),
    }
}

impl Completion {
    /// The `chat.completion` object of a finished run.
    pub(super) fn whole(&self, response: RunResponse) -> Result<Json<Value>, ApiError> {
        if let Some(error) = run_error(&response) {
            return Err(error);
        }
        Ok(Json(json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": response.output.clone().unwrap_or_default() },
                "finish_reason": finish_reason(&response),
            }],
            "usage": usage_json(&response),
        })))
    }

    /// One `chat.completion.chunk` SSE frame.
    pub(super) fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        frame(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
        }))
    }

    /// The usage chunk (empty `choices`).
    pub(super) fn usage_chunk(&self, response: &RunResponse) -> Bytes {
        frame(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_json(response),
        }))
    }
}

/// One SSE `data:` frame carrying `value`.
pub(super) fn frame(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// The frame that ends every stream.
pub(super) const DONE: &[u8] = b"data: [DONE]\n\n";
