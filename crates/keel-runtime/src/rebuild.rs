//! Rebuilding a run's conversation from its event log, for `resume` (continue an interrupted
//! run) and `fork` (continue a copy of a run's first events).
//!
//! The log holds everything the loop needs: the input, each model answer in full
//! (`runtime.model.completed`), each tool result (`agent.tool.result`) or blocked call
//! (`runtime.tool.guard`). A model round with no `completed` event was cut off and is simply
//! asked again. Tool calls of the last answer with no recorded result are returned as
//! pending, with whether they had started. The paths the run's file tools read or wrote
//! successfully are collected too, so a resumed run may change the files it had seen (read
//! before edit).

use std::collections::{HashMap, HashSet};

use keel_tools::gateway::blocked_message;
use keel_types::{AdapterEvent, Event, EventPayload, GuardDecision, Message, ToolCall, Usage};
use serde_json::Value;

/// The tools whose successful calls count as having seen the file at their `path`.
const FILE_TOOLS: [&str; 3] = ["read_file", "write_file", "edit_file"];

/// The state of a run as its log describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rebuilt {
    /// The request's input.
    pub input: String,
    /// The earlier conversation the request supplied (sent before the input).
    pub history: Vec<Message>,
    /// The run's permission mode as recorded (`plan`, `dontAsk`, …).
    pub mode: Option<keel_types::PermissionMode>,
    /// The request's metadata as recorded.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The model parameters the request set, as recorded.
    pub params: keel_types::ModelParams,
    /// The structured output the request asked for, as recorded.
    pub output_schema: Option<Value>,
    /// Assistant and tool messages after the input, in order.
    pub messages: Vec<Message>,
    /// Completed model rounds.
    pub steps: u32,
    pub usage: Usage,
    /// Tools that completed successfully at least once.
    pub succeeded: HashSet<String>,
    /// The `path` arguments, as they ran, of successful `read_file`, `write_file` and
    /// `edit_file` calls: the files the run has seen.
    pub seen_paths: Vec<String>,
    /// Calls of the last answer without a recorded result, in call order.
    pub pending: Vec<PendingCall>,
    /// A model round had started and has no answer: it will be asked again.
    pub cut_off_round: bool,
    /// The `seq` of the last event read.
    pub last_seq: u64,
    /// What the results compaction elided (and no summary replaced yet) said, by call.
    pub elided_texts: HashMap<String, String>,
}

/// A tool call with no recorded result.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub call: ToolCall,
    /// It passed the gateway and started: it may have had effects.
    pub started: bool,
}

/// Why a log cannot be continued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RebuildError {
    #[error("the run's log is empty")]
    Empty,
    #[error("the run's log does not start with runtime.request.started")]
    NoStart,
    #[error("the run already ended (event {0} is terminal)")]
    Ended(u64),
}

/// The supplied history and the mode recorded in a log's opening event (a mode this version
/// does not know already reads as none: see `EventPayload::RequestStarted`).
pub(crate) fn opening(
    events: &[Event],
) -> (
    Vec<Message>,
    Option<keel_types::PermissionMode>,
    std::collections::BTreeMap<String, String>,
) {
    match events.first().map(|e| &e.payload) {
        Some(EventPayload::RequestStarted {
            history,
            mode,
            metadata,
            ..
        }) => (history.clone(), *mode, metadata.clone()),
        _ => (Vec::new(), None, std::collections::BTreeMap::new()),
    }
}

/// The model parameters and the structured output a log's opening event recorded for the
/// request (none when it set none).
pub(crate) fn settings(events: &[Event]) -> (keel_types::ModelParams, Option<Value>) {
    match events.first().map(|e| &e.payload) {
        Some(EventPayload::RequestStarted {
            params,
            output_schema,
            ..
        }) => (params.clone(), output_schema.clone()),
        _ => Default::default(),
    }
}

/// A recorded compaction: the calls elided, and the rounds a summary replaced.
type Compaction = (Vec<String>, Option<([u32; 2], String)>);

