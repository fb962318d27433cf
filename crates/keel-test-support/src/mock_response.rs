//! What the mock LLM answers: [`MockResponse`] (status, headers, delays, body) and
//! [`MockSse`], a builder of OpenAI-style `chat.completion.chunk` frames. Frames are rendered
//! to bytes when they are added, so serving a response only copies reference-counted buffers.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

/// The `id` every mock chunk and completion carries.
pub const MOCK_COMPLETION_ID: &str = "chatcmpl-mock";
/// The `model` every mock chunk and completion carries.
pub const MOCK_MODEL: &str = "mock-model";

/// One scripted answer of the mock server.
#[derive(Debug, Clone)]
pub struct MockResponse {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) body: MockBody,
}

#[derive(Debug, Clone)]
pub(crate) enum MockBody {
    /// A `text/event-stream` body, one element per frame.
    Sse { frames: Vec<Bytes>, abort: bool },
    /// A complete body with its content type.
    Full { content_type: String, body: Bytes },
}

/// A tool call of a scripted answer: id, name and its argument text split into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockToolCall {
    pub id: String,
    pub name: String,
    pub argument_pieces: Vec<String>,
}

impl MockToolCall {
    /// A call whose arguments are streamed in the given pieces (concatenated they are the
    /// argument JSON text).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        argument_pieces: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            argument_pieces: argument_pieces.into_iter().map(Into::into).collect(),
        }
    }

    /// The whole argument text.
    pub fn arguments(&self) -> String {
        self.argument_pieces.concat()
    }
}

/// Builds the frames of a streamed answer. Each method appends one `data: …\n\n` frame.
#[derive(Debug, Clone, Default)]
pub struct MockSse {
    frames: Vec<Bytes>,
    abort: bool,
}

impl MockSse {
    /// An empty stream (no frames, not even `[DONE]`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The opening chunk OpenAI sends: `delta: {role: assistant, content: ""}`.
    pub fn role(self) -> Self {
        self.delta(json!({ "role": "assistant", "content": "" }), None)
    }

    /// A text delta.
    pub fn text(self, text: impl AsRef<str>) -> Self {
        self.delta(json!({ "content": text.as_ref() }), None)
    }

    /// The first delta of a tool call: index, id and name, empty arguments.
    pub fn tool_call_start(self, index: usize, id: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        self.delta(
            json!({ "tool_calls": [{
                "index": index,
                "id": id.as_ref(),
                "type": "function",
                "function": { "name": name.as_ref(), "arguments": "" }
            }] }),
            None,
        )
    }

    /// A fragment of the arguments of the tool call at `index`.
    pub fn tool_call_args(self, index: usize, piece: impl AsRef<str>) -> Self {
        self.delta(
            json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece.as_ref() } }] }),
            None,
        )
    }

    /// A chunk with an empty delta and `finish_reason` (`stop`, `tool_calls`, `length`, …).
    pub fn finish(self, reason: impl AsRef<str>) -> Self {
        self.delta(json!({}), Some(reason.as_ref()))
    }

    /// The usage chunk sent with `stream_options.include_usage` (empty `choices`).
    pub fn usage(self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.chunk(json!({
            "id": MOCK_COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MOCK_MODEL,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens
            }
        }))
    }

    /// A chunk with the given `delta` object and finish reason, wrapped in the usual envelope.
    pub fn delta(self, delta: Value, finish_reason: Option<&str>) -> Self {
        self.chunk(json!({
            "id": MOCK_COMPLETION_ID,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": MOCK_MODEL,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
        }))
    }

    /// Any JSON value as one `data:` frame.
    pub fn chunk(self, chunk: Value) -> Self {
        self.raw(format!("data: {chunk}\n\n"))
    }

    /// The end-of-stream marker `data: [DONE]`.
    pub fn done(self) -> Self {
        self.raw("data: [DONE]\n\n")
    }

    /// Bytes sent verbatim as one frame (for malformed chunks, comments, odd line endings).
    pub fn raw(mut self, frame: impl Into<String>) -> Self {
        self.frames.push(Bytes::from(frame.into()));
        self
    }

    /// Arbitrary bytes sent verbatim as one frame (e.g. half of a UTF-8 character).
    pub fn raw_bytes(mut self, frame: impl AsRef<[u8]>) -> Self {
        self.frames.push(Bytes::copy_from_slice(frame.as_ref()));
        self
    }

    /// After the last frame, break the connection instead of ending the body cleanly.
    pub fn abort(mut self) -> Self {
        self.abort = true;
        self
    }

    /// The frames added so far.
    pub fn frames(&self) -> &[Bytes] {
        &self.frames
    }
}

