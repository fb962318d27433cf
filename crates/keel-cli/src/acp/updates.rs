//! A run's events as ACP `session/update`s, and a stored session replayed as the same.
//!
//! [`Translator`] follows one run: answer text becomes `agent_message_chunk`; a call the
//! gateway accepted becomes a `tool_call` (`pending`), its start a `tool_call_update`
//! `in_progress`, its result `completed` or `failed` with the output as content; a call the
//! gateway blocked, policy denied or a person refused ends `failed` saying why; a calls that
//! never ran for another reason (a hook said no, the run was cancelled) ends `failed` when the
//! next model round starts or the run ends, so the editor never keeps a spinner. A
//! process-backed agent's `{"type": "plan", …}` line becomes a `plan`.
//!
//! Tool call ids are the run's id and the model's call id (`run_…/call_1`): models reuse
//! call ids from turn to turn, and ACP wants them unique within a session.

use std::collections::HashMap;
use std::path::Path;

use keel::{
    AdapterEvent, ApprovalStatus, Event, EventPayload, GuardDecision, PolicyDecision, RequestId,
    Role, SessionMessage,
};
use serde_json::Value;

use super::rpc::Peer;
use super::wire::{
    PlanEntry, SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolKind,
};

/// Sends `update` as a `session/update` of `session`.
pub(super) fn send(peer: &Peer, session: &str, update: &SessionUpdate) {
    peer.notify(
        "session/update",
        serde_json::json!({ "sessionId": session, "update": update }),
    );
}

/// The ACP id of call `call_id` of run `request`.
pub(super) fn tool_call_id(request: &RequestId, call_id: &str) -> String {
    format!("{request}/{call_id}")
}

/// What kind of tool `tool` is, for the editor's icon.
pub(super) fn tool_kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_dir" | "read_skill_resource" | "load_skill" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "glob" | "grep" | "memory_search" => ToolKind::Search,
        "shell" | "run_skill_script" => ToolKind::Execute,
        "http_fetch" => ToolKind::Fetch,
        "task" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// A one-line title: the tool and what it works on (a path, a command, a URL, a pattern).
pub(super) fn tool_title(tool: &str, arguments: &Value) -> String {
    let subject = ["path", "command", "url", "pattern", "agent"]
        .iter()
        .find_map(|key| arguments.get(*key))
        .map(|value| match value {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        });
    match subject {
        Some(subject) => {
            let line = subject.lines().next().unwrap_or_default();
            let short: String = line.chars().take(120).collect();
            format!("{tool} {short}")
        }
        None => tool.to_owned(),
    }
}

/// The files a call works on: its `path` argument, made absolute against the workspace.
fn locations(root: &Path, arguments: &Value) -> Vec<ToolCallLocation> {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .map(|path| ToolCallLocation {
            path: root.join(path).display().to_string(),
        })
        .into_iter()
        .collect()
}

/// Where one call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    Announced,
    Running,
    Finished,
}

/// Turns one run's events into session updates.
pub(super) struct Translator<'a> {
    root: &'a Path,
    calls: HashMap<String, CallState>,
    /// Announced calls in order, for closing those that never ran.
    order: Vec<String>,
    /// Which call each approval is about.
    approvals: HashMap<String, String>,
}

impl<'a> Translator<'a> {
    /// A translator for a run of the workspace at `root` (paths are shown absolute).
    pub(super) fn new(root: &'a Path) -> Self {
        Self {
            root,
            calls: HashMap::new(),
            order: Vec::new(),
            approvals: HashMap::new(),
        }
    }

