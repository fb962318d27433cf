//! The event contract pinned: one example of every `EventPayload` (an exhaustive match makes a
//! new variant fail to compile until it has one), their JSON snapshotted, older field names
//! still read, and `docs/events.md` checked against the same list — every type documented,
//! nothing documented that does not exist, every payload field named in its row — and the
//! README's example events written exactly as Keel writes them.

// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

use std::collections::BTreeSet;

use keel_types::{
    AdapterEvent, ApprovalRecord, ApprovalScope, ApprovalStatus, ArtifactRecord, ErrorCode,
    ErrorInfo, Event, EventId, EventPayload, FinishReason, GuardDecision, HookEvent, Issue,
    MemoryAction, MemoryKind, Message, ModelParams, ModelStopReason, PermissionMode,
    PolicyDecision, PromptSection, Repair, RepairKind, RequestId, SandboxRecord, SessionId,
    SkillReason, ToolCall, Usage, WriteDecision,
};
use keel_types::{
    NodeCompleted, NodeFailed, NodeKey, NodeSkipped, NodeStarted, PhaseEvent, WorkflowCompleted,
    WorkflowFailed, WorkflowStarted,
};
use serde_json::{Value, json};

/// The position of a variant in [`examples`]; exhaustive, so a new variant must be added here.
fn slot(payload: &EventPayload) -> usize {
    match payload {
        EventPayload::RequestStarted { .. } => 0,
        EventPayload::RequestCompleted { .. } => 1,
        EventPayload::RequestFailed { .. } => 2,
        EventPayload::RequestCancelled { .. } => 3,
        EventPayload::RequestInterrupted { .. } => 4,
        EventPayload::RequestResumed { .. } => 5,
        EventPayload::RequestForked { .. } => 6,
        EventPayload::ContractFailed { .. } => 7,
        EventPayload::PromptAssembled { .. } => 8,
        EventPayload::ModelStarted { .. } => 9,
        EventPayload::ModelCompleted { .. } => 10,
        EventPayload::ModelRetry { .. } => 11,
        EventPayload::ToolGuard { .. } => 12,
        EventPayload::Adapter {
            event: AdapterEvent::OutputDelta { .. },
        } => 13,
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart { .. },
        } => 14,
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult { .. },
        } => 15,
        EventPayload::ApprovalRequested { .. } => 16,
        EventPayload::ApprovalResolved { .. } => 17,
        EventPayload::PolicyDecided { .. } => 18,
        EventPayload::HookCompleted { .. } => 19,
        EventPayload::HookFailed { .. } => 20,
        EventPayload::DirectStarted { .. } => 21,
        EventPayload::DirectCompleted { .. } => 22,
        EventPayload::ArtifactCreated { .. } => 23,
        EventPayload::McpLifecycle { .. } => 24,
        EventPayload::Adapter {
            event: AdapterEvent::ToolProgress { .. },
        } => 25,
        EventPayload::SkillOffered { .. } => 26,
        EventPayload::SkillInjected { .. } => 27,
        EventPayload::SkillCandidateCreated { .. } => 28,
        EventPayload::MemoryRecallCompleted { .. } => 29,
        EventPayload::MemoryCandidateSubmitted { .. } => 30,
        EventPayload::MemoryApprovalRequested { .. } => 31,
        EventPayload::MemoryLifecycle { .. } => 32,
        EventPayload::MemoryMaintenanceStarted { .. } => 33,
        EventPayload::MemoryMaintenanceCompleted { .. } => 34,
        EventPayload::MemoryMaintenanceFailed { .. } => 35,
        EventPayload::Adapter {
            event: AdapterEvent::Handoff { .. },
        } => 36,
        EventPayload::OutputRejected { .. } => 37,
        EventPayload::WorkflowStarted(_) => 38,
        EventPayload::WorkflowCompleted(_) => 39,
        EventPayload::WorkflowFailed(_) => 40,
        EventPayload::NodeStarted(_) => 41,
        EventPayload::NodeCompleted(_) => 42,
        EventPayload::NodeFailed(_) => 43,
        EventPayload::NodeSkipped(_) => 44,
        EventPayload::PhaseStarted(_) => 45,
        EventPayload::PhaseBlocked(_) => 46,
        EventPayload::PhaseCompleted(_) => 47,
        EventPayload::PhaseVerified(_) => 48,
        EventPayload::Narration { .. } => 49,
        EventPayload::WorkspaceReloaded { .. } => 50,
        EventPayload::Adapter {
            event: AdapterEvent::Progress { .. },
        } => 51,
        EventPayload::Adapter {
            event: AdapterEvent::Log { .. },
        } => 52,
        EventPayload::ModelFallback { .. } => 53,
        EventPayload::ModelQueued { .. } => 54,
        EventPayload::ContextCompacted { .. } => 55,
        EventPayload::ToolSandbox { .. } => 56,
    }
}

