//! Cassettes: a recorded run's model exchanges, to answer a run's rounds without a model
//! (`provider: replay`). Written by `keel runs export ID --cassette FILE` from the run's
//! event log ([`Cassette::from_events`]); each exchange holds what the round sent (its
//! prompt sections by size and hash, the tool definitions among them, and its parameters,
//! under one digest) and what the model answered, the streamed chunks as they came, or how
//! the attempt failed.
//!
//! [`CassetteProvider`] hands out the exchanges in order. With [`CassetteMatch::Request`] it
//! answers a round only if its request is the recorded one, and otherwise fails the round
//! with what changed: which sections, which parameters.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    AdapterEvent, ErrorCode, ErrorInfo, Event, EventPayload, ModelError, ModelEvent, ModelParams,
    ModelProvider, ModelRequest, ModelStopReason, ModelStream, PromptSection, Thinking, ToolCall,
    Usage,
};

/// The `format` of the cassettes this version writes and reads.
pub const FORMAT: &str = "keel.cassette/1";

/// How a cassette picks the recorded answer for a round (`match:` of a `replay` model).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CassetteMatch {
    /// The next recorded exchange, whatever the request.
    #[default]
    Order,
    /// The next recorded exchange, only if the round's request is the recorded one.
    Request,
}

/// A run's model exchanges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cassette {
    /// [`FORMAT`].
    pub format: String,
    /// The run it was recorded from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The agent that run ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Every model attempt of the run, in order (a retried round has several).
    pub exchanges: Vec<Exchange>,
    /// What the run's compactions' summarizer gave, in order (`runtime.context.compacted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summaries: Vec<RecordedSummary>,
}

/// What one compaction's summarizer gave: a summary with its usage, or why there was none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One model attempt: what was sent, and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    pub step: u32,
    /// The model that answered, as it named itself.
    pub model: String,
    pub provider: String,
    /// What the round sent; absent in a run recorded before prompts were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RecordedRequest>,
    pub answer: RecordedAnswer,
}

/// A request by its parts' sizes and hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedRequest {
    /// SHA-256 of the sections and parameters together ([`request_digest`]).
    pub digest: String,
    pub sections: Vec<PromptSection>,
    #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
    pub params: ModelParams,
}

impl RecordedRequest {
    /// The record of a request made of `sections` with `params`.
    pub fn new(sections: Vec<PromptSection>, params: ModelParams) -> Self {
        Self {
            digest: request_digest(&sections, &params),
            sections,
            params,
        }
    }
}

/// What a model attempt gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RecordedAnswer {
    #[serde(rename_all = "camelCase")]
    Answered {
        /// The answer's text, chunk by chunk as it was streamed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        chunks: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<Thinking>,
        usage: Usage,
        stop_reason: ModelStopReason,
    },
    #[serde(rename_all = "camelCase")]
    Failed {
        error: ErrorInfo,
        /// The wait before the retry that followed, if one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
}

/// SHA-256 (hex) of a request's sections and parameters as JSON.
pub fn request_digest(sections: &[PromptSection], params: &ModelParams) -> String {
    let json = serde_json::to_vec(&(sections, params)).unwrap_or_default();
    crate::to_hex(&Sha256::digest(&json))
}