    /// The updates an event makes (often none).
    pub(super) fn event(&mut self, event: &Event) -> Vec<SessionUpdate> {
        let run = &event.request_id;
        match &event.payload {
            EventPayload::Adapter { event: adapter } => self.adapter(run, adapter),
            EventPayload::ToolGuard {
                call_id,
                tool,
                decision,
                arguments,
                issues,
                resolved_tool,
                repaired_arguments,
                ..
            } => {
                let id = tool_call_id(run, call_id);
                if *decision == GuardDecision::Blocked {
                    let why = issues
                        .iter()
                        .map(|issue| issue.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ");
                    let mut updates = self.announce(id.clone(), tool, &Value::Null);
                    updates.extend(self.finish(
                        &id,
                        false,
                        format!("blocked by the gateway: {why}"),
                    ));
                    return updates;
                }
                let tool = resolved_tool.as_deref().unwrap_or(tool);
                let arguments = repaired_arguments.clone().unwrap_or_else(|| {
                    serde_json::from_str(arguments).unwrap_or(Value::String(arguments.clone()))
                });
                match self.calls.contains_key(&id) {
                    // A hook's rewrite, checked again.
                    true => vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                        tool_call_id: id,
                        title: Some(tool_title(tool, &arguments)),
                        locations: Some(locations(self.root, &arguments)),
                        raw_input: Some(arguments),
                        ..Default::default()
                    })],
                    false => self.announce(id, tool, &arguments),
                }
            }
            EventPayload::PolicyDecided {
                call_id,
                decision: PolicyDecision::Deny,
                source,
                reason,
                ..
            } => {
                let why = match reason {
                    Some(reason) => format!("denied by {source}: {reason}"),
                    None => format!("denied by {source}"),
                };
                self.finish(&tool_call_id(run, call_id), false, why)
            }
            EventPayload::ApprovalRequested { approval } => {
                if let Some(call_id) = &approval.call_id {
                    self.approvals.insert(
                        approval.approval_id.clone(),
                        tool_call_id(&approval.request_id, call_id),
                    );
                }
                Vec::new()
            }
            EventPayload::ApprovalResolved {
                approval_id,
                status,
                decided_by,
                reason,
            } if *status != ApprovalStatus::Approved => {
                let Some(id) = self.approvals.get(approval_id).cloned() else {
                    return Vec::new();
                };
                let mut why = match status {
                    ApprovalStatus::Expired => "nobody decided in time".to_owned(),
                    _ => format!(
                        "denied by {}",
                        decided_by.as_deref().unwrap_or("the reviewer")
                    ),
                };
                if let Some(reason) = reason {
                    why = format!("{why}: {reason}");
                }
                self.finish(&id, false, why)
            }
            // A new round: every call of the last one has run or never will.
            EventPayload::ModelStarted { .. } => self.close_unfinished(),
            _ => Vec::new(),
        }
    }

    /// The updates of an approval event of one of the run's child runs (a subagent's): the
    /// call it asks about is announced, naming the subagent; once approved it is the
    /// subagent's to run (its progress is not followed), so it ends `completed`.
    pub(super) fn child(&mut self, event: &Event) -> Vec<SessionUpdate> {
        match &event.payload {
            EventPayload::ApprovalRequested { approval } => {
                let call = approval.call_id.as_deref().unwrap_or(&approval.approval_id);
                let id = tool_call_id(&approval.request_id, call);
                let mut updates = self.announce(id, &approval.tool, &approval.arguments);
                if let Some(SessionUpdate::ToolCall(announced)) = updates.first_mut() {
                    announced.title = format!("{} (subagent {})", announced.title, approval.agent);
                }
                self.event(event);
                updates
            }
            EventPayload::ApprovalResolved {
                approval_id,
                status: ApprovalStatus::Approved,
                ..
            } => match self.approvals.get(approval_id).cloned() {
                Some(id) => self.finish(&id, true, "approved: the subagent runs it".to_owned()),
                None => Vec::new(),
            },
            _ => self.event(event),
        }
    }

    /// The updates of the run's end: calls that never ran are closed.
    pub(super) fn end(&mut self) -> Vec<SessionUpdate> {
        self.close_unfinished()
    }

    fn adapter(&mut self, run: &RequestId, event: &AdapterEvent) -> Vec<SessionUpdate> {
        match event {
            AdapterEvent::OutputDelta { text, .. } if !text.is_empty() => {
                vec![SessionUpdate::agent_text(text.clone())]
            }
            AdapterEvent::ToolStart {
                call_id,
                tool,
                arguments,
                ..
            } => {
                let id = tool_call_id(run, call_id);
                let mut updates = match self.calls.contains_key(&id) {
                    true => Vec::new(),
                    false => self.announce(id.clone(), tool, arguments),
                };
                self.calls.insert(id.clone(), CallState::Running);
                updates.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: id,
                    status: Some(ToolCallStatus::InProgress),
                    ..Default::default()
                }));
                updates
            }
            AdapterEvent::ToolResult {
                call_id,
                ok,
                output,
                ..
            } => self.finish(&tool_call_id(run, call_id), *ok, output.clone()),
            AdapterEvent::Progress { kind, data, .. } if kind == "plan" => plan(data)
                .map(|entries| vec![SessionUpdate::Plan { entries }])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn announce(&mut self, id: String, tool: &str, arguments: &Value) -> Vec<SessionUpdate> {
        self.calls.insert(id.clone(), CallState::Announced);
        self.order.push(id.clone());
        vec![SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id,
            title: tool_title(tool, arguments),
            kind: tool_kind(tool),
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: locations(self.root, arguments),
            raw_input: (!arguments.is_null()).then(|| arguments.clone()),
        })]
    }

    /// Ends call `id` (once): `completed` or `failed`, with `text` as its content.
    fn finish(&mut self, id: &str, ok: bool, text: String) -> Vec<SessionUpdate> {
        match self.calls.get_mut(id) {
            Some(state) if *state != CallState::Finished => *state = CallState::Finished,
            _ => return Vec::new(),
        }
        vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.to_owned(),
            status: Some(match ok {
                true => ToolCallStatus::Completed,
                false => ToolCallStatus::Failed,
            }),
            content: Some(vec![ToolCallContent::text(text)]),
            ..Default::default()
        })]
    }

    fn close_unfinished(&mut self) -> Vec<SessionUpdate> {
        let open: Vec<String> = self
            .order
            .drain(..)
            .filter(|id| self.calls.get(id) != Some(&CallState::Finished))
            .collect();
        open.iter()
            .flat_map(|id| {
                let why = match self.calls.get(id) {
                    Some(CallState::Running) => "stopped before it finished",
                    _ => "not run",
                };
                self.finish(id, false, why.to_owned())
            })
            .collect()
    }
}