const SLOTS: usize = 57;

fn usage() -> Usage {
    Usage {
        prompt_tokens: 120,
        completion_tokens: 30,
        total_tokens: 150,
        ..Usage::default()
    }
}

/// One example of every payload, in [`slot`] order.
fn examples() -> Vec<EventPayload> {
    let call = || "call_1".to_owned();
    let tool = || "read_file".to_owned();
    vec![
        EventPayload::RequestStarted {
            input: "Summarize notes.txt".into(),
            history: vec![Message::user("Hi"), Message::assistant("Hello.", vec![])],
            mode: Some(PermissionMode::DontAsk),
            metadata: std::collections::BTreeMap::from([("user".to_owned(), "alice".to_owned())]),
            params: ModelParams {
                temperature: Some(0.0),
                max_tokens: Some(256),
                ..ModelParams::default()
            },
            output_schema: Some(json!({"type": "object", "required": ["answer"]})),
            session_owner_overridden: None,
        },
        EventPayload::RequestCompleted {
            value: Some(json!({"answer": 42})),
            output: "Done.".into(),
            finish_reason: FinishReason::Completed,
            usage: usage(),
            steps: 2,
            duration_ms: 900,
        },
        EventPayload::RequestFailed {
            error: ErrorInfo::new(ErrorCode::MaxSteps, "max steps (8) reached"),
            finish_reason: FinishReason::MaxSteps,
            usage: usage(),
            steps: 8,
            duration_ms: 4000,
        },
        EventPayload::RequestCancelled {
            reason: "cancelled by the caller".into(),
            usage: usage(),
            steps: 1,
            duration_ms: 300,
        },
        EventPayload::RequestInterrupted {
            reason: "the runtime shut down".into(),
            usage: usage(),
            steps: 1,
            duration_ms: 300,
        },
        EventPayload::RequestResumed {
            reissued_round: false,
            rerun_calls: vec![call()],
            abandoned_calls: vec!["call_2".into()],
        },
        EventPayload::RequestForked {
            from_request_id: RequestId::from("run_original"),
            at_seq: 7,
        },
        EventPayload::ContractFailed {
            reason:
                "execution contract violated: required tool(s) not called successfully: read_file"
                    .into(),
            missing_tools: vec![tool()],
        },
        EventPayload::PromptAssembled {
            step: 1,
            sections: vec![PromptSection {
                name: "input".into(),
                messages: 1,
                bytes: 52,
                sha256: "0".repeat(64),
                tokens: 41,
            }],
        },
        EventPayload::ModelStarted {
            step: 1,
            attempt: 1,
            model: "gpt-4o-mini".into(),
            provider: "openai".into(),
            params: ModelParams {
                temperature: Some(0.0),
                max_tokens: Some(256),
                ..ModelParams::default()
            },
        },
        EventPayload::ModelCompleted {
            step: 1,
            stop_reason: ModelStopReason::ToolCalls,
            usage: usage(),
            latency_ms: 400,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: call(),
                name: tool(),
                arguments: r#"{"path":"notes.txt"}"#.into(),
            }],
            thinking: Vec::new(),
        },
        EventPayload::ModelRetry {
            step: 1,
            attempt: 1,
            error: ErrorInfo::new(ErrorCode::ModelUnavailable, "upstream returned 503"),
            delay_ms: 500,
        },
        EventPayload::ToolGuard {
            call_id: call(),
            tool: tool(),
            decision: GuardDecision::Repaired,
            arguments: r#"{"path":"notes.txt","limit":"5"}"#.into(),
            issues: vec![Issue {
                path: "/limit".into(),
                expected: "integer".into(),
                found: "string".into(),
                message: "expected an integer".into(),
            }],
            repairs: vec![Repair {
                path: "/limit".into(),
                kind: RepairKind::CoerceNumber,
                from: json!("5"),
                to: json!(5),
            }],
            resolved_tool: None,
            repaired_arguments: Some(json!({"path": "notes.txt", "limit": 5})),
        },
        EventPayload::Adapter {
            event: AdapterEvent::OutputDelta {
                adapter: "native".into(),
                step: 2,
                text: "The notes".into(),
            },
        },
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                adapter: "native".into(),
                call_id: call(),
                tool: tool(),
                arguments: json!({"path": "notes.txt"}),
            },
        },
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: call(),
                tool: tool(),
                ok: false,
                output: r#"{"error":"no such file"}"#.into(),
                error: Some("no such file".into()),
                duration_ms: 3,
            },
        },
        EventPayload::ApprovalRequested {
            approval: Box::new(ApprovalRecord {
                approval_id: "apr_1".into(),
                request_id: RequestId::from("run_1"),
                root_request_id: None,
                session_id: None,
                agent: "assistant".into(),
                tool: "shell".into(),
                arguments: json!({"command": "make deploy"}),
                call_id: Some(call()),
                asked_by: "Policy/default rules[1]".into(),
                ask_reason: Some("deploys need a human".into()),
                status: ApprovalStatus::Pending,
                scope: ApprovalScope::Once,
                decided_by: None,
                decided_at: None,
                decision_reason: None,
                created_at: "2026-11-22T12:00:00.000Z".into(),
                memory: None,
                memory_record: None,
            }),
        },
        EventPayload::ApprovalResolved {
            approval_id: "apr_1".into(),
            status: ApprovalStatus::Approved,
            decided_by: Some("ana".into()),
            reason: Some("looks fine".into()),
        },
        EventPayload::PolicyDecided {
            call_id: call(),
            tool: "shell".into(),
            decision: PolicyDecision::Ask,
            source: "Policy/default rules[1]".into(),
            reason: Some("deploys need a human".into()),
        },
        EventPayload::HookCompleted {
            hook: "review".into(),
            event: HookEvent::PreToolUse,
            call_id: Some(call()),
            outcome: "deny".into(),
            reason: Some("not on Fridays".into()),
            duration_ms: 12,
            sandbox: Some(Box::new(SandboxRecord {
                filesystem: "workspace-write".into(),
                network: "deny".into(),
                limits: Vec::new(),
                mechanisms: vec!["process group".into(), "seccomp".into()],
                missing: vec![
                    "Landlock (the kernel has none, or it is disabled): the filesystem profile"
                        .into(),
                ],
            })),
        },
        EventPayload::HookFailed {
            hook: "review".into(),
            event: HookEvent::PreToolUse,
            call_id: Some(call()),
            error: "timed out after 5s".into(),
            on_error: keel_types::HookOnError::Deny,
            duration_ms: 5000,
            sandbox: None,
        },
        EventPayload::DirectStarted {
            task_id: Some("task_1".into()),
            tool: tool(),
            arguments: json!({"path": "notes.txt"}),
        },
        EventPayload::DirectCompleted {
            task_id: Some("task_1".into()),
            tool: tool(),
            ok: true,
            output: "hello".into(),
            duration_ms: 2,
        },
        EventPayload::ArtifactCreated {
            artifact: ArtifactRecord {
                id: "art_1".into(),
                uri: "keel://artifacts/art_1".into(),
                request_id: RequestId::from("run_1"),
                name: "shell output (call_1)".into(),
                media_type: "text/plain".into(),
                bytes: 70000,
                sha256: "0".repeat(64),
                created_at: "2026-11-22T12:00:00.000Z".into(),
            },
            call_id: Some(call()),
        },
        EventPayload::McpLifecycle {
            server: "files".into(),
            lifecycle: keel_types::SourceLifecycle::Down,
            at: "2026-11-22T11:59:00.000Z".into(),
            detail: Some("the server process exited (exit status: 1)".into()),
        },
        EventPayload::Adapter {
            event: AdapterEvent::ToolProgress {
                adapter: "native".into(),
                call_id: call(),
                tool: "mcp__files__index".into(),
                progress: 2.0,
                total: Some(10.0),
                message: Some("indexing".into()),
            },
        },
        EventPayload::SkillOffered {
            offered: vec!["release-notes".into(), "deploy".into()],
            omitted: vec!["zz-archive".into()],
            chars: 212,
        },
        EventPayload::SkillInjected {
            skill: "release-notes".into(),
            reason: SkillReason::Mention,
            chars: 1840,
            truncated: false,
        },
        EventPayload::SkillCandidateCreated {
            candidate_id: "cand_1".into(),
            skill: "triage-flaky-tests".into(),
            call_id: Some(call()),
        },
        EventPayload::MemoryRecallCompleted {
            namespaces: vec!["users/alice".into()],
            record_ids: vec!["mem_1".into()],
            mode: "fulltext".into(),
            omitted: 0,
            chars: 64,
            context: "- [mem_1] (preference) Alice prefers short answers.".into(),
        },
        EventPayload::MemoryCandidateSubmitted {
            memory: "user-notes".into(),
            namespace: "users/alice".into(),
            kind: MemoryKind::Preference,
            text: "Alice prefers short answers.".into(),
            tags: vec!["style".into()],
            decision: WriteDecision::Approve,
            call_id: Some(call()),
            record_id: None,
            approval_id: Some("apr_2".into()),
            reason: None,
        },
        EventPayload::MemoryApprovalRequested {
            approval_id: "apr_2".into(),
            memory: "user-notes".into(),
            namespace: "users/alice".into(),
            text: "Alice prefers short answers.".into(),
        },
        EventPayload::MemoryLifecycle {
            action: MemoryAction::Stored,
            record_id: "mem_1".into(),
            version: 1,
            namespace: "users/alice".into(),
            detail: None,
        },
        EventPayload::MemoryMaintenanceStarted {
            target: "*".into(),
            operations: vec!["expire".into(), "compact".into()],
        },
        EventPayload::MemoryMaintenanceCompleted {
            target: "*".into(),
            operation_count: 3,
            merged: 2,
            expired: 1,
        },
        EventPayload::MemoryMaintenanceFailed {
            target: "users/alice".into(),
            error: "the store is read-only".into(),
        },
        EventPayload::Adapter {
            event: AdapterEvent::Handoff {
                adapter: "native".into(),
                call_id: call(),
                agent: "researcher".into(),
                child_request_id: RequestId::from("run_2"),
            },
        },
        EventPayload::OutputRejected {
            attempt: 1,
            max_retries: 2,
            issues: vec![Issue {
                path: "/severity".into(),
                expected: "one of [\"low\",\"high\"]".into(),
                found: "\"urgent\"".into(),
                message: "\"urgent\" is not one of [\"low\",\"high\"]".into(),
            }],
        },
        EventPayload::WorkflowStarted(WorkflowStarted {
            workflow: "triage".into(),
            input: json!({"tickets": [1, 2]}),
        }),
        EventPayload::WorkflowCompleted(WorkflowCompleted {
            workflow: "triage".into(),
            output: json!({"done": 2}),
        }),
        EventPayload::WorkflowFailed(WorkflowFailed {
            workflow: "triage".into(),
            node: Some("classify".into()),
            error: "the agent run failed: timeout".into(),
        }),
        EventPayload::NodeStarted(NodeStarted {
            node: "classify".into(),
            kind: "agent".into(),
            key: NodeKey {
                iteration: 1,
                item: Some(0),
            },
            attempt: 1,
            input: json!("Classify ticket 1"),
            child_request_id: Some(RequestId::from("run_3")),
        }),
        EventPayload::NodeCompleted(NodeCompleted {
            node: "classify".into(),
            key: NodeKey {
                iteration: 1,
                item: Some(0),
            },
            output: json!({"severity": "high"}),
            duration_ms: 12,
        }),
        EventPayload::NodeFailed(NodeFailed {
            node: "fetch".into(),
            key: NodeKey {
                iteration: 1,
                item: None,
            },
            attempt: 1,
            error: "tool `fetch` failed: timeout".into(),
            will_retry: true,
        }),
        EventPayload::NodeSkipped(NodeSkipped {
            node: "escalate".into(),
            key: NodeKey {
                iteration: 1,
                item: None,
            },
            reason: "no edge into it was taken".into(),
        }),
        EventPayload::PhaseStarted(PhaseEvent {
            phase: "plan".into(),
            gate: None,
            reason: None,
        }),
        EventPayload::PhaseBlocked(PhaseEvent {
            phase: "verify".into(),
            gate: Some("command".into()),
            reason: Some("`cargo test` exited with 101".into()),
        }),
        EventPayload::PhaseCompleted(PhaseEvent {
            phase: "plan".into(),
            gate: Some("agent".into()),
            reason: None,
        }),
        EventPayload::PhaseVerified(PhaseEvent {
            phase: "plan".into(),
            gate: Some("agent".into()),
            reason: None,
        }),
        EventPayload::Narration {
            text: "Running read_file {\"path\":\"notes.txt\"}…".into(),
            provider: "template".into(),
            source_event_types: vec!["runtime.adapter.event".into()],
            source_event_ids: vec![EventId::from("evt_1")],
            style: "concise".into(),
        },
        EventPayload::WorkspaceReloaded {
            digest: "sha256:4f2a".into(),
            changes: vec![
                "Agent/assistant (changed)".into(),
                "Tool/search (added)".into(),
            ],
        },
        EventPayload::Adapter {
            event: AdapterEvent::Progress {
                adapter: "process".into(),
                kind: "plan".into(),
                data: json!({"type": "plan", "steps": ["search", "summarise"]}),
            },
        },
        EventPayload::Adapter {
            event: AdapterEvent::Log {
                adapter: "process".into(),
                stream: "stderr".into(),
                line: "WARNING: retrying the search".into(),
            },
        },
        EventPayload::ModelFallback {
            step: 2,
            from: "sonnet".into(),
            to: "gpt".into(),
            reason: ErrorInfo::new(
                ErrorCode::ModelUnavailable,
                "the provider failed with HTTP 529: Overloaded",
            ),
            note: None,
        },
        EventPayload::ModelQueued {
            step: 1,
            model: "sonnet".into(),
            wait_ms: 420,
        },
        EventPayload::ContextCompacted {
            step: 41,
            reason: "threshold".into(),
            tokens_before: 3_310,
            tokens_after: 1_204,
            elided: vec!["call_3".into(), "call_4".into()],
            summarized: Some([0, 24]),
            summary: Some("Read a.txt (it holds KEY-1) and twelve more files.".into()),
            summarizer_usage: Some(Usage::new(2_900, 64)),
            error: None,
        },
        EventPayload::ToolSandbox {
            call_id: call(),
            tool: "shell".into(),
            sandbox: SandboxRecord {
                filesystem: "workspace-write".into(),
                network: "deny".into(),
                limits: vec!["processes 256".into()],
                mechanisms: vec![
                    "process group".into(),
                    "landlock (ABI 7)".into(),
                    "seccomp".into(),
                    "no_new_privs".into(),
                    "cgroup pids".into(),
                ],
                missing: Vec::new(),
            },
        },
    ]
}