impl Cassette {
    /// The model exchanges of a run's event log (its agent, which the log does not name, is
    /// left for the caller to set).
    pub fn from_events(events: &[Event]) -> Self {
        let mut cassette = Cassette {
            format: FORMAT.to_owned(),
            request_id: events.first().map(|e| e.request_id.to_string()),
            agent: None,
            exchanges: Vec::new(),
            summaries: Vec::new(),
        };
        let mut sections: Option<(u32, Vec<PromptSection>)> = None;
        let mut open: Option<Exchange> = None;
        for event in events {
            match &event.payload {
                EventPayload::PromptAssembled { step, sections: s } => {
                    sections = Some((*step, s.clone()));
                }
                EventPayload::ModelStarted {
                    step,
                    model,
                    provider,
                    params,
                    ..
                } => {
                    let request = sections
                        .as_ref()
                        .filter(|(at, _)| at == step)
                        .map(|(_, s)| RecordedRequest::new(s.clone(), params.clone()));
                    open = Some(Exchange {
                        step: *step,
                        model: model.clone(),
                        provider: provider.clone(),
                        request,
                        answer: RecordedAnswer::Failed {
                            error: ErrorInfo::new(ErrorCode::ModelUnavailable, "cut off"),
                            retry_after_ms: None,
                        },
                    });
                }
                EventPayload::Adapter {
                    event: AdapterEvent::OutputDelta { text, .. },
                } => {
                    if let Some(exchange) = open.as_mut() {
                        exchange.push_chunk(text);
                    }
                }
                EventPayload::ModelRetry {
                    error, delay_ms, ..
                } => {
                    if let Some(mut exchange) = open.take() {
                        exchange.answer = RecordedAnswer::Failed {
                            error: error.clone(),
                            retry_after_ms: Some(*delay_ms),
                        };
                        cassette.exchanges.push(exchange);
                    }
                }
                EventPayload::ModelCompleted {
                    stop_reason,
                    usage,
                    content,
                    tool_calls,
                    thinking,
                    ..
                } => {
                    if let Some(mut exchange) = open.take() {
                        let mut chunks = exchange.take_chunks();
                        // A program's rounds stream nothing: the answer is one chunk.
                        if chunks.concat() != *content {
                            chunks = vec![content.clone()];
                        }
                        chunks.retain(|c| !c.is_empty());
                        exchange.answer = RecordedAnswer::Answered {
                            chunks,
                            tool_calls: tool_calls.clone(),
                            thinking: thinking.clone(),
                            usage: *usage,
                            stop_reason: *stop_reason,
                        };
                        cassette.exchanges.push(exchange);
                    }
                }
                // A round that ended the run with a model error, or a fallback after it.
                EventPayload::RequestFailed { error, .. } => {
                    if let Some(mut exchange) = open.take() {
                        exchange.answer = RecordedAnswer::Failed {
                            error: error.clone(),
                            retry_after_ms: None,
                        };
                        cassette.exchanges.push(exchange);
                    }
                }
                EventPayload::ContextCompacted {
                    summary,
                    summarizer_usage,
                    error,
                    ..
                } if summary.is_some() || error.is_some() => {
                    cassette.summaries.push(RecordedSummary {
                        summary: summary.clone(),
                        usage: summarizer_usage.unwrap_or_default(),
                        error: error.clone(),
                    });
                }
                EventPayload::ModelFallback { reason, .. } => {
                    if let Some(mut exchange) = open.take() {
                        exchange.answer = RecordedAnswer::Failed {
                            error: reason.clone(),
                            retry_after_ms: None,
                        };
                        cassette.exchanges.push(exchange);
                    }
                }
                _ => {}
            }
        }
        cassette
    }
}

impl Exchange {
    /// While the answer is open, its chunks are kept in a placeholder `Answered`.
    fn push_chunk(&mut self, text: &str) {
        match &mut self.answer {
            RecordedAnswer::Answered { chunks, .. } => chunks.push(text.to_owned()),
            RecordedAnswer::Failed { .. } => {
                self.answer = RecordedAnswer::Answered {
                    chunks: vec![text.to_owned()],
                    tool_calls: Vec::new(),
                    thinking: Vec::new(),
                    usage: Usage::default(),
                    stop_reason: ModelStopReason::Unknown,
                };
            }
        }
    }

    fn take_chunks(&mut self) -> Vec<String> {
        match &mut self.answer {
            RecordedAnswer::Answered { chunks, .. } => std::mem::take(chunks),
            RecordedAnswer::Failed { .. } => Vec::new(),
        }
    }
}

/// A model answering from a cassette.
#[derive(Debug)]
pub struct CassetteProvider {
    model: String,
    provider: String,
    matching: CassetteMatch,
    recorded: usize,
    exchanges: Mutex<VecDeque<Exchange>>,
    summaries: Mutex<VecDeque<RecordedSummary>>,
}

impl CassetteProvider {
    /// Answers from `cassette`'s exchanges, named like the model that answered first.
    pub fn new(cassette: Cassette, matching: CassetteMatch) -> Self {
        let (model, provider) = cassette
            .exchanges
            .first()
            .map_or(("replay".to_owned(), "replay".to_owned()), |e| {
                (e.model.clone(), e.provider.clone())
            });
        Self {
            model,
            provider,
            matching,
            recorded: cassette.exchanges.len(),
            exchanges: Mutex::new(cassette.exchanges.into()),
            summaries: Mutex::new(cassette.summaries.into()),
        }
    }

    fn next_exchange(&self) -> Option<Exchange> {
        match self.exchanges.lock() {
            Ok(mut exchanges) => exchanges.pop_front(),
            Err(poisoned) => poisoned.into_inner().pop_front(),
        }
    }
}

