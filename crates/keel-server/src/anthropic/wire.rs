//! The Messages API's answer shapes: the whole `message`, and the streamed events
//! (`message_start`, a `text` block's `content_block_start` / `_delta` / `_stop`,
//! `message_delta` with the stop reason and usage, `message_stop`; an `error` event when the
//! run fails).

use axum::Json;
use bytes::Bytes;
use keel::{FinishReason, RunResponse, RuntimeError};
use serde_json::{Value, json};

use super::error_body;
use crate::ApiError;
use crate::openai::stream::Dialect;
use crate::openai::wire::run_error;

/// What every shape of one answer shares.
pub(super) struct MessageHead {
    /// `msg_<request id>`.
    pub id: String,
    /// The agent.
    pub model: String,
}

/// The API's `stop_reason` for how a run ended.
fn stop_reason(response: &RunResponse) -> &'static str {
    match response.finish_reason {
        FinishReason::Length => "max_tokens",
        FinishReason::ContentFilter => "refusal",
        _ => "end_turn",
    }
}

/// The run's usage as the API reports it: `input_tokens` are those neither read from nor
/// written to the cache.
fn usage(response: &RunResponse) -> Value {
    let usage = &response.usage;
    let cached = usage.cache_read_tokens + usage.cache_write_tokens;
    json!({
        "input_tokens": usage.prompt_tokens.saturating_sub(cached),
        "output_tokens": usage.completion_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    })
}

impl MessageHead {
    /// The whole `message` of a run, or the error it ended with.
    pub(super) fn whole(&self, response: &RunResponse) -> Result<Json<Value>, ApiError> {
        if let Some(error) = run_error(response) {
            return Err(error);
        }
        Ok(Json(self.message(response)))
    }

    /// The whole `message` of a completed run.
    fn message(&self, response: &RunResponse) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": response.output.clone().unwrap_or_default()}],
            "stop_reason": stop_reason(response),
            "stop_sequence": null,
            "usage": usage(response),
        })
    }
}

/// One SSE event: `event: <type>` and its data.
fn event(data: &Value) -> Bytes {
    let kind = data["type"].as_str().unwrap_or("message");
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

fn error_event(error: &ApiError) -> Bytes {
    let message = error.body()["error"]["message"]
        .as_str()
        .unwrap_or("the run failed")
        .to_owned();
    event(&error_body(error.status(), &message))
}

/// The streamed answer.
pub(super) struct MessageStream {
    pub head: MessageHead,
}

impl Dialect for MessageStream {
    fn opening(&self) -> Vec<Bytes> {
        vec![
            event(&json!({"type": "message_start", "message": {
                "id": self.head.id, "type": "message", "role": "assistant",
                "model": self.head.model, "content": [], "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }})),
            event(&json!({"type": "content_block_start", "index": 0,
                          "content_block": {"type": "text", "text": ""}})),
        ]
    }

    fn text(&self, _: u64, text: String) -> Bytes {
        event(&json!({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": text}}))
    }

    fn closing(&self, response: Result<RunResponse, RuntimeError>) -> Vec<Bytes> {
        let response = match response {
            Ok(response) => response,
            Err(_) => {
                let error = ApiError::RunFailed("the run ended abnormally".into());
                return vec![error_event(&error)];
            }
        };
        if let Some(error) = run_error(&response) {
            return vec![error_event(&error)];
        }
        vec![
            event(&json!({"type": "content_block_stop", "index": 0})),
            event(&json!({"type": "message_delta",
                          "delta": {"stop_reason": stop_reason(&response), "stop_sequence": null},
                          "usage": usage(&response)})),
            event(&json!({"type": "message_stop"})),
        ]
    }

    fn cut_off(&self, error: ApiError) -> Bytes {
        error_event(&error)
    }
}
