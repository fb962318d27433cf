//! From a Keel run's events to AG-UI events. One [`Translator`] per AG-UI run (a stream): it
//! opens and closes text messages, tool calls and steps so the client's checks hold (every
//! start has its end before `RUN_FINISHED`, nothing after the run's last event), and says
//! when the stream ends: at the run's end, or at a human approval, which ends the AG-UI run
//! with an interrupt while the Keel run waits.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use keel::{Event, EventPayload, RunResponse, RuntimeError};
use keel_types::event::AdapterEvent;
use keel_types::{ApprovalRecord, Usage};
use serde_json::{Map, Value, json};

use crate::ApiError;
use crate::openai::stream::{Dialect, Sink};

/// An AG-UI event as one SSE frame (`data:` only, as the protocol frames them).
pub(super) fn frame(event: &Value) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("data: {data}\n\n"))
}

/// Milliseconds since the Unix epoch, the events' `timestamp`.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An AG-UI event of `kind` with `fields` and a timestamp.
pub(super) fn agui_event(kind: &str, fields: Value) -> Value {
    let mut event = Map::new();
    event.insert("type".into(), Value::String(kind.to_owned()));
    event.insert("timestamp".into(), json!(now_ms()));
    if let Value::Object(fields) = fields {
        event.extend(fields);
    }
    Value::Object(event)
}

/// Who the stream is for: the ids its `RUN_*` events carry and how answers are sent.
#[derive(Debug, Clone)]
pub(super) struct StreamIds {
    pub thread_id: String,
    pub run_id: String,
    /// The Keel run (message ids are made from it and an event's `seq`).
    pub request_id: String,
    /// The answer is sent whole at the end (a workflow's result, a structured output).
    pub whole_answer: bool,
}

/// The frames of an AG-UI stream, written by [`Translator`] and through the outbox of
/// `openai::stream` (text of one message merges while the client is behind).
pub(super) struct AguiDialect {
    pub ids: StreamIds,
}

impl AguiDialect {
    fn message_id(&self, key: u64) -> String {
        message_id(&self.ids.request_id, key)
    }
}

fn message_id(request_id: &str, key: u64) -> String {
    format!("{request_id}-{key}")
}

impl Dialect for AguiDialect {
    fn opening(&self) -> Vec<Bytes> {
        vec![frame(&agui_event(
            "RUN_STARTED",
            json!({"threadId": self.ids.thread_id, "runId": self.ids.run_id}),
        ))]
    }

    fn text(&self, message: u64, text: String) -> Bytes {
        frame(&agui_event(
            "TEXT_MESSAGE_CONTENT",
            json!({"messageId": self.message_id(message), "delta": text}),
        ))
    }

    /// Only when the run ended without a final event the translator saw (it ended abnormally).
    fn closing(&self, response: Result<RunResponse, RuntimeError>) -> Vec<Bytes> {
        let message = match response {
            Ok(response) => response.error.map_or_else(
                || format!("the run ended `{}`", json!(response.status)),
                |error| error.message,
            ),
            Err(error) => format!("the run ended abnormally: {error}"),
        };
        vec![frame(&agui_event(
            "RUN_ERROR",
            json!({"message": message, "code": "run_failed"}),
        ))]
    }

    fn cut_off(&self, error: ApiError) -> Bytes {
        frame(&agui_event(
            "RUN_ERROR",
            json!({"message": error.body()["error"]["message"], "code": "client_too_slow"}),
        ))
    }
}

/// What the stream does after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    /// Go on reading the run's events.
    Go,
    /// The stream has ended (its last frames are pushed and the sink closed): the run ended,
    /// or it waits on a human (an interrupt) and goes on without this stream.
    Ended,
}

/// The translation state of one AG-UI run.
pub(super) struct Translator {
    ids: StreamIds,
    /// The text message open now: the `seq` of its first delta (its key and id).
    message: Option<u64>,
    /// The last text message of the model round now, which its tool calls belong to.
    round_message: Option<u64>,
    /// Steps started and not finished, by name.
    steps: BTreeSet<String>,
    /// Tool calls announced (start, args, end sent), so a result has its call.
    calls: BTreeSet<String>,
    /// Calls whose result was sent.
    answered: BTreeSet<String>,
    /// The call each approval asked about, so a denial gives its call a result.
    approvals: BTreeMap<String, String>,
    /// A workflow's nodes and their states, for `STATE_SNAPSHOT`.
    nodes: BTreeMap<String, Value>,
    workflow: Option<String>,
}