/// Reads the log and returns the conversation state at its end.
pub fn rebuild(events: &[Event]) -> Result<Rebuilt, RebuildError> {
    let first = events.first().ok_or(RebuildError::Empty)?;
    let EventPayload::RequestStarted {
        input,
        history,
        mode,
        metadata,
        params,
        output_schema,
        ..
    } = &first.payload
    else {
        return Err(RebuildError::NoStart);
    };
    let mut state = Rebuilt {
        input: input.clone(),
        history: history.clone(),
        mode: *mode,
        metadata: metadata.clone(),
        params: params.clone(),
        output_schema: output_schema.clone(),
        ..Rebuilt::default()
    };
    // Answers with their calls, and what became of each call.
    // Each answer, and the re-ask that followed it when it did not match `output.schema`.
    let mut answers: Vec<(Message, Option<String>)> = Vec::new();
    // Each call's result, and whether the call succeeded.
    let mut results: HashMap<String, (String, bool)> = HashMap::new();
    let mut started: HashSet<String> = HashSet::new();
    let mut file_paths: HashMap<String, String> = HashMap::new();
    // The compactions, in order.
    let mut compactions: Vec<Compaction> = Vec::new();
    let mut round_open = false;
    for event in events {
        state.last_seq = event.seq;
        match &event.payload {
            // An interruption (a shutdown) ends the run only until it is resumed.
            payload if payload.is_final() => return Err(RebuildError::Ended(event.seq)),
            EventPayload::ModelStarted { .. } => round_open = true,
            EventPayload::ModelRetry { .. } => round_open = false,
            EventPayload::ModelCompleted {
                step,
                usage,
                content,
                tool_calls,
                thinking,
                ..
            } => {
                round_open = false;
                state.steps = *step;
                state.usage.add(usage);
                answers.push((
                    Message::assistant(content.clone(), tool_calls.clone())
                        .with_thinking(thinking.clone()),
                    None,
                ));
            }
            EventPayload::ContextCompacted {
                elided,
                summarized,
                summary,
                summarizer_usage,
                ..
            } => {
                if let Some(usage) = summarizer_usage {
                    state.usage.add(usage);
                }
                let summarized = summarized.zip(summary.clone());
                compactions.push((elided.clone(), summarized));
            }
            EventPayload::OutputRejected { issues, .. } => {
                if let Some((_, reask)) = answers.last_mut() {
                    *reask = Some(crate::output::reask(issues));
                }
            }
            EventPayload::ToolGuard {
                call_id,
                tool,
                decision: GuardDecision::Blocked,
                issues,
                ..
            } => {
                results.insert(call_id.clone(), (blocked_message(tool, issues), false));
            }
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolStart {
                        call_id,
                        tool,
                        arguments,
                        ..
                    },
            } => {
                started.insert(call_id.clone());
                if let Some(path) = arguments.get("path").and_then(Value::as_str)
                    && FILE_TOOLS.contains(&tool.as_str())
                {
                    file_paths.insert(call_id.clone(), path.to_owned());
                }
            }
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        call_id,
                        tool,
                        ok,
                        output,
                        ..
                    },
            } => {
                if *ok {
                    state.succeeded.insert(tool.clone());
                    state.seen_paths.extend(file_paths.remove(call_id));
                }
                results.insert(call_id.clone(), (output.clone(), *ok));
            }
            _ => {}
        }
    }
    state.cut_off_round = round_open;
    let last = answers.len().saturating_sub(1);
    for (index, (answer, reask)) in answers.into_iter().enumerate() {
        let calls = answer.tool_calls.clone();
        state.messages.push(answer);
        if let Some(reask) = reask {
            state.messages.push(Message::user(reask));
        }
        for call in calls {
            match results.remove(&call.id) {
                Some((output, true)) => state.messages.push(Message::tool_result(&call.id, output)),
                Some((output, false)) => state.messages.push(Message::tool_error(&call.id, output)),
                // Only the last answer can have calls without results: the loop asks the
                // model again only after every call of an answer has its result.
                None if index == last => state.pending.push(PendingCall {
                    started: started.contains(&call.id),
                    call,
                }),
                None => state.messages.push(Message::tool_error(
                    &call.id,
                    r#"{"error":"no result was recorded for this call"}"#,
                )),
            }
        }
    }
    // The prompt as the run left it: each compaction again, from its record.
    for (elided, summarized) in compactions {
        let texts = crate::context::apply_elided(&mut state.messages, &elided);
        state.elided_texts.extend(texts);
        if let Some((range, summary)) = summarized {
            crate::context::apply_summary(&mut state.messages, range, &summary);
        }
    }
    let present: HashSet<&str> = state
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    state
        .elided_texts
        .retain(|id, _| present.contains(id.as_str()));
    Ok(state)
}

#[cfg(test)]
mod tests {
    use keel_types::{EventId, ModelStopReason, RequestId, Role};
    use serde_json::json;

    use super::*;

