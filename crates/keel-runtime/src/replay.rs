//! Replay: re-executing a run with the model's answers taken from its log, and finding where
//! the new run's events diverge from the original's.
//!
//! [`ReplayProvider`] serves, attempt by attempt, exactly what the model did in the recorded
//! run: the same text deltas, the same tool calls and usage, and the same failures (with the
//! same wait before the retry). Tools run for real, so a changed workspace shows up as a
//! divergence. [`diverge`] compares two logs ignoring ids, times and durations.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{
    AdapterEvent, ErrorCode, ErrorInfo, Event, EventPayload, ModelError, ModelEvent, ModelProvider,
    ModelRequest, ModelStopReason, ModelStream, ToolCall, Usage,
};
use serde::Serialize;
use serde_json::Value;

/// What one recorded model attempt did.
#[derive(Debug, Clone, PartialEq)]
struct Attempt {
    deltas: Vec<String>,
    outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Answered {
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        stop: ModelStopReason,
    },
    Failed {
        error: ErrorInfo,
        retry_after: Option<Duration>,
    },
}

/// A model provider answering from a recorded run's log.
#[derive(Debug)]
pub struct ReplayProvider {
    model: String,
    provider: String,
    attempts: Mutex<VecDeque<Attempt>>,
}

impl ReplayProvider {
    /// The recorded answers of a run, in order.
    pub fn from_events(events: &[Event]) -> Self {
        let mut model = String::from("replay");
        let mut provider = String::from("replay");
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut open: Option<Attempt> = None;
        for event in events {
            match &event.payload {
                EventPayload::ModelStarted {
                    model: m,
                    provider: p,
                    ..
                } => {
                    model.clone_from(m);
                    provider.clone_from(p);
                    open = Some(Attempt {
                        deltas: Vec::new(),
                        outcome: Outcome::Failed {
                            error: ErrorInfo::new(ErrorCode::ModelUnavailable, "cut off"),
                            retry_after: None,
                        },
                    });
                }
                EventPayload::Adapter {
                    event: AdapterEvent::OutputDelta { text, .. },
                } => {
                    if let Some(attempt) = open.as_mut() {
                        attempt.deltas.push(text.clone());
                    }
                }
                EventPayload::ModelRetry {
                    error, delay_ms, ..
                } => {
                    if let Some(mut attempt) = open.take() {
                        attempt.outcome = Outcome::Failed {
                            error: error.clone(),
                            retry_after: Some(Duration::from_millis(*delay_ms)),
                        };
                        attempts.push(attempt);
                    }
                }
                EventPayload::ModelCompleted {
                    stop_reason,
                    usage,
                    tool_calls,
                    ..
                } => {
                    if let Some(mut attempt) = open.take() {
                        attempt.outcome = Outcome::Answered {
                            tool_calls: tool_calls.clone(),
                            usage: *usage,
                            stop: *stop_reason,
                        };
                        attempts.push(attempt);
                    }
                }
                // A round that ended the run with a model error.
                EventPayload::RequestFailed { error, .. } => {
                    if let Some(mut attempt) = open.take() {
                        attempt.outcome = Outcome::Failed {
                            error: error.clone(),
                            retry_after: None,
                        };
                        attempts.push(attempt);
                    }
                }
                _ => {}
            }
        }
        Self {
            model,
            provider,
            attempts: Mutex::new(attempts.into()),
        }
    }

    fn next_attempt(&self) -> Option<Attempt> {
        match self.attempts.lock() {
            Ok(mut attempts) => attempts.pop_front(),
            Err(poisoned) => poisoned.into_inner().pop_front(),
        }
    }
}

#[async_trait]
impl ModelProvider for ReplayProvider {
    fn provider_name(&self) -> &str {
        &self.provider
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ModelError> {
        let Some(attempt) = self.next_attempt() else {
            return Err(ModelError::Recorded {
                error: ErrorInfo::new(
                    ErrorCode::ModelBadRequest,
                    "the recorded run has no further model answer: the replay diverged",
                ),
                retry_after: None,
            });
        };
        let mut items: Vec<Result<ModelEvent, ModelError>> = attempt
            .deltas
            .into_iter()
            .map(|text| Ok(ModelEvent::TextDelta { text }))
            .collect();
        match attempt.outcome {
            Outcome::Answered {
                tool_calls,
                usage,
                stop,
            } => {
                for (index, call) in tool_calls.into_iter().enumerate() {
                    items.push(Ok(ModelEvent::ToolCallStart {
                        index,
                        id: call.id,
                        name: call.name,
                    }));
                    items.push(Ok(ModelEvent::ToolCallArgsDelta {
                        index,
                        delta: call.arguments,
                    }));
                }
                items.push(Ok(ModelEvent::Usage { usage }));
                items.push(Ok(ModelEvent::Stop { reason: stop }));
            }
            Outcome::Failed { error, retry_after } => {
                items.push(Err(ModelError::Recorded { error, retry_after }));
            }
        }
        Ok(Box::pin(futures_util::stream::iter(items)))
    }
}

/// Where two runs' logs first differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Divergence {
    /// The position (`seq`) of the first differing event.
    pub seq: u64,
    /// The original's event there (without ids, times and durations), if it has one.
    pub expected: Option<Value>,
    /// The new run's event there, if it has one.
    pub found: Option<Value>,
}

/// The first point where `new` differs from `original`, ignoring ids, times, durations and
/// the request id; `None` when the two sequences are the same.
pub fn diverge(original: &[Event], new: &[Event]) -> Option<Divergence> {
    let len = original.len().max(new.len());
    (0..len).find_map(|i| {
        let expected = original.get(i).map(comparable);
        let found = new.get(i).map(comparable);
        (expected != found).then(|| Divergence {
            seq: i as u64 + 1,
            expected,
            found,
        })
    })
}

/// An event as JSON without the fields that differ between equivalent runs.
pub fn comparable(event: &Event) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        for key in [
            "id",
            "ts",
            "requestId",
            "sessionId",
            "latencyMs",
            "durationMs",
        ] {
            map.remove(key);
        }
        if let Some(Value::Object(inner)) = map.get_mut("event") {
            inner.remove("durationMs");
        }
    }
    value
}
