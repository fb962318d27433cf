//! Turns Chat Completions answers into normalised [`ModelEvent`]s: [`ChunkDecoder`] for
//! streamed `chat.completion.chunk`s, [`completion_events`] for a whole completion. Both
//! produce the same sequence: text and tool-call deltas, then `Usage`, then `Stop`.

use std::collections::VecDeque;

use keel_types::{ModelError, ModelEvent, ModelStopReason, Usage};
use serde_json::Value;

use super::http_error;
use super::wire::{Chunk, Completion, ToolCallDelta};

/// Tool-call indices at or above this are treated as a broken stream (they would only make
/// us allocate bookkeeping for calls that cannot exist).
const MAX_TOOL_CALLS: usize = 1024;

/// How much of an offending chunk an error message quotes.
const QUOTE_LEN: usize = 160;

/// State of one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    /// `started[i]`: the tool call at index `i` has had its `ToolCallStart`.
    started: Vec<bool>,
    finish: Option<ModelStopReason>,
    usage: Option<Usage>,
    done: bool,
}

impl ChunkDecoder {
    /// Whether `data: [DONE]` was seen; later events are ignored.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Handles the data of one SSE event, appending the resulting deltas to `out`.
    pub(crate) fn on_data(
        &mut self,
        data: &[u8],
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        if self.done {
            return Ok(());
        }
        let trimmed = data.trim_ascii();
        if trimmed == b"[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_slice(trimmed).map_err(|e| {
            ModelError::MalformedStream(format!(
                "a chunk is not valid JSON ({e}): {}",
                quote(trimmed)
            ))
        })?;
        if let Some(error) = &chunk.error {
            return Err(http_error::classify_stream_error(error));
        }
        for choice in chunk.choices {
            // We never ask for `n > 1`; other choices would not be ours to merge.
            if choice.index != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content
                    && !text.is_empty()
                {
                    out.push_back(ModelEvent::TextDelta {
                        text: text.into_owned(),
                    });
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    self.on_tool_call(position, call, out)?;
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(stop_reason(&reason));
            }
        }
        if let Some(usage) = chunk.usage {
            // Kept until the end: some servers repeat usage in several chunks.
            self.usage = Some(usage.into());
        }
        Ok(())
    }

    fn on_tool_call(
        &mut self,
        position: usize,
        call: ToolCallDelta<'_>,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        let index = call.index.unwrap_or(position);
        if index >= MAX_TOOL_CALLS {
            return Err(ModelError::MalformedStream(format!(
                "tool call index {index} is out of range"
            )));
        }
        if self.started.len() <= index {
            self.started.resize(index + 1, false);
        }
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let arguments = arguments.filter(|a| !a.is_empty());
        if !self.started[index] {
            match name.filter(|n| !n.is_empty()) {
                Some(name) => {
                    let id = match call.id.filter(|id| !id.is_empty()) {
                        Some(id) => id.into_owned(),
                        // Some compatible servers omit ids; the runtime still needs one.
                        None => format!("call_{index}"),
                    };
                    self.started[index] = true;
                    out.push_back(ModelEvent::ToolCallStart {
                        index,
                        id,
                        name: name.into_owned(),
                    });
                }
                None if arguments.is_some() => {
                    return Err(ModelError::MalformedStream(format!(
                        "tool call {index} received arguments before its name"
                    )));
                }
                None => return Ok(()),
            }
        }
        if let Some(arguments) = arguments {
            out.push_back(ModelEvent::ToolCallArgsDelta {
                index,
                delta: arguments.into_owned(),
            });
        }
        Ok(())
    }

    /// The body ended (or `[DONE]` was followed by the end): appends `Usage` and `Stop`, or
    /// fails when the answer is incomplete.
    pub(crate) fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if !self.done && self.finish.is_none() {
            return Err(ModelError::MalformedStream(
                "the stream ended before the answer was complete (no finish_reason and no [DONE])"
                    .into(),
            ));
        }
        if let Some(usage) = self.usage.take() {
            out.push_back(ModelEvent::Usage { usage });
        }
        out.push_back(ModelEvent::Stop {
            reason: self.finish.unwrap_or(ModelStopReason::Unknown),
        });
        Ok(())
    }
}