fn envelope(payload: EventPayload, session: Option<SessionId>) -> Event {
    Event {
        id: EventId::from("evt_1"),
        seq: 1,
        ts: "2026-11-22T12:00:00.123Z".into(),
        request_id: RequestId::from("run_1"),
        session_id: session,
        agent_id: "assistant".into(),
        payload,
    }
}

#[test]
fn every_payload_has_one_example_in_order() {
    let slots: Vec<usize> = examples().iter().map(slot).collect();
    assert_eq!(slots, (0..SLOTS).collect::<Vec<_>>());
}

#[test]
fn the_payloads_wire_form_is_pinned() {
    let all: Vec<Value> = examples()
        .into_iter()
        .map(|payload| serde_json::to_value(payload).unwrap())
        .collect();
    insta::assert_json_snapshot!("event_payloads", all);
}

#[test]
fn every_payload_round_trips() {
    for payload in examples() {
        let json = serde_json::to_value(&payload).unwrap();
        let back: EventPayload = serde_json::from_value(json).unwrap();
        assert_eq!(back, payload);
    }
}

#[test]
fn the_envelope_always_carries_a_session_id() {
    let payload = || examples().swap_remove(9);
    let without = serde_json::to_value(envelope(payload(), None)).unwrap();
    assert_eq!(without["sessionId"], Value::Null, "{without}");
    let session = SessionId::parse("ses-1").unwrap();
    let with = serde_json::to_value(envelope(payload(), Some(session.clone()))).unwrap();
    assert_eq!(with["sessionId"], "ses-1");
    let back: Event = serde_json::from_value(with).unwrap();
    assert_eq!(back.session_id, Some(session));
}

