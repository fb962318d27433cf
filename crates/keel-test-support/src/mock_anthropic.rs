//! The mock's answers in the Anthropic Messages API's wire format: [`AnthropicSse`] writes a
//! streamed answer event by event (`event: <type>` and its JSON `data`, as the API sends them);
//! [`MockResponse::anthropic_text`], [`MockResponse::anthropic_tool_use`] and
//! [`MockResponse::anthropic_error`] are the usual whole answers.

use serde_json::{Value, json};

use crate::{MockResponse, MockSse, MockToolCall};

/// The `model` the mock's Anthropic answers name.
const MODEL: &str = "claude-mock";

/// Builds a streamed Messages API answer.
#[derive(Debug, Clone, Default)]
pub struct AnthropicSse {
    sse: MockSse,
}

impl AnthropicSse {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// One event: `event: <type>` and `data: <json>`.
    pub fn event(mut self, data: Value) -> Self {
        let kind = data["type"].as_str().unwrap_or("message").to_owned();
        self.sse = self.sse.raw(format!("event: {kind}\ndata: {data}\n\n"));
        self
    }

    /// `message_start`, with the input tokens (and, when non-zero, cache writes and reads).
    pub fn message_start(self, input_tokens: u64, cache_write: u64, cache_read: u64) -> Self {
        self.event(json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": MODEL,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": cache_write,
                      "cache_read_input_tokens": cache_read},
        }}))
    }

    /// A text block at `index`, its text in `chunks`.
    pub fn text_block(mut self, index: usize, chunks: &[&str]) -> Self {
        self = self.event(json!({"type": "content_block_start", "index": index,
                                 "content_block": {"type": "text", "text": ""}}));
        for chunk in chunks {
            self = self.event(json!({"type": "content_block_delta", "index": index,
                                     "delta": {"type": "text_delta", "text": chunk}}));
        }
        self.event(json!({"type": "content_block_stop", "index": index}))
    }

    /// A thinking block at `index`: its text, then its signature.
    pub fn thinking_block(mut self, index: usize, thinking: &str, signature: &str) -> Self {
        self = self.event(json!({"type": "content_block_start", "index": index,
                                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
        self = self.event(json!({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "thinking_delta", "thinking": thinking}}));
        self = self.event(json!({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "signature_delta", "signature": signature}}));
        self.event(json!({"type": "content_block_stop", "index": index}))
    }

    /// A `tool_use` block at `index`, its input JSON in the call's argument pieces.
    pub fn tool_use_block(mut self, index: usize, call: &MockToolCall) -> Self {
        self = self.event(json!({"type": "content_block_start", "index": index,
                                 "content_block": {"type": "tool_use", "id": call.id,
                                                   "name": call.name, "input": {}}}));
        for piece in &call.argument_pieces {
            self = self.event(json!({"type": "content_block_delta", "index": index,
                                     "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        self.event(json!({"type": "content_block_stop", "index": index}))
    }

    /// A keep-alive `ping`.
    pub fn ping(self) -> Self {
        self.event(json!({"type": "ping"}))
    }

    /// `message_delta` with the stop reason and output tokens, then `message_stop`.
    pub fn end(self, stop_reason: &str, output_tokens: u64) -> Self {
        self.event(json!({"type": "message_delta",
                          "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                          "usage": {"output_tokens": output_tokens}}))
            .event(json!({"type": "message_stop"}))
    }

    /// An `error` event, as the API sends mid-stream.
    pub fn error(self, kind: &str, message: &str) -> Self {
        self.event(json!({"type": "error", "error": {"type": kind, "message": message}}))
    }

    /// The answer.
    pub fn response(self) -> MockResponse {
        MockResponse::sse(self.sse)
    }
}

impl MockResponse {
    /// A streamed Messages API text answer (12 input tokens, one output token per chunk).
    pub fn anthropic_text(chunks: &[&str]) -> Self {
        AnthropicSse::new()
            .message_start(12, 0, 0)
            .text_block(0, chunks)
            .end("end_turn", chunks.len() as u64)
            .response()
    }

    /// A streamed Messages API answer calling `calls` (one `tool_use` block each).
    pub fn anthropic_tool_use(calls: &[MockToolCall]) -> Self {
        let mut sse = AnthropicSse::new().message_start(12, 0, 0);
        for (index, call) in calls.iter().enumerate() {
            sse = sse.tool_use_block(index, call);
        }
        sse.end("tool_use", 5).response()
    }

    /// A Messages API error answer: `status` and `{type: error, error: {type, message}}`.
    pub fn anthropic_error(status: u16, kind: &str, message: &str) -> Self {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        Self::error(status, body.to_string())
    }
}