impl Translator {
    pub(super) fn new(ids: StreamIds) -> Self {
        Self {
            ids,
            message: None,
            round_message: None,
            steps: BTreeSet::new(),
            calls: BTreeSet::new(),
            answered: BTreeSet::new(),
            approvals: BTreeMap::new(),
            nodes: BTreeMap::new(),
            workflow: None,
        }
    }

    /// Tool calls an earlier AG-UI run of the same Keel run announced (a resumed stream sends
    /// their results).
    pub(super) fn announced(&mut self, earlier: &[Event]) {
        for event in earlier {
            match &event.payload {
                EventPayload::ModelCompleted { tool_calls, .. } => {
                    self.calls
                        .extend(tool_calls.iter().map(|call| call.id.clone()));
                }
                EventPayload::Adapter {
                    event: AdapterEvent::ToolStart { call_id, .. },
                } => {
                    self.calls.insert(call_id.clone());
                }
                EventPayload::Adapter {
                    event: AdapterEvent::ToolResult { call_id, .. },
                } => {
                    self.answered.insert(call_id.clone());
                }
                EventPayload::ApprovalRequested { approval } => self.asked(approval),
                _ => {}
            }
        }
    }

    fn asked(&mut self, approval: &ApprovalRecord) {
        if let Some(call) = &approval.call_id {
            self.approvals
                .insert(approval.approval_id.clone(), call.clone());
        }
    }

    /// The result of call `call_id`, once: what the model received.
    fn result(&mut self, sink: &Sink, seq: u64, call_id: &str, content: &str) {
        if self.calls.contains(call_id) && self.answered.insert(call_id.to_owned()) {
            sink.frame(frame(&agui_event(
                "TOOL_CALL_RESULT",
                json!({
                    "messageId": message_id(&self.ids.request_id, seq),
                    "toolCallId": call_id,
                    "content": content,
                    "role": "tool",
                }),
            )));
        }
    }