#[async_trait]
impl ModelProvider for CassetteProvider {
    fn provider_name(&self) -> &str {
        &self.provider
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn recorded_summary(&self) -> Option<Result<(String, Usage), String>> {
        let next = match self.summaries.lock() {
            Ok(mut summaries) => summaries.pop_front(),
            Err(poisoned) => poisoned.into_inner().pop_front(),
        };
        // A cassette with no summary left answers that, rather than asking its exchanges.
        Some(match next {
            Some(RecordedSummary {
                summary: Some(summary),
                usage,
                ..
            }) => Ok((summary, usage)),
            Some(RecordedSummary { error, .. }) => {
                Err(error.unwrap_or_else(|| "the recorded compaction had no summary".into()))
            }
            None => Err("the cassette holds no further summary".into()),
        })
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let Some(exchange) = self.next_exchange() else {
            return Err(ModelError::Recorded {
                error: ErrorInfo::new(
                    ErrorCode::ModelBadRequest,
                    format!(
                        "the cassette has no further model answer: this run asks for more than \
                         the {} recorded",
                        self.recorded
                    ),
                ),
                retry_after: None,
            });
        };
        if self.matching == CassetteMatch::Request
            && let Some(recorded) = &exchange.request
            && let Some(diff) = request_diff(recorded, &request)
        {
            return Err(ModelError::BadRequest {
                status: 0,
                message: format!(
                    "the request of step {} is not the one the cassette recorded:\n{diff}",
                    exchange.step
                ),
            });
        }
        let items: Vec<Result<ModelEvent, ModelError>> = match exchange.answer {
            RecordedAnswer::Answered {
                chunks,
                tool_calls,
                thinking,
                usage,
                stop_reason,
            } => answer_events(chunks, tool_calls, thinking, usage, stop_reason)
                .into_iter()
                .map(Ok)
                .collect(),
            RecordedAnswer::Failed {
                error,
                retry_after_ms,
            } => vec![Err(ModelError::Recorded {
                error,
                retry_after: retry_after_ms.map(Duration::from_millis),
            })],
        };
        // Each recorded chunk comes on its own, so the replay records the same events.
        Ok(crate::ports::one_read_at_a_time(items))
    }
}

/// The events of a recorded answer.
fn answer_events(
    chunks: Vec<String>,
    tool_calls: Vec<ToolCall>,
    thinking: Vec<Thinking>,
    usage: Usage,
    stop: ModelStopReason,
) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    for (index, block) in thinking.into_iter().enumerate() {
        match block {
            Thinking::Thinking {
                thinking,
                signature,
            } => {
                events.push(ModelEvent::ThinkingDelta {
                    index,
                    text: thinking,
                });
                events.push(ModelEvent::ThinkingSignature { index, signature });
            }
            Thinking::RedactedThinking { data } => {
                events.push(ModelEvent::RedactedThinking { index, data });
            }
        }
    }
    events.extend(
        chunks
            .into_iter()
            .map(|text| ModelEvent::TextDelta { text }),
    );
    for (index, call) in tool_calls.into_iter().enumerate() {
        events.push(ModelEvent::ToolCallStart {
            index,
            id: call.id,
            name: call.name,
        });
        events.push(ModelEvent::ToolCallArgsDelta {
            index,
            delta: call.arguments,
        });
    }
    events.push(ModelEvent::Usage { usage });
    events.push(ModelEvent::Stop { reason: stop });
    events
}