/// A plan line's entries: `entries` (or `steps`, `items`, `plan`), each a string or an object
/// with `content` (or `title`, `text`, `step`) and optionally `status` and `priority`.
fn plan(data: &Value) -> Option<Vec<PlanEntry>> {
    let items = ["entries", "steps", "items", "plan"]
        .iter()
        .find_map(|key| data.get(*key)?.as_array())?;
    let entries = items
        .iter()
        .filter_map(|item| {
            let content = match item {
                Value::String(text) => text.clone(),
                _ => ["content", "title", "text", "step"]
                    .iter()
                    .find_map(|key| item.get(*key)?.as_str())?
                    .to_owned(),
            };
            let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
            let status = match field("status") {
                "in_progress" | "running" | "active" | "doing" => "in_progress",
                "completed" | "done" | "finished" => "completed",
                _ => "pending",
            };
            let priority = match field("priority") {
                "high" => "high",
                "low" => "low",
                _ => "medium",
            };
            Some(PlanEntry {
                content,
                priority,
                status,
            })
        })
        .collect();
    Some(entries)
}

/// A stored session's transcript as the updates that show it again (`session/load`): each
/// user message, answer, tool call and tool result in order.
pub(super) fn replay(root: &Path, transcript: &[SessionMessage]) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for entry in transcript {
        let message = &entry.message;
        match message.role {
            Role::User if !message.content.is_empty() => {
                updates.push(SessionUpdate::user_text(message.content.clone()));
            }
            Role::Assistant => {
                if !message.content.is_empty() {
                    updates.push(SessionUpdate::agent_text(message.content.clone()));
                }
                for call in &message.tool_calls {
                    let arguments = serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                    updates.push(SessionUpdate::ToolCall(ToolCall {
                        tool_call_id: tool_call_id(&entry.request_id, &call.id),
                        title: tool_title(&call.name, &arguments),
                        kind: tool_kind(&call.name),
                        status: ToolCallStatus::Pending,
                        content: Vec::new(),
                        locations: locations(root, &arguments),
                        raw_input: Some(arguments),
                    }));
                }
            }
            Role::Tool => {
                let Some(call_id) = &message.tool_call_id else {
                    continue;
                };
                updates.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: tool_call_id(&entry.request_id, call_id),
                    status: Some(match message.is_error {
                        true => ToolCallStatus::Failed,
                        false => ToolCallStatus::Completed,
                    }),
                    content: Some(vec![ToolCallContent::text(message.content.clone())]),
                    ..Default::default()
                }));
            }
            _ => {}
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel::{ApprovalRecord, Message, RunRecord, ToolCall as ModelCall};
    use serde_json::json;

    fn event(run: &RequestId, payload: EventPayload) -> Event {
        Event {
            id: keel::EventId::generate(),
            seq: 1,
            ts: String::new(),
            request_id: run.clone(),
            session_id: None,
            agent_id: "a".into(),
            payload,
        }
    }

    fn wire(updates: &[SessionUpdate]) -> Vec<Value> {
        updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect()
    }

    fn guard(call: &str, decision: GuardDecision, args: &str) -> EventPayload {
        EventPayload::ToolGuard {
            call_id: call.into(),
            tool: "read_file".into(),
            decision,
            arguments: args.into(),
            issues: Vec::new(),
            repairs: Vec::new(),
            resolved_tool: None,
            repaired_arguments: None,
        }
    }

    fn adapter(event: AdapterEvent) -> EventPayload {
        EventPayload::Adapter { event }
    }

    #[test]
    fn a_tool_call_goes_pending_in_progress_completed_with_its_output() {
        let run = RequestId::generate();
        let root = Path::new("/ws");
        let mut t = Translator::new(root);
        let mut updates = t.event(&event(
            &run,
            guard("c1", GuardDecision::Accepted, r#"{"path":"a.md"}"#),
        ));
        updates.extend(t.event(&event(
            &run,
            adapter(AdapterEvent::ToolStart {
                adapter: "native".into(),
                call_id: "c1".into(),
                tool: "read_file".into(),
                arguments: json!({"path": "a.md"}),
            }),
        )));
        updates.extend(t.event(&event(
            &run,
            adapter(AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: "c1".into(),
                tool: "read_file".into(),
                ok: true,
                output: "# A".into(),
                error: None,
                duration_ms: 1,
            }),
        )));
        updates.extend(t.event(&event(
            &run,
            adapter(AdapterEvent::OutputDelta {
                adapter: "native".into(),
                step: 2,
                text: "Done.".into(),
            }),
        )));
        updates.extend(t.end());
        let id = format!("{run}/c1");
        assert_eq!(
            wire(&updates),
            [
                json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "read_file a.md",
                       "kind": "read", "status": "pending",
                       "locations": [{"path": "/ws/a.md"}], "rawInput": {"path": "a.md"}}),
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress"}),
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
                       "content": [{"type": "content", "content": {"type": "text", "text": "# A"}}]}),
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}}),
            ]
        );
    }

    #[test]
    fn refused_and_unrun_calls_end_failed_saying_why() {
        let run = RequestId::generate();
        let mut t = Translator::new(Path::new("/ws"));
        t.event(&event(&run, guard("c1", GuardDecision::Accepted, "{}")));
        t.event(&event(&run, guard("c2", GuardDecision::Accepted, "{}")));
        let record = RunRecord::new(run.clone(), None, "a", "x");
        let approval = ApprovalRecord::pending(
            &record,
            "c1",
            "read_file".into(),
            json!({}),
            "Policy/p",
            None,
        );
        t.event(&event(
            &run,
            EventPayload::ApprovalRequested {
                approval: Box::new(approval.clone()),
            },
        ));
        let denied = t.event(&event(
            &run,
            EventPayload::ApprovalResolved {
                approval_id: approval.approval_id.clone(),
                status: ApprovalStatus::Denied,
                decided_by: Some("zed@acp".into()),
                reason: None,
            },
        ));
        assert_eq!(
            wire(&denied)[0]["content"][0]["content"]["text"],
            "denied by zed@acp"
        );
        assert_eq!(wire(&denied)[0]["status"], "failed");
        // c2 never started (a hook said no): closed when the next round starts.
        let next = t.event(&event(
            &run,
            EventPayload::ModelStarted {
                step: 2,
                attempt: 1,
                model: "m".into(),
                provider: "p".into(),
                params: Default::default(),
            },
        ));
        assert_eq!(wire(&next).len(), 1);
        assert_eq!(wire(&next)[0]["toolCallId"], format!("{run}/c2"));
        assert_eq!(wire(&next)[0]["content"][0]["content"]["text"], "not run");
        assert!(t.end().is_empty());
    }

    #[test]
    fn a_blocked_call_is_announced_and_failed_with_the_gateways_issues() {
        let run = RequestId::generate();
        let mut t = Translator::new(Path::new("/ws"));
        let mut payload = guard("c1", GuardDecision::Blocked, "{");
        if let EventPayload::ToolGuard { issues, .. } = &mut payload {
            issues.push(keel::Issue {
                path: String::new(),
                expected: "JSON".into(),
                found: "{".into(),
                message: "the arguments are not JSON".into(),
            });
        }
        let updates = wire(&t.event(&event(&run, payload)));
        assert_eq!(updates[0]["sessionUpdate"], "tool_call");
        assert_eq!(updates[1]["status"], "failed");
        assert_eq!(
            updates[1]["content"][0]["content"]["text"],
            "blocked by the gateway: the arguments are not JSON"
        );
    }

    #[test]
    fn a_plan_line_becomes_a_plan() {
        let run = RequestId::generate();
        let mut t = Translator::new(Path::new("/ws"));
        let updates = t.event(&event(
            &run,
            adapter(AdapterEvent::Progress {
                adapter: "process".into(),
                kind: "plan".into(),
                data: json!({"type": "plan", "entries": [
                    {"content": "Read", "status": "done"}, "Write",
                    {"title": "Test", "status": "running", "priority": "high"}]}),
            }),
        ));
        assert_eq!(
            wire(&updates),
            [json!({"sessionUpdate": "plan", "entries": [
                {"content": "Read", "priority": "medium", "status": "completed"},
                {"content": "Write", "priority": "medium", "status": "pending"},
                {"content": "Test", "priority": "high", "status": "in_progress"}]})]
        );
    }

    #[test]
    fn a_transcript_replays_as_messages_and_tool_calls() {
        let run = RequestId::generate();
        let at = |seq, message| SessionMessage {
            seq,
            request_id: run.clone(),
            message,
        };
        let call = ModelCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"README.md"}"#.into(),
        };
        let transcript = [
            at(1, Message::user("What does it say?")),
            at(2, Message::assistant("", vec![call])),
            at(3, Message::tool_result("c1", "hello")),
            at(4, Message::assistant("It says hello.", Vec::new())),
        ];
        let kinds: Vec<Value> = wire(&replay(Path::new("/ws"), &transcript))
            .iter()
            .map(|u| json!([u["sessionUpdate"], u.get("status")]))
            .collect();
        assert_eq!(
            kinds,
            [
                json!(["user_message_chunk", null]),
                json!(["tool_call", "pending"]),
                json!(["tool_call_update", "completed"]),
                json!(["agent_message_chunk", null]),
            ]
        );
    }
}