impl MockResponse {
    /// A streamed answer with the given frames.
    pub fn sse(stream: MockSse) -> Self {
        Self::with_body(
            200,
            MockBody::Sse {
                frames: stream.frames,
                abort: stream.abort,
            },
        )
    }

    /// A complete streamed text answer: role, one delta per chunk, `finish_reason: stop`, a
    /// usage chunk (10 prompt tokens, one completion token per chunk) and `[DONE]`.
    pub fn text(chunks: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        let mut sse = MockSse::new().role();
        let mut count = 0;
        for chunk in chunks {
            sse = sse.text(chunk);
            count += 1;
        }
        Self::sse(sse.finish("stop").usage(10, count).done())
    }

    /// A complete streamed tool-call answer: for each call its start delta then one delta per
    /// argument piece, `finish_reason: tool_calls`, a usage chunk and `[DONE]`.
    pub fn tool_calls(calls: impl IntoIterator<Item = MockToolCall>) -> Self {
        let mut sse = MockSse::new().role();
        let mut count = 0;
        for (index, call) in calls.into_iter().enumerate() {
            sse = sse.tool_call_start(index, &call.id, &call.name);
            for piece in &call.argument_pieces {
                sse = sse.tool_call_args(index, piece);
                count += 1;
            }
        }
        Self::sse(sse.finish("tool_calls").usage(10, count).done())
    }

    /// A non-streamed `200` JSON answer with the given body.
    pub fn json(body: &Value) -> Self {
        Self::with_body(
            200,
            MockBody::Full {
                content_type: "application/json".into(),
                body: Bytes::from(body.to_string()),
            },
        )
    }

    /// A non-streamed `chat.completion` with a text answer and usage.
    pub fn completion_text(text: impl AsRef<str>) -> Self {
        Self::json(&completion_body(
            json!({ "role": "assistant", "content": text.as_ref() }),
            "stop",
        ))
    }

    /// A non-streamed `chat.completion` asking for tool calls.
    pub fn completion_tool_calls(calls: impl IntoIterator<Item = MockToolCall>) -> Self {
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments() }
                })
            })
            .collect();
        Self::json(&completion_body(
            json!({ "role": "assistant", "content": null, "tool_calls": calls }),
            "tool_calls",
        ))
    }

    /// An answer with any status and a body sent as is (JSON content type when it parses as
    /// JSON, plain text otherwise).
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        let body = body.into();
        let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
            "application/json"
        } else {
            "text/plain"
        };
        Self::with_body(
            status,
            MockBody::Full {
                content_type: content_type.into(),
                body: Bytes::from(body),
            },
        )
    }

    /// An OpenAI-style error: `{"error": {"message", "type", "code"}}`.
    pub fn openai_error(
        status: u16,
        message: impl AsRef<str>,
        error_type: impl AsRef<str>,
        code: Option<&str>,
    ) -> Self {
        let body = json!({ "error": {
            "message": message.as_ref(),
            "type": error_type.as_ref(),
            "param": null,
            "code": code
        } });
        Self::error(status, body.to_string())
    }

    /// Adds a response header (e.g. `Retry-After`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits this long before sending the status line.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits this long before each SSE frame after the first.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    fn with_body(status: u16, body: MockBody) -> Self {
        Self {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            body,
        }
    }
}

/// The envelope of a non-streamed completion with one choice.
fn completion_body(message: Value, finish_reason: &str) -> Value {
    json!({
        "id": MOCK_COMPLETION_ID,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MOCK_MODEL,
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 }
    })
}
