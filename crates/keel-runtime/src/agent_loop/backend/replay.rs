//! Durable resume for a process-backed run: the program starts again from the beginning,
//! and what its log already holds is answered from the log, in order — model rounds with
//! their recorded answers (the model is not asked again), completed tool calls with their
//! recorded results (never executed twice) — until the log runs out; then the run goes on
//! live. A program that asks for something other than what the log holds next has diverged:
//! the run fails saying where, or (`onDivergence: continue`) goes on live from there.

use std::collections::VecDeque;

use keel_types::{AdapterEvent, Event, EventPayload, ModelStopReason, ToolCall, Usage};
use serde_json::Value;

/// One step of a program's earlier run, as its log holds it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Recorded {
    /// A model round: the hash of the conversation the program sent, and the answer.
    Round {
        step: u32,
        sent: Option<String>,
        text: String,
        calls: Vec<ToolCall>,
        stop: ModelStopReason,
        usage: Usage,
    },
    /// A tool call the program made, and its result when the log holds one.
    Call {
        call_id: String,
        tool: String,
        arguments: String,
        result: Option<(String, bool)>,
        started: bool,
    },
}

/// What the log holds, in the order the program asked for it.
pub(super) fn recorded(events: &[Event]) -> VecDeque<Recorded> {
    let mut steps: VecDeque<Recorded> = VecDeque::new();
    let mut sent: Option<(u32, String)> = None;
    for event in events {
        match &event.payload {
            EventPayload::PromptAssembled { step, sections } => {
                sent = sections
                    .iter()
                    .find(|s| s.name == "program")
                    .map(|s| (*step, s.sha256.clone()));
            }
            EventPayload::ModelCompleted {
                step,
                stop_reason,
                usage,
                content,
                tool_calls,
                ..
            } => steps.push_back(Recorded::Round {
                step: *step,
                sent: sent
                    .take()
                    .filter(|(at, _)| at == step)
                    .map(|(_, hash)| hash),
                text: content.clone(),
                calls: tool_calls.clone(),
                stop: *stop_reason,
                usage: *usage,
            }),
            EventPayload::ToolGuard {
                call_id,
                tool,
                arguments,
                ..
            } => steps.push_back(Recorded::Call {
                call_id: call_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                result: None,
                started: false,
            }),
            EventPayload::Adapter { event } => {
                let (id, outcome) = match event {
                    AdapterEvent::ToolStart { call_id, .. } => (call_id, None),
                    AdapterEvent::ToolResult {
                        call_id,
                        ok,
                        output,
                        ..
                    } => (call_id, Some((output.clone(), *ok))),
                    _ => continue,
                };
                let found = steps.iter_mut().rev().find_map(|step| match step {
                    Recorded::Call {
                        call_id,
                        result,
                        started,
                        ..
                    } if call_id == id => Some((result, started)),
                    _ => None,
                });
                if let Some((result, started)) = found {
                    *started = true;
                    if outcome.is_some() {
                        *result = outcome;
                    }
                }
            }
            _ => {}
        }
    }
    steps
}

/// Whether a tool call's arguments are the recorded ones (as JSON values when both parse).
pub(super) fn same_arguments(recorded: &str, asked: &Value) -> bool {
    match serde_json::from_str::<Value>(recorded) {
        Ok(value) => &value == asked,
        Err(_) => asked.as_str() == Some(recorded),
    }
}

/// A step as a person reads it in a divergence's message.
pub(super) fn describe(step: &Recorded) -> String {
    match step {
        Recorded::Round { step, .. } => format!("model round {step}"),
        Recorded::Call {
            tool, arguments, ..
        } => format!("a call of {tool} with {arguments}"),
    }
}