#[test]
fn events_recorded_with_the_older_field_names_still_load() {
    let old = json!({
        "id": "evt_1", "seq": 3, "ts": "2026-11-22T12:00:00.123Z", "requestId": "run_1",
        "agentId": "assistant", "type": "runtime.adapter.event",
        "event": {"phase": "agent.tool.result", "callId": "call_1", "tool": "read_file",
                  "ok": true, "output": "hello", "durationMs": 2}
    });
    let event: Event = serde_json::from_value(old).unwrap();
    assert_eq!(event.session_id, None);
    assert_eq!(
        event.payload,
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: "call_1".into(),
                tool: "read_file".into(),
                ok: true,
                output: "hello".into(),
                error: None,
                duration_ms: 2,
            },
        }
    );
    let old_payloads = [
        json!({"type": "runtime.adapter.event", "event": {"phase": "agent.tool.start",
               "callId": "c", "tool": "read_file", "arguments": {"path": "a"}}}),
        json!({"type": "runtime.adapter.event", "event": {"phase": "agent.output.delta",
               "step": 1, "text": "Hi"}}),
        json!({"type": "runtime.execution.contract.failed", "missingTools": ["read_file"]}),
        json!({"type": "runtime.tool.direct.started", "tool": "read_file", "arguments": {}}),
        json!({"type": "runtime.tool.direct.completed", "tool": "read_file", "ok": true,
               "output": "x", "durationMs": 1}),
    ];
    for old in old_payloads {
        let payload: EventPayload = serde_json::from_value(old.clone()).unwrap();
        let text = format!("{payload:?}");
        assert!(
            text.contains("read_file") || text.contains("Hi"),
            "{old} read as {text}"
        );
    }
}

