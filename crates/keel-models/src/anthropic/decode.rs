//! Messages API answers as [`ModelEvent`]s. Streamed: `message_start` (input usage),
//! `content_block_start` (a `tool_use` block starts a call, a `thinking` block a reasoning
//! block, a `redacted_thinking` block comes whole), `content_block_delta` (`text_delta` text,
//! `input_json_delta` a call's arguments, `thinking_delta` and `signature_delta` a reasoning
//! block's text and signature), `message_delta` (the stop reason and usage), `message_stop`;
//! `ping` and `content_block_stop` carry nothing, and an `error` event fails the round,
//! classified like an HTTP error. Whole: the message's content blocks in order.

use std::collections::{HashMap, VecDeque};

use keel_types::{ModelError, ModelEvent, ModelStopReason, Usage};
use serde_json::Value;

use crate::openai::Frames;
use crate::openai::http_error::classify_stream_error;

/// What a content block of the answer is, by the API's block index.
#[derive(Debug, Clone, Copy)]
enum Block {
    /// The tool call at this index among the answer's calls.
    Call(usize),
    /// The thinking block at this index among the answer's thinking blocks.
    Thinking(usize),
}

/// Decodes the data of a streamed answer's events.
#[derive(Debug, Default)]
pub(super) struct EventDecoder {
    blocks: HashMap<u64, Block>,
    calls: usize,
    thoughts: usize,
    usage: Usage,
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
        "pause_turn" => ModelStopReason::Paused,
        _ => ModelStopReason::Unknown,
    }
}

/// Reads the counts a `usage` object has into `usage` (`message_delta` repeats only some):
/// input is uncached, written to and read from the cache together.
fn read_usage(from: &Value, usage: &mut Usage) {
    let count = |key: &str| from.get(key).and_then(Value::as_u64);
    let (uncached, written, read) = (
        count("input_tokens"),
        count("cache_creation_input_tokens"),
        count("cache_read_input_tokens"),
    );
    if uncached.is_some() || written.is_some() || read.is_some() {
        let before = usage
            .prompt_tokens
            .saturating_sub(usage.cache_write_tokens + usage.cache_read_tokens);
        usage.cache_write_tokens = written.unwrap_or(usage.cache_write_tokens);
        usage.cache_read_tokens = read.unwrap_or(usage.cache_read_tokens);
        usage.prompt_tokens =
            uncached.unwrap_or(before) + usage.cache_write_tokens + usage.cache_read_tokens;
    }
    if let Some(output) = count("output_tokens") {
        usage.completion_tokens = output;
    }
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
}

fn text_of(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_owned()
}

impl EventDecoder {
    fn block(&self, event: &Value) -> Result<Block, ModelError> {
        let index = event["index"].as_u64().unwrap_or(u64::MAX);
        self.blocks.get(&index).copied().ok_or_else(|| {
            malformed(format!(
                "a `{}` for block {index}, which is no tool call or thinking block",
                event["delta"]["type"].as_str().unwrap_or_default()
            ))
        })
    }

    fn on_block_start(
        &mut self,
        event: &Value,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        let index = event["index"]
            .as_u64()
            .ok_or_else(|| malformed("content_block_start without an index"))?;
        let block = &event["content_block"];
        match block["type"].as_str() {
            Some("tool_use") => {
                self.blocks.insert(index, Block::Call(self.calls));
                out.push_back(ModelEvent::ToolCallStart {
                    index: self.calls,
                    id: text_of(block, "id"),
                    name: text_of(block, "name"),
                });
                self.calls += 1;
            }
            Some("thinking") => {
                let at = self.thoughts;
                self.blocks.insert(index, Block::Thinking(at));
                self.thoughts += 1;
                // Opens the block, even empty: every block is kept, in order.
                out.push_back(ModelEvent::ThinkingDelta {
                    index: at,
                    text: text_of(block, "thinking"),
                });
                if let Some(signature) = block["signature"].as_str().filter(|s| !s.is_empty()) {
                    out.push_back(ModelEvent::ThinkingSignature {
                        index: at,
                        signature: signature.to_owned(),
                    });
                }
            }
            Some("redacted_thinking") => {
                out.push_back(ModelEvent::RedactedThinking {
                    index: self.thoughts,
                    data: text_of(block, "data"),
                });
                self.thoughts += 1;
            }
            Some("text") => {
                if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push_back(ModelEvent::TextDelta { text: text.into() });
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_block_delta(
        &mut self,
        event: &Value,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        let delta = &event["delta"];
        match (delta["type"].as_str(), self.block(event)) {
            (Some("text_delta"), _) => out.push_back(ModelEvent::TextDelta {
                text: text_of(delta, "text"),
            }),
            (Some("input_json_delta"), Ok(Block::Call(index))) => {
                out.push_back(ModelEvent::ToolCallArgsDelta {
                    index,
                    delta: text_of(delta, "partial_json"),
                });
            }
            (Some("thinking_delta"), Ok(Block::Thinking(index))) => {
                out.push_back(ModelEvent::ThinkingDelta {
                    index,
                    text: text_of(delta, "thinking"),
                });
            }
            (Some("signature_delta"), Ok(Block::Thinking(index))) => {
                out.push_back(ModelEvent::ThinkingSignature {
                    index,
                    signature: text_of(delta, "signature"),
                });
            }
            (Some("input_json_delta" | "thinking_delta" | "signature_delta"), found) => {
                return Err(match found {
                    Err(error) => error,
                    Ok(_) => malformed(format!(
                        "a `{}` for block {} of another kind",
                        delta["type"].as_str().unwrap_or_default(),
                        event["index"]
                    )),
                });
            }
            // Delta types added later (citations and the like).
            _ => {}
        }
        Ok(())
    }
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
            "message_start" => read_usage(&event["message"]["usage"], &mut self.usage),
            "content_block_start" => self.on_block_start(&event, out)?,
            "content_block_delta" => self.on_block_delta(&event, out)?,
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                read_usage(&event["usage"], &mut self.usage);
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
        out.push_back(ModelEvent::Usage { usage: self.usage });
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
    let (mut calls, mut thoughts) = (0, 0);
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => events.push(ModelEvent::TextDelta {
                text: text_of(block, "text"),
            }),
            Some("tool_use") => {
                events.push(ModelEvent::ToolCallStart {
                    index: calls,
                    id: text_of(block, "id"),
                    name: text_of(block, "name"),
                });
                events.push(ModelEvent::ToolCallArgsDelta {
                    index: calls,
                    delta: block["input"].to_string(),
                });
                calls += 1;
            }
            Some("thinking") => {
                events.push(ModelEvent::ThinkingDelta {
                    index: thoughts,
                    text: text_of(block, "thinking"),
                });
                events.push(ModelEvent::ThinkingSignature {
                    index: thoughts,
                    signature: text_of(block, "signature"),
                });
                thoughts += 1;
            }
            Some("redacted_thinking") => {
                events.push(ModelEvent::RedactedThinking {
                    index: thoughts,
                    data: text_of(block, "data"),
                });
                thoughts += 1;
            }
            _ => {}
        }
    }
    let mut usage = Usage::default();
    read_usage(&message["usage"], &mut usage);
    events.push(ModelEvent::Usage { usage });
    events.push(ModelEvent::Stop {
        reason: stop_reason(message["stop_reason"].as_str().unwrap_or_default()),
    });
    Ok(events)
}