    fn events(payloads: Vec<EventPayload>) -> Vec<Event> {
        payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| Event {
                id: EventId::generate(),
                seq: i as u64 + 1,
                ts: "t".into(),
                request_id: RequestId::from("run_1"),
                session_id: None,
                agent_id: "a".into(),
                payload,
            })
            .collect()
    }

    fn opening(input: &str) -> EventPayload {
        EventPayload::RequestStarted {
            input: input.into(),
            history: Vec::new(),
            mode: None,
            metadata: Default::default(),
            params: Default::default(),
            output_schema: None,
            session_owner_overridden: None,
        }
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn completed(step: u32, calls: Vec<ToolCall>) -> EventPayload {
        EventPayload::ModelCompleted {
            step,
            stop_reason: ModelStopReason::ToolCalls,
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
                total_tokens: 2,
                ..Usage::default()
            },
            latency_ms: 1,
            content: String::new(),
            tool_calls: calls,
            thinking: Vec::new(),
        }
    }

    fn started(step: u32) -> EventPayload {
        EventPayload::ModelStarted {
            step,
            attempt: 1,
            model: "m".into(),
            provider: "p".into(),
            params: Default::default(),
        }
    }

    fn tool_start(id: &str) -> EventPayload {
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                adapter: "native".into(),
                call_id: id.into(),
                tool: "t".into(),
                arguments: json!({}),
            },
        }
    }

    fn tool_result(id: &str, ok: bool) -> EventPayload {
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: id.into(),
                tool: "t".into(),
                ok,
                output: format!("out {id}"),
                error: (!ok).then(|| format!("out {id}")),
                duration_ms: 1,
            },
        }
    }

    fn file_call(id: &str, tool: &str, path: &str) -> EventPayload {
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                adapter: "native".into(),
                call_id: id.into(),
                tool: tool.into(),
                arguments: json!({ "path": path }),
            },
        }
    }

    #[test]
    fn files_the_run_read_or_wrote_successfully_are_remembered() {
        let log = events(vec![
            opening("edit"),
            started(1),
            completed(
                1,
                vec![
                    call("c1", "read_file"),
                    call("c2", "read_file"),
                    call("c3", "grep"),
                    call("c4", "write_file"),
                ],
            ),
            file_call("c1", "read_file", "a.txt"),
            tool_result("c1", true),
            file_call("c2", "read_file", "missing.txt"),
            tool_result("c2", false),
            file_call("c3", "grep", "b.txt"),
            tool_result("c3", true),
            file_call("c4", "write_file", "new.txt"),
            tool_result("c4", true),
        ]);
        let state = rebuild(&log).unwrap();
        assert_eq!(state.seen_paths, vec!["a.txt", "new.txt"]);
    }

    #[test]
    fn a_cut_off_round_after_complete_tool_results_is_asked_again() {
        let log = events(vec![
            opening("hi"),
            started(1),
            completed(1, vec![call("a", "t")]),
            tool_start("a"),
            tool_result("a", true),
            started(2),
        ]);
        let state = rebuild(&log).unwrap();
        assert!(state.cut_off_round);
        assert!(state.pending.is_empty());
        assert_eq!(state.steps, 1);
        assert_eq!(state.usage.total_tokens, 2);
        let roles: Vec<Role> = state.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::Assistant, Role::Tool]);
        assert!(state.succeeded.contains("t"));
        assert_eq!(state.last_seq, 6);
    }

    #[test]
    fn calls_without_results_are_pending_with_whether_they_started() {
        let log = events(vec![
            opening("hi"),
            started(1),
            completed(1, vec![call("a", "t"), call("b", "t"), call("c", "t")]),
            tool_start("a"),
            tool_start("b"),
            tool_result("a", false),
        ]);
        let state = rebuild(&log).unwrap();
        assert!(!state.cut_off_round);
        assert_eq!(state.messages.len(), 2, "the answer and a's result");
        let pending: Vec<(&str, bool)> = state
            .pending
            .iter()
            .map(|p| (p.call.id.as_str(), p.started))
            .collect();
        assert_eq!(pending, vec![("b", true), ("c", false)]);
        assert!(!state.succeeded.contains("t"), "a failed");
    }

    #[test]
    fn an_ended_run_cannot_be_continued() {
        let log = events(vec![
            opening("hi"),
            EventPayload::RequestCancelled {
                reason: "x".into(),
                usage: Usage::default(),
                steps: 0,
                duration_ms: 0,
            },
        ]);
        assert_eq!(rebuild(&log), Err(RebuildError::Ended(2)));
        assert_eq!(rebuild(&[]), Err(RebuildError::Empty));
    }

    #[test]
    fn an_interrupted_run_continues_with_its_recorded_history_and_mode() {
        let history = vec![Message::user("earlier"), Message::assistant("yes", vec![])];
        let log = events(vec![
            EventPayload::RequestStarted {
                input: "hi".into(),
                history: history.clone(),
                mode: Some(keel_types::PermissionMode::Plan),
                metadata: Default::default(),
                params: keel_types::ModelParams {
                    seed: Some(3),
                    ..Default::default()
                },
                output_schema: Some(serde_json::json!({"type": "object"})),
                session_owner_overridden: None,
            },
            started(1),
            EventPayload::RequestInterrupted {
                reason: "shutdown".into(),
                usage: Usage::default(),
                steps: 0,
                duration_ms: 1,
            },
        ]);
        let state = rebuild(&log).unwrap();
        assert_eq!(state.history, history);
        assert_eq!(state.mode, Some(keel_types::PermissionMode::Plan));
        assert_eq!(state.params.seed, Some(3));
        assert_eq!(
            state.output_schema,
            Some(serde_json::json!({"type": "object"}))
        );
        assert!(
            state.cut_off_round,
            "the round the shutdown cut is asked again"
        );
        assert_eq!(state.last_seq, 3);
    }
}