/// The rows of the `## Types` table in docs/events.md: (type, payload cell).
fn documented_rows() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/events.md");
    let text = std::fs::read_to_string(path).unwrap();
    let types = text.split("## Types").nth(1).unwrap();
    let table = types.split("\n\n").nth(1).unwrap();
    table
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let name = cells[0].trim_start_matches("| ").trim_matches('`');
            (name.to_owned(), cells[1].to_owned())
        })
        .collect()
}

/// Whether `cell` names `field` as a whole word.
fn names(cell: &str, field: &str) -> bool {
    cell.match_indices(field).any(|(at, _)| {
        let before = cell[..at].chars().next_back();
        let after = cell[at + field.len()..].chars().next();
        let edge = |c: Option<char>| !c.is_some_and(|c| c.is_ascii_alphanumeric());
        edge(before) && edge(after)
    })
}

#[test]
fn docs_events_md_documents_exactly_these_events_and_fields() {
    let rows = documented_rows();
    let documented: BTreeSet<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    let examples = examples();
    let real: BTreeSet<&str> = examples.iter().map(EventPayload::type_name).collect();
    assert_eq!(documented, real, "docs/events.md's types and the code's");
    for payload in &examples {
        let json = serde_json::to_value(payload).unwrap();
        let (fields, phase) = match &json["event"] {
            Value::Object(inner) => (inner, inner["phase"].as_str()),
            _ => (json.as_object().unwrap(), None),
        };
        let row = rows
            .iter()
            .find(|(name, cell)| {
                name == payload.type_name() && phase.is_none_or(|phase| cell.contains(phase))
            })
            .unwrap_or_else(|| panic!("no row for {} {phase:?}", payload.type_name()));
        for field in fields.keys().filter(|key| *key != "type") {
            assert!(
                names(&row.1, field),
                "docs/events.md's row for {} {phase:?} does not name `{field}`",
                payload.type_name()
            );
        }
    }
}

#[test]
fn the_readme_event_examples_are_events_as_keel_writes_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text
        .split("```jsonl\n")
        .skip(1)
        .flat_map(|block| block.split("```").next().unwrap_or_default().lines())
        .collect();
    assert!(!lines.is_empty(), "the README shows events");
    for line in lines {
        let written: Value = serde_json::from_str(line).unwrap();
        let event: Event = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&event).unwrap(), written, "{line}");
    }
}
