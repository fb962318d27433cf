//! Replay: re-executing a run with the model's answers taken from its log, and finding where
//! the new run's events diverge from the original's.
//!
//! [`replay_provider`] serves, attempt by attempt, exactly what the model did in the recorded
//! run (its log read as a cassette: `keel_models::cassette`): the same text deltas, thinking,
//! tool calls and usage, and the same failures (with the same wait before the retry). Tools
//! run for real, so a changed workspace shows up as a divergence. [`diverge`] compares two
//! logs ignoring ids, times and durations.

use keel_types::cassette::{Cassette, CassetteMatch, CassetteProvider};
use keel_types::{Event, EventPayload};
use serde::Serialize;
use serde_json::Value;

/// A model provider answering, attempt by attempt, exactly what the model did in a recorded
/// run: its log read as a cassette, answered in order.
pub fn replay_provider(events: &[Event]) -> CassetteProvider {
    CassetteProvider::new(Cassette::from_events(events), CassetteMatch::Order)
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
    // Recorded before the tool definitions were measured as a prompt section, or before
    // sections had estimated sizes.
    let untooled = !original
        .iter()
        .any(|e| sections_have(e, |s| s.name == "tools"));
    let unsized_ = !original.iter().any(|e| sections_have(e, |s| s.tokens > 0));
    let new: Vec<&Event> = new.iter().filter(|e| !(legacy && is_prompt(e))).collect();
    let view = |event: &Event| {
        let mut value = comparable(event);
        if is_prompt(event)
            && let Some(Value::Array(sections)) = value.get_mut("sections")
        {
            if untooled {
                sections.retain(|s| s["name"] != "tools");
            }
            if unsized_ {
                for section in sections.iter_mut().filter_map(Value::as_object_mut) {
                    section.remove("tokens");
                }
            }
        }
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

/// Whether `event` records a prompt with a section that `holds`.
fn sections_have(event: &Event, holds: impl Fn(&keel_types::PromptSection) -> bool) -> bool {
    match &event.payload {
        EventPayload::PromptAssembled { sections, .. } => sections.iter().any(holds),
        _ => false,
    }
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
    use keel_types::{AdapterEvent, EventId, PromptSection, RequestId};
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
                tokens: 0,
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
