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
        // Each recorded delta comes on its own, so the replay records the same events.
        Ok(keel_types::ports::one_read_at_a_time(items))
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
///
/// An original recorded before `runtime.prompt.assembled` existed (it has none) is compared
/// the way it was written: the new run's `prompt.assembled` events are left out, and `seq`
/// (shifted by them) and the `error` of a tool result (older logs lack it) are not compared;
/// the position in the log still is.
pub fn diverge(original: &[Event], new: &[Event]) -> Option<Divergence> {
    let legacy = !original.iter().any(is_prompt);
    let new: Vec<&Event> = new.iter().filter(|e| !(legacy && is_prompt(e))).collect();
    let view = |event: &Event| {
        let mut value = comparable(event);
        if legacy && let Value::Object(map) = &mut value {
            // The new run's `seq`s are shifted by the left-out events; the position compares.
            map.remove("seq");
            if let Some(Value::Object(inner)) = map.get_mut("event") {
                inner.remove("error");
            }
        }
        value
    };
    let len = original.len().max(new.len());
    (0..len).find_map(|i| {
        let expected = original.get(i).map(view);
        let found = new.get(i).map(|e| view(e));
        (expected != found).then(|| Divergence {
            seq: i as u64 + 1,
            expected,
            found,
        })
    })
}

fn is_prompt(event: &Event) -> bool {
    matches!(event.payload, EventPayload::PromptAssembled { .. })
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

#[cfg(test)]
mod tests {
    use keel_types::{EventId, PromptSection, RequestId};
    use serde_json::json;

    use super::*;

    fn event(seq: u64, payload: EventPayload) -> Event {
        Event {
            id: EventId::generate(),
            seq,
            ts: String::new(),
            request_id: RequestId::from("run_1"),
            session_id: None,
            agent_id: "a".into(),
            payload,
        }
    }

    fn prompt() -> EventPayload {
        EventPayload::PromptAssembled {
            step: 1,
            sections: vec![PromptSection {
                name: "input".into(),
                messages: 1,
                bytes: 10,
                sha256: "ab".into(),
            }],
        }
    }

    fn result(error: Option<&str>) -> EventPayload {
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: "c".into(),
                tool: "t".into(),
                ok: false,
                output: "{}".into(),
                error: error.map(str::to_owned),
                duration_ms: 1,
            },
        }
    }

    #[test]
    fn an_older_log_is_compared_without_what_it_could_not_record() {
        // Written before `runtime.prompt.assembled` and `error` existed.
        let old: Event = serde_json::from_value(json!({
            "id": "evt_1", "seq": 1, "ts": "", "requestId": "run_1", "agentId": "a",
            "type": "runtime.adapter.event",
            "event": {"phase": "agent.tool.result", "callId": "c", "tool": "t", "ok": false,
                      "output": "{}", "durationMs": 1}
        }))
        .unwrap();
        let new = [event(1, prompt()), event(2, result(Some("boom")))];
        assert_eq!(diverge(&[old], &new), None);
    }

    #[test]
    fn a_current_log_compares_every_event_and_field() {
        let original = [event(1, prompt()), event(2, result(Some("boom")))];
        let new = [event(1, prompt()), event(2, result(Some("other")))];
        let divergence = diverge(&original, &new).unwrap();
        assert_eq!(divergence.seq, 2);
        assert_eq!(diverge(&original, &original), None);
        let missing_prompt = diverge(&original, &new[1..]).unwrap();
        assert_eq!(missing_prompt.seq, 1);
    }
}
