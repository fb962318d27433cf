//! Messages API answers as [`ModelEvent`]s. Streamed: `message_start` (input usage),
//! `content_block_start` (a `tool_use` block starts a call), `content_block_delta`
//! (`text_delta` text, `input_json_delta` a call's arguments), `message_delta` (the stop reason
//! and output usage), `message_stop`; `ping` is ignored and an `error` event fails the round,
//! classified like an HTTP error. Thinking blocks (`thinking_delta`, `signature_delta`) are
//! not carried yet: they are skipped. Whole: the message's content blocks in order.

use std::collections::{HashMap, VecDeque};

use keel_types::{ModelError, ModelEvent, ModelStopReason, Usage};
use serde_json::Value;

use crate::openai::Frames;
use crate::openai::http_error::classify_stream_error;

/// Decodes the data of a streamed answer's events.
#[derive(Debug, Default)]
pub(super) struct EventDecoder {
    /// Content block index → tool call index, for `tool_use` blocks.
    calls: HashMap<u64, usize>,
    input_tokens: u64,
    output_tokens: u64,
    stop: Option<ModelStopReason>,
    done: bool,
}

fn malformed(what: impl Into<String>) -> ModelError {
    ModelError::MalformedStream(what.into())
}

/// Keel's stop reason for the API's `stop_reason`.
fn stop_reason(reason: &str) -> ModelStopReason {
    match reason {
        "end_turn" | "stop_sequence" => ModelStopReason::Stop,
        "tool_use" => ModelStopReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => ModelStopReason::Length,
        "refusal" => ModelStopReason::ContentFilter,
        _ => ModelStopReason::Unknown,
    }
}

/// Input tokens of a `usage` object: uncached, written to and read from the cache.
fn input_tokens(usage: &Value) -> u64 {
    [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|key| usage.get(key).and_then(Value::as_u64))
    .sum()
}

impl Frames for EventDecoder {
    fn is_done(&self) -> bool {
        self.done
    }

    fn on_data(&mut self, data: &[u8], out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if self.done || data.trim_ascii().is_empty() {
            return Ok(());
        }
        let event: Value = serde_json::from_slice(data)
            .map_err(|e| malformed(format!("an event is not JSON: {e}")))?;
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match kind {
            "message_start" => {
                let usage = &event["message"]["usage"];
                self.input_tokens = input_tokens(usage);
                self.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let index = event["index"]
                    .as_u64()
                    .ok_or_else(|| malformed("content_block_start without an index"))?;
                let block = &event["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let call = self.calls.len();
                        self.calls.insert(index, call);
                        out.push_back(ModelEvent::ToolCallStart {
                            index: call,
                            id: block["id"].as_str().unwrap_or_default().to_owned(),
                            name: block["name"].as_str().unwrap_or_default().to_owned(),
                        });
                    }
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push_back(ModelEvent::TextDelta { text: text.into() });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => out.push_back(ModelEvent::TextDelta {
                        text: delta["text"].as_str().unwrap_or_default().to_owned(),
                    }),
                    Some("input_json_delta") => {
                        let block = event["index"].as_u64().unwrap_or(u64::MAX);
                        let index = *self.calls.get(&block).ok_or_else(|| {
                            malformed(format!(
                                "arguments for block {block}, which is no tool call"
                            ))
                        })?;
                        out.push_back(ModelEvent::ToolCallArgsDelta {
                            index,
                            delta: delta["partial_json"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned(),
                        });
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(tokens) = event["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = tokens;
                }
                let input = input_tokens(&event["usage"]);
                if input > 0 {
                    self.input_tokens = input;
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(classify_stream_error(&event["error"])),
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let Some(stop) = self.stop else {
            return Err(malformed(
                "the stream ended before the answer was complete (no message_delta with a stop_reason)",
            ));
        };
        out.push_back(ModelEvent::Usage {
            usage: Usage {
                prompt_tokens: self.input_tokens,
                completion_tokens: self.output_tokens,
                total_tokens: self.input_tokens + self.output_tokens,
            },
        });
        out.push_back(ModelEvent::Stop { reason: stop });
        Ok(())
    }
}

/// The events of a whole `message` body.
pub(super) fn message_events(body: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
    let message: Value = serde_json::from_slice(body)
        .map_err(|e| malformed(format!("the answer is not JSON: {e}")))?;
    if message.get("type").and_then(Value::as_str) == Some("error") {
        return Err(classify_stream_error(&message["error"]));
    }
    let blocks = message["content"]
        .as_array()
        .ok_or_else(|| malformed("the answer has no `content` array"))?;
    let mut events = Vec::new();
    let mut calls = 0;
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => events.push(ModelEvent::TextDelta {
                text: block["text"].as_str().unwrap_or_default().to_owned(),
            }),
            Some("tool_use") => {
                events.push(ModelEvent::ToolCallStart {
                    index: calls,
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    name: block["name"].as_str().unwrap_or_default().to_owned(),
                });
                events.push(ModelEvent::ToolCallArgsDelta {
                    index: calls,
                    delta: block["input"].to_string(),
                });
                calls += 1;
            }
            _ => {}
        }
    }
    let usage = &message["usage"];
    let (input, output) = (
        input_tokens(usage),
        usage["output_tokens"].as_u64().unwrap_or(0),
    );
    events.push(ModelEvent::Usage {
        usage: Usage {
            prompt_tokens: input,
            completion_tokens: output,
            total_tokens: input + output,
        },
    });
    events.push(ModelEvent::Stop {
        reason: stop_reason(message["stop_reason"].as_str().unwrap_or_default()),
    });
    Ok(events)
}