/// What differs between a recorded request and `request`, one line per difference; `None`
/// when they are the same.
pub fn request_diff(recorded: &RecordedRequest, request: &ModelRequest) -> Option<String> {
    if request_digest(&request.sections, &request.params) == recorded.digest {
        return None;
    }
    let mut diff = String::new();
    let find = |list: &[PromptSection], name: &str| list.iter().find(|s| s.name == name).cloned();
    let mut names: Vec<&str> = recorded.sections.iter().map(|s| s.name.as_str()).collect();
    for section in &request.sections {
        if !names.contains(&section.name.as_str()) {
            names.push(&section.name);
        }
    }
    for name in names {
        let count = |s: &PromptSection| {
            let unit = if s.name == "tools" { "tool" } else { "message" };
            let plural = if s.messages == 1 { "" } else { "s" };
            format!("{} {unit}{plural}", s.messages)
        };
        let size = |s: &PromptSection| format!("{}, {} bytes", count(s), s.bytes);
        match (
            find(&recorded.sections, name),
            find(&request.sections, name),
        ) {
            (Some(was), Some(now)) if was.sha256 != now.sha256 => {
                let detail = match was.messages == now.messages {
                    true => format!("{}, {} → {} bytes", count(&now), was.bytes, now.bytes),
                    false => format!("{} → {}", size(&was), size(&now)),
                };
                let _ = writeln!(diff, "  {name}: changed ({detail})");
            }
            (Some(was), None) => {
                let _ = writeln!(diff, "  {name}: gone (was {})", size(&was));
            }
            (None, Some(now)) => {
                let _ = writeln!(diff, "  {name}: new ({})", size(&now));
            }
            _ => {}
        }
    }
    let (was, now) = (
        serde_json::to_value(&recorded.params).unwrap_or_default(),
        serde_json::to_value(&request.params).unwrap_or_default(),
    );
    let null = serde_json::Value::Null;
    let mut keys: Vec<&String> = was
        .as_object()
        .into_iter()
        .chain(now.as_object())
        .flat_map(|o| o.keys())
        .collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (before, after) = (was.get(key).unwrap_or(&null), now.get(key).unwrap_or(&null));
        if before != after {
            let _ = writeln!(diff, "  params.{key}: {before} → {after}");
        }
    }
    if diff.is_empty() {
        diff.push_str("  the sections are the same but their digest differs\n");
    }
    Some(diff.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn section(name: &str, messages: u32, bytes: u64, sha256: &str) -> PromptSection {
        PromptSection {
            name: name.into(),
            messages,
            bytes,
            sha256: sha256.into(),
            tokens: 0,
        }
    }

    fn request(sections: Vec<PromptSection>, temperature: f64) -> ModelRequest {
        ModelRequest {
            messages: Vec::new(),
            tools: Arc::from(Vec::new()),
            params: ModelParams {
                temperature: Some(temperature),
                ..ModelParams::default()
            },
            stream: true,
            sections,
            traceparent: None,
        }
    }

    #[test]
    fn a_changed_request_is_described_section_by_section_and_parameter_by_parameter() {
        let recorded = RecordedRequest::new(
            vec![
                section("instructions", 1, 98, "aa"),
                section("input", 1, 40, "bb"),
                section("rounds", 2, 300, "cc"),
            ],
            ModelParams {
                temperature: Some(0.2),
                ..ModelParams::default()
            },
        );
        let same = request(recorded.sections.clone(), 0.2);
        assert_eq!(request_diff(&recorded, &same), None);

        let changed = request(
            vec![
                section("instructions", 1, 94, "ab"),
                section("input", 1, 40, "bb"),
                section("tools", 2, 512, "dd"),
            ],
            0.5,
        );
        assert_eq!(
            request_diff(&recorded, &changed).unwrap(),
            "  instructions: changed (1 message, 98 → 94 bytes)\n  rounds: gone (was 2 messages, 300 bytes)\n  tools: new (2 tools, 512 bytes)\n  params.temperature: 0.2 → 0.5"
        );
    }

    #[test]
    fn a_cassette_round_trips_through_its_file_format() {
        let cassette = Cassette {
            format: FORMAT.into(),
            request_id: Some("run_1".into()),
            agent: Some("reader".into()),
            summaries: vec![RecordedSummary {
                summary: Some("Read a.txt.".into()),
                usage: Usage::new(900, 12),
                error: None,
            }],
            exchanges: vec![
                Exchange {
                    step: 1,
                    model: "claude-test".into(),
                    provider: "anthropic".into(),
                    request: Some(RecordedRequest::new(
                        vec![section("input", 1, 10, "ee")],
                        ModelParams::default(),
                    )),
                    answer: RecordedAnswer::Failed {
                        error: ErrorInfo::new(ErrorCode::ModelUnavailable, "Overloaded"),
                        retry_after_ms: Some(250),
                    },
                },
                Exchange {
                    step: 1,
                    model: "claude-test".into(),
                    provider: "anthropic".into(),
                    request: None,
                    answer: RecordedAnswer::Answered {
                        chunks: vec!["Hel".into(), "lo".into()],
                        tool_calls: Vec::new(),
                        thinking: vec![Thinking::RedactedThinking { data: "x".into() }],
                        usage: Usage::new(10, 2),
                        stop_reason: ModelStopReason::Stop,
                    },
                },
            ],
        };
        let text = serde_json::to_string(&cassette).unwrap();
        assert_eq!(serde_json::from_str::<Cassette>(&text).unwrap(), cassette);
        let events = answer_events(
            vec!["Hel".into(), "lo".into()],
            Vec::new(),
            vec![Thinking::RedactedThinking { data: "x".into() }],
            Usage::new(10, 2),
            ModelStopReason::Stop,
        );
        assert_eq!(
            events[0],
            ModelEvent::RedactedThinking {
                index: 0,
                data: "x".into()
            },
            "thinking comes before the text, as a model writes it"
        );
        assert_eq!(events.len(), 5);
    }
}