/// The events of a whole completion body.
pub(crate) fn completion_events(body: &[u8]) -> Result<Vec<ModelEvent>, ModelError> {
    let completion: Completion = serde_json::from_slice(body).map_err(|e| {
        ModelError::MalformedStream(format!(
            "the completion is not valid JSON of the expected shape ({e}): {}",
            quote(body)
        ))
    })?;
    if let Some(error) = &completion.error {
        return Err(http_error::classify_stream_error(error));
    }
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(ModelError::MalformedStream(
            "the completion has no choices".into(),
        ));
    };
    let mut events = Vec::new();
    if let Some(text) = choice.message.content
        && !text.is_empty()
    {
        events.push(ModelEvent::TextDelta { text });
    }
    for (index, call) in choice.message.tool_calls.into_iter().flatten().enumerate() {
        if call.function.name.is_empty() {
            return Err(ModelError::MalformedStream(format!(
                "tool call {index} of the completion has no name"
            )));
        }
        let id = call
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("call_{index}"));
        events.push(ModelEvent::ToolCallStart {
            index,
            id,
            name: call.function.name,
        });
        let arguments = match call.function.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
        if !arguments.is_empty() {
            events.push(ModelEvent::ToolCallArgsDelta {
                index,
                delta: arguments,
            });
        }
    }
    if let Some(usage) = completion.usage {
        events.push(ModelEvent::Usage {
            usage: usage.into(),
        });
    }
    let reason = choice
        .finish_reason
        .as_deref()
        .map_or(ModelStopReason::Unknown, stop_reason);
    events.push(ModelEvent::Stop { reason });
    Ok(events)
}

/// OpenAI's `finish_reason` → ours. Unknown values are not an error (servers vary).
fn stop_reason(reason: &str) -> ModelStopReason {
    match reason {
        "stop" | "end_turn" | "eos" => ModelStopReason::Stop,
        "tool_calls" | "function_call" => ModelStopReason::ToolCalls,
        "length" => ModelStopReason::Length,
        "content_filter" => ModelStopReason::ContentFilter,
        _ => ModelStopReason::Unknown,
    }
}

/// The start of `bytes` as text, for error messages.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    crate::truncate(&text, QUOTE_LEN).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(frames: &[&str]) -> Result<Vec<ModelEvent>, ModelError> {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        for frame in frames {
            decoder.on_data(frame.as_bytes(), &mut out)?;
        }
        decoder.on_end(&mut out)?;
        Ok(out.into())
    }

    #[test]
    fn interleaved_tool_calls_keep_their_indices() {
        let events = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}},{"index":1,"id":"b","function":{"name":"g","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                ModelEvent::ToolCallStart {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                ModelEvent::ToolCallStart {
                    index: 1,
                    id: "b".into(),
                    name: "g".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    index: 1,
                    delta: "{".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    index: 0,
                    delta: "{}".into()
                },
                ModelEvent::ToolCallArgsDelta {
                    index: 1,
                    delta: "}".into()
                },
                ModelEvent::Stop {
                    reason: ModelStopReason::ToolCalls
                },
            ]
        );
    }

    #[test]
    fn arguments_before_a_name_are_malformed() {
        let err = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
        ])
        .unwrap_err();
        assert!(matches!(err, ModelError::MalformedStream(m) if m.contains("before its name")));
    }

    #[test]
    fn done_without_finish_reason_stops_with_unknown() {
        let events = decode(&[
            r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Stop {
                reason: ModelStopReason::Unknown
            })
        );
    }

    #[test]
    fn a_chunk_of_the_wrong_shape_is_malformed() {
        let err = decode(&[r#"{"choices":"nope"}"#]).unwrap_err();
        assert!(matches!(err, ModelError::MalformedStream(m) if m.contains("not valid JSON")));
    }

    #[test]
    fn a_completion_carrying_an_error_is_classified() {
        let err = completion_events(br#"{"error":{"message":"bad key","type":"invalid_api_key"}}"#)
            .unwrap_err();
        assert_eq!(
            err,
            ModelError::Auth {
                status: 401,
                message: "bad key".into()
            }
        );
    }

    #[test]
    fn completion_with_object_arguments_is_accepted() {
        let events = completion_events(
            br#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"x","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(
            events[1],
            ModelEvent::ToolCallArgsDelta {
                index: 0,
                delta: r#"{"a":1}"#.into()
            }
        );
    }
}