    /// Translates `event` into frames on `sink`. `pending` says whether an approval the run
    /// asked for still waits for its decision (a resumed stream reads approvals that were
    /// decided since).
    pub(super) fn on_event(
        &mut self,
        event: &Event,
        sink: &Sink,
        pending: impl Fn(&ApprovalRecord) -> bool,
    ) -> Flow {
        match &event.payload {
            EventPayload::ModelStarted { step, .. } => {
                self.start_step(sink, format!("model round {step}"));
            }
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { text, .. },
            } if !text.is_empty() && !self.ids.whole_answer => {
                let key = *self.message.get_or_insert_with(|| {
                    sink.frame(frame(&agui_event(
                        "TEXT_MESSAGE_START",
                        json!({"messageId": message_id(&self.ids.request_id, event.seq), "role": "assistant"}),
                    )));
                    event.seq
                });
                self.round_message = Some(key);
                sink.text(key, text.clone());
            }
            EventPayload::ModelCompleted {
                step, tool_calls, ..
            } => {
                self.end_message(sink);
                let parent = self.round_message.take();
                for call in tool_calls {
                    self.announce(sink, &call.id, &call.name, &call.arguments, parent);
                }
                self.end_step(sink, &format!("model round {step}"));
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
                // A call the model did not announce (an adapter's program ran it).
                let arguments = arguments.to_string();
                self.end_message(sink);
                self.announce(sink, call_id, tool, &arguments, None);
            }
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        call_id, output, ..
                    },
            } => {
                self.end_message(sink);
                self.result(sink, event.seq, call_id, output);
            }
            // Refused calls: their result is the refusal the model was given.
            EventPayload::PolicyDecided {
                call_id,
                decision: keel_types::PolicyDecision::Deny,
                source,
                reason,
                ..
            } => {
                let what = keel_types::governance::denied_by_policy(source);
                let text = keel_types::governance::refusal_text(&what, reason.as_deref());
                self.result(sink, event.seq, call_id, &text);
            }
            EventPayload::ApprovalResolved {
                approval_id,
                status,
                reason,
                ..
            } if *status != keel_types::ApprovalStatus::Approved => {
                if let Some(call) = self.approvals.get(approval_id).cloned() {
                    let text = keel_types::governance::refusal_text(
                        keel_types::governance::DENIED_BY_HUMAN,
                        reason.as_deref(),
                    );
                    self.result(sink, event.seq, &call, &text);
                }
            }
            EventPayload::ApprovalRequested { approval } => {
                self.asked(approval);
                if pending(approval) {
                    return self.interrupt(sink, approval);
                }
            }
            EventPayload::WorkflowStarted(started) => {
                self.workflow = Some(started.workflow.clone());
                self.snapshot(sink, "running", None);
            }
            EventPayload::NodeStarted(node) => {
                self.start_step(sink, node.node.clone());
                self.node(sink, &node.node, "running");
            }
            EventPayload::NodeCompleted(node) => {
                self.end_step(sink, &node.node);
                self.node(sink, &node.node, "completed");
            }
            EventPayload::NodeFailed(node) => {
                if !node.will_retry {
                    self.end_step(sink, &node.node);
                }
                let state = if node.will_retry {
                    "retrying"
                } else {
                    "failed"
                };
                self.node(sink, &node.node, state);
            }
            EventPayload::NodeSkipped(node) => self.node(sink, &node.node, "skipped"),
            EventPayload::RequestCompleted {
                output,
                value,
                usage,
                ..
            } => {
                self.close_open(sink);
                if self.workflow.is_some() {
                    self.snapshot(sink, "completed", value.clone());
                }
                if self.ids.whole_answer && !output.is_empty() {
                    self.whole_message(sink, event.seq, output);
                }
                let mut finished = json!({
                    "threadId": self.ids.thread_id,
                    "runId": self.ids.run_id,
                    "outcome": {"type": "success"},
                    "usage": [token_usage(usage)],
                });
                finished["result"] = value.clone().unwrap_or_else(|| json!(output));
                sink.close(vec![frame(&agui_event("RUN_FINISHED", finished))]);
                return Flow::Ended;
            }
            EventPayload::RequestCancelled { .. } => {
                self.close_open(sink);
                sink.close(vec![frame(&agui_event(
                    "RUN_FINISHED",
                    json!({
                        "threadId": self.ids.thread_id,
                        "runId": self.ids.run_id,
                        "outcome": {"type": "cancelled"},
                    }),
                ))]);
                return Flow::Ended;
            }
            EventPayload::RequestFailed { error, usage, .. } => {
                if self.workflow.is_some() {
                    self.snapshot(sink, "failed", None);
                }
                sink.close(vec![frame(&agui_event(
                    "RUN_ERROR",
                    json!({
                        "message": error.message,
                        "code": error.code,
                        "usage": [token_usage(usage)],
                    }),
                ))]);
                return Flow::Ended;
            }
            EventPayload::RequestInterrupted { reason, .. } => {
                sink.close(vec![frame(&agui_event(
                    "RUN_ERROR",
                    json!({
                        "message": format!(
                            "the run stopped ({reason}); it is resumable as request `{}`",
                            self.ids.request_id
                        ),
                        "code": "interrupted",
                    }),
                ))]);
                return Flow::Ended;
            }
            _ => {}
        }
        Flow::Go
    }

    /// Ends the AG-UI run with an interrupt for `approval`: the run waits for its decision,
    /// which comes back in the next run's `resume` (or from any other surface).
    fn interrupt(&mut self, sink: &Sink, approval: &ApprovalRecord) -> Flow {
        self.close_open(sink);
        let mut interrupt = json!({
            "id": approval.approval_id,
            "reason": "approval",
            "message": match &approval.ask_reason {
                Some(reason) => format!("{} asks to approve `{}`: {reason}", approval.asked_by, approval.tool),
                None => format!("{} asks to approve `{}`", approval.asked_by, approval.tool),
            },
            "responseSchema": super::RESPONSE_SCHEMA.clone(),
            "metadata": {
                "tool": approval.tool,
                "arguments": approval.arguments,
                "askedBy": approval.asked_by,
                "requestId": approval.request_id,
                "agent": approval.agent,
            },
        });
        if let Some(call) = &approval.call_id {
            interrupt["toolCallId"] = json!(call);
        }
        sink.close(vec![frame(&agui_event(
            "RUN_FINISHED",
            json!({
                "threadId": self.ids.thread_id,
                "runId": self.ids.run_id,
                "outcome": {"type": "interrupt", "interrupts": [interrupt]},
            }),
        ))]);
        Flow::Ended
    }

    fn announce(
        &mut self,
        sink: &Sink,
        call_id: &str,
        name: &str,
        arguments: &str,
        parent: Option<u64>,
    ) {
        if !self.calls.insert(call_id.to_owned()) {
            return;
        }
        let mut start = json!({"toolCallId": call_id, "toolCallName": name});
        if let Some(parent) = parent {
            start["parentMessageId"] = json!(message_id(&self.ids.request_id, parent));
        }
        sink.frame(frame(&agui_event("TOOL_CALL_START", start)));
        if !arguments.is_empty() {
            sink.frame(frame(&agui_event(
                "TOOL_CALL_ARGS",
                json!({"toolCallId": call_id, "delta": arguments}),
            )));
        }
        sink.frame(frame(&agui_event(
            "TOOL_CALL_END",
            json!({"toolCallId": call_id}),
        )));
    }

    fn start_step(&mut self, sink: &Sink, name: String) {
        if self.steps.insert(name.clone()) {
            sink.frame(frame(&agui_event(
                "STEP_STARTED",
                json!({"stepName": name}),
            )));
        }
    }

    fn end_step(&mut self, sink: &Sink, name: &str) {
        if self.steps.remove(name) {
            sink.frame(frame(&agui_event(
                "STEP_FINISHED",
                json!({"stepName": name}),
            )));
        }
    }

    fn end_message(&mut self, sink: &Sink) {
        if let Some(key) = self.message.take() {
            sink.frame(frame(&agui_event(
                "TEXT_MESSAGE_END",
                json!({"messageId": message_id(&self.ids.request_id, key)}),
            )));
        }
    }

    /// Ends what is open: the text message, then the steps.
    fn close_open(&mut self, sink: &Sink) {
        self.end_message(sink);
        for name in std::mem::take(&mut self.steps) {
            sink.frame(frame(&agui_event(
                "STEP_FINISHED",
                json!({"stepName": name}),
            )));
        }
    }

    fn whole_message(&mut self, sink: &Sink, seq: u64, text: &str) {
        let id = message_id(&self.ids.request_id, seq);
        sink.frame(frame(&agui_event(
            "TEXT_MESSAGE_START",
            json!({"messageId": id, "role": "assistant"}),
        )));
        sink.frame(frame(&agui_event(
            "TEXT_MESSAGE_CONTENT",
            json!({"messageId": id, "delta": text}),
        )));
        sink.frame(frame(&agui_event(
            "TEXT_MESSAGE_END",
            json!({"messageId": id}),
        )));
    }

    fn node(&mut self, sink: &Sink, node: &str, state: &str) {
        self.nodes.insert(node.to_owned(), json!(state));
        self.snapshot(sink, "running", None);
    }

    /// The workflow's state as a whole: its status, each node's state, and its result once
    /// it has one.
    fn snapshot(&self, sink: &Sink, status: &str, result: Option<Value>) {
        let mut snapshot = json!({
            "workflow": self.workflow,
            "requestId": self.ids.request_id,
            "status": status,
            "nodes": self.nodes,
        });
        if let Some(result) = result {
            snapshot["result"] = result;
        }
        sink.frame(frame(&agui_event(
            "STATE_SNAPSHOT",
            json!({"snapshot": snapshot}),
        )));
    }
}

/// A run's usage as AG-UI's `TokenUsage`.
fn token_usage(usage: &Usage) -> Value {
    json!({
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "cachedInputTokens": usage.cache_read_tokens,
        "cacheWriteInputTokens": usage.cache_write_tokens,
    })
}
