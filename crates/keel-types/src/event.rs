//! The event contract (`docs/events.md`): every fact or signal about a run is an [`Event`] — an
//! envelope with a dense per-run `seq` — around a closed [`EventPayload`] whose `type` names are
//! a stable public contract.
//!
//! Names inside events are closed sets too ([`GuardDecision`], [`RepairKind`],
//! [`crate::PolicyDecision`]): like an unknown `type`, an unknown name fails the event. The
//! one exception is the permission mode of `runtime.request.started`, which reads as none
//! when unknown, so a log a newer Keel wrote can still be resumed, replayed or forked.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub use crate::message::PromptSection;
use crate::message::{Message, ModelParams, ModelStopReason, Thinking, ToolCall, Usage};
use crate::run::{ErrorInfo, FinishReason};
use crate::wire_name::wire_names;
use crate::{EventId, HookEvent, PermissionMode, PolicyDecision, RequestId, SessionId};

mod adapter;
pub use adapter::{AdapterEvent, NATIVE_ADAPTER};

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub id: EventId,
    /// Position in the run, dense from 1. Derived views (narration) carry the `seq` of the
    /// newest event they describe and are never stored.
    pub seq: u64,
    pub ts: String,
    pub request_id: RequestId,
    /// The session the run belongs to; `null` on the wire when there is none.
    #[serde(default)]
    pub session_id: Option<SessionId>,
    pub agent_id: String,
    #[serde(flatten)]
    pub payload: EventPayload,
}

impl Event {
    /// The event's public type name, e.g. `runtime.request.started`.
    pub fn type_name(&self) -> &'static str {
        self.payload.type_name()
    }
}

wire_names! {
    /// What the gateway decided about one tool call.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum GuardDecision: "guard decision" {
        /// Valid as sent.
        Accepted = "accepted",
        /// Made valid by deterministic repairs.
        Repaired = "repaired",
        /// Not executed; the issues went back to the model.
        Blocked = "blocked",
    }
}

/// One structured problem with a tool call: where, what was expected, what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    /// JSON pointer into the arguments (`""` for the whole call).
    pub path: String,
    pub expected: String,
    pub found: String,
    pub message: String,
}

/// One deterministic (or model-made) change the gateway made to a call before accepting it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// JSON pointer into the arguments (`""` for the whole call or the tool name).
    pub path: String,
    pub kind: RepairKind,
    /// The value before (for `tool_name`: the name the model sent).
    pub from: Value,
    /// The value after (`null` when removed).
    pub to: Value,
}

wire_names! {
    /// What kind of change a [`Repair`] made.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum RepairKind: "repair kind" {
        /// A numeric string became a number.
        CoerceNumber = "coerce_number",
        /// `true/false/yes/no/1/0` text became a boolean.
        CoerceBoolean = "coerce_boolean",
        /// A number or boolean became a string.
        CoerceString = "coerce_string",
        /// A string became the enum option it matches ignoring case and surrounding space.
        EnumCase = "enum_case",
        /// A lone value became a one-element array.
        WrapArray = "wrap_array",
        /// A property the schema forbids was removed.
        DropUnknown = "drop_unknown",
        /// An optional property sent as `null` that its schema does not allow was removed
        /// (OpenAI strict mode sends every optional property, `null` when unset).
        DropNull = "drop_null",
        /// A missing required property got its schema's default.
        FillDefault = "fill_default",
        /// JSON text became the object or array it holds.
        DecodeJsonString = "decode_json_string",
        /// The tool name was mapped onto a tool of the caller's inventory.
        ToolName = "tool_name",
        /// The repair model rewrote the arguments.
        RepairModel = "repair_model",
        /// The tool's own semantic check rewrote a value (`Tool::repair`).
        ToolCheck = "tool_check",
    }
}

/// Why a skill's instructions entered a run's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillReason {
    /// The agent lists it in `alwaysOnSkills`.
    AlwaysOn,
    /// The input mentions it as `$name`.
    Mention,
    /// The model loaded it with `load_skill`.
    Tool,
}

impl SkillReason {
    /// The name used on the wire and in prompts: `always_on`, `mention`, `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlwaysOn => "always_on",
            Self::Mention => "mention",
            Self::Tool => "tool",
        }
    }
}

/// The payload of an event, tagged by its public `type` name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventPayload {
    #[serde(rename = "runtime.request.started", rename_all = "camelCase")]
    RequestStarted {
        input: String,
        /// An earlier conversation the caller supplied with the request, sent after the
        /// session's history and before the input. Absent in older logs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        history: Vec<Message>,
        /// The run's permission mode when the request set one (`plan`, `dontAsk`, …). A mode
        /// this version does not know (recorded by a newer Keel) reads as none: the log still
        /// loads, and the run is resumed, replayed or forked without it.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "recorded_mode"
        )]
        mode: Option<PermissionMode>,
        /// The request's metadata (memory namespaces are rendered from it). Absent in older
        /// logs and when the request had none.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        metadata: std::collections::BTreeMap<String, String>,
        /// Model parameters the request set (e.g. the facade's `temperature`), over the Model
        /// document's in every round. Absent when it set none.
        #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
        params: ModelParams,
        /// The structured output the request asked for (the facade's `response_format`): the
        /// JSON Schema its final answer is checked against, as an agent's `output.schema`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_schema: Option<Value>,
        /// The owner of the session this run continued although another principal created
        /// it: an operator's explicit override. Absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_owner_overridden: Option<crate::SessionOwner>,
    },
    #[serde(rename = "runtime.request.completed", rename_all = "camelCase")]
    RequestCompleted {
        output: String,
        /// The structured output, when the agent declares `output.schema` (or the run is a
        /// workflow's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
        finish_reason: FinishReason,
        usage: Usage,
        steps: u32,
        duration_ms: u64,
    },
    #[serde(rename = "runtime.request.failed", rename_all = "camelCase")]
    RequestFailed {
        error: ErrorInfo,
        finish_reason: FinishReason,
        usage: Usage,
        steps: u32,
        duration_ms: u64,
    },
    #[serde(rename = "runtime.request.cancelled", rename_all = "camelCase")]
    RequestCancelled {
        reason: String,
        usage: Usage,
        steps: u32,
        duration_ms: u64,
    },
    /// The runtime shut down while the run was active: it stopped here and can be resumed.
    /// Terminal until then; a resumed log continues after it with `runtime.request.resumed`.
    #[serde(rename = "runtime.request.interrupted", rename_all = "camelCase")]
    RequestInterrupted {
        reason: String,
        usage: Usage,
        steps: u32,
        duration_ms: u64,
    },
    /// An interrupted run continues in a new process.
    #[serde(rename = "runtime.request.resumed", rename_all = "camelCase")]
    RequestResumed {
        /// A model round was cut off and is asked again.
        reissued_round: bool,
        /// Tool calls that started without a recorded result and run again (idempotent tools).
        rerun_calls: Vec<String>,
        /// Tool calls that started without a recorded result and are not run again; the model
        /// is told their outcome is unknown.
        abandoned_calls: Vec<String>,
    },
    /// This run continues another run's log from `atSeq` (its first events are copies).
    #[serde(rename = "runtime.request.forked", rename_all = "camelCase")]
    RequestForked {
        from_request_id: RequestId,
        at_seq: u64,
    },
    #[serde(rename = "runtime.execution.contract.failed", rename_all = "camelCase")]
    ContractFailed {
        /// Why the contract failed, in words.
        #[serde(default)]
        reason: String,
        /// Required tools that were never called successfully.
        #[serde(rename = "missingEvidenceTools", alias = "missingTools")]
        missing_tools: Vec<String>,
    },
    /// What a model round sends, section by section in prompt order (sizes and hashes only),
    /// so what reached the model can be explained. Once per round, before its first attempt.
    #[serde(rename = "runtime.prompt.assembled", rename_all = "camelCase")]
    PromptAssembled {
        step: u32,
        sections: Vec<PromptSection>,
    },
    #[serde(rename = "runtime.model.started", rename_all = "camelCase")]
    ModelStarted {
        step: u32,
        attempt: u32,
        model: String,
        provider: String,
        /// The parameters the round sends: the request's over the Model document's.
        #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
        params: ModelParams,
    },
    #[serde(rename = "runtime.model.completed", rename_all = "camelCase")]
    ModelCompleted {
        step: u32,
        stop_reason: ModelStopReason,
        usage: Usage,
        latency_ms: u64,
        /// The whole answer, so a run can be inspected and replayed from its log.
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The model's reasoning blocks, kept to be sent back in the next rounds; never the
        /// answer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<Thinking>,
    },
    #[serde(rename = "runtime.model.retry", rename_all = "camelCase")]
    ModelRetry {
        step: u32,
        attempt: u32,
        error: ErrorInfo,
        delay_ms: u64,
    },
    /// A round waited for its model's rate limits (`Model.limits`) before its attempt.
    #[serde(rename = "runtime.model.queued", rename_all = "camelCase")]
    ModelQueued {
        step: u32,
        /// The `Model` document whose limits it waited for.
        model: String,
        wait_ms: u64,
    },
    /// A round's model failed after its retries; the round goes to the next of its
    /// `fallbacks` (`Model` document names).
    #[serde(rename = "runtime.model.fallback", rename_all = "camelCase")]
    ModelFallback {
        step: u32,
        from: String,
        to: String,
        /// Why `from` gave up: its last error.
        reason: ErrorInfo,
        /// What the change of provider could not carry over, e.g. thinking blocks a provider
        /// other than the one that wrote them does not take.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Before a round, the prompt passed `context.compactAt` of the model's window (or the
    /// model answered that it was too long): old tool results were elided and the oldest
    /// rounds summarized. A resumed run rebuilds its prompt from this record; it never
    /// summarizes again.
    #[serde(rename = "runtime.context.compacted", rename_all = "camelCase")]
    ContextCompacted {
        step: u32,
        /// `threshold` (past `compactAt`) or `overflow` (the model refused the prompt).
        reason: String,
        /// The prompt's estimated size before and after, in tokens.
        tokens_before: u64,
        tokens_after: u64,
        /// Calls whose results were replaced by a stub (their text stays in this log).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        elided: Vec<String>,
        /// The messages after the input (indices, `[from, to)`) the summary replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summarized: Option<[u32; 2]>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// What writing the summary used.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summarizer_usage: Option<Usage>,
        /// Why a summary was not made (the summarizer failed or answered nothing): the prompt
        /// was left as it was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The OS sandbox a call's process starts in (after the call's start): the profile and
    /// the mechanisms that enforce it on this machine.
    #[serde(rename = "runtime.tool.sandbox", rename_all = "camelCase")]
    ToolSandbox {
        call_id: String,
        tool: String,
        #[serde(flatten)]
        sandbox: SandboxRecord,
    },
    #[serde(rename = "runtime.tool.guard", rename_all = "camelCase")]
    ToolGuard {
        call_id: String,
        /// The tool name as the model sent it.
        tool: String,
        decision: GuardDecision,
        /// The arguments as the model sent them (raw text).
        arguments: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        issues: Vec<Issue>,
        /// What the gateway changed to make the call valid.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        repairs: Vec<Repair>,
        /// The tool the call runs, when the name was repaired.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolved_tool: Option<String>,
        /// The arguments the tool receives, when they were repaired.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repaired_arguments: Option<Value>,
    },
    #[serde(rename = "runtime.adapter.event")]
    Adapter { event: AdapterEvent },
    /// A call needs a human decision; the run waits (`waiting_approval`).
    #[serde(rename = "runtime.approval.requested", rename_all = "camelCase")]
    ApprovalRequested {
        approval: Box<crate::ApprovalRecord>,
    },
    /// The decision arrived (or the wait timed out).
    #[serde(rename = "runtime.approval.resolved", rename_all = "camelCase")]
    ApprovalResolved {
        approval_id: String,
        status: crate::ApprovalStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A policy rule decided a call (deny or ask; allows are not recorded separately).
    #[serde(rename = "runtime.policy.decided", rename_all = "camelCase")]
    PolicyDecided {
        call_id: String,
        tool: String,
        decision: PolicyDecision,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A hook ran and answered.
    #[serde(rename = "runtime.hook.completed", rename_all = "camelCase")]
    HookCompleted {
        hook: String,
        /// When it ran, by Keel's name (an alias in the workspace is stored as the name).
        event: HookEvent,
        /// The tool call it was asked about (tool events).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// What it said, e.g. `deny`, `ask`, `block`, `allow`, `context added`, `no opinion`.
        outcome: String,
        /// The reason it gave for a deny, an ask, a block or a stop.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        duration_ms: u64,
        /// The OS sandbox a command hook's process ran in, and what enforced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Box<SandboxRecord>>,
    },
    /// A hook failed (error exit, timeout, bad output) and its `onError` applied.
    #[serde(rename = "runtime.hook.failed", rename_all = "camelCase")]
    HookFailed {
        hook: String,
        /// When it ran, by Keel's name.
        event: HookEvent,
        /// The tool call it was asked about (tool events), so the failures of parallel calls'
        /// hooks can be told apart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        error: String,
        on_error: crate::HookOnError,
        duration_ms: u64,
        /// The OS sandbox a command hook's process ran in, and what enforced it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Box<SandboxRecord>>,
    },
    /// A tool called directly (a task or `tools call`), not by a model, starts.
    #[serde(rename = "runtime.tool.direct.started", rename_all = "camelCase")]
    DirectStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        #[serde(rename = "toolId", alias = "tool")]
        tool: String,
        arguments: Value,
    },
    /// A direct tool call ended.
    #[serde(rename = "runtime.tool.direct.completed", rename_all = "camelCase")]
    DirectCompleted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        #[serde(rename = "toolId", alias = "tool")]
        tool: String,
        ok: bool,
        output: String,
        duration_ms: u64,
    },
    /// A large tool result (or another output) was stored as an artifact.
    #[serde(rename = "runtime.artifact.created", rename_all = "camelCase")]
    ArtifactCreated {
        artifact: crate::ArtifactRecord,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A change in the life of an MCP server the run's agent uses (started, ready, down,
    /// restarting, tools changed, stopped), recorded in the first run that uses the server
    /// after it happened; `at` is when it happened.
    #[serde(rename = "runtime.mcp.lifecycle", rename_all = "camelCase")]
    McpLifecycle {
        server: String,
        lifecycle: crate::SourceLifecycle,
        at: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The skill catalogue in the agent's prompt: the skills `offered` (name and description)
    /// and those `omitted` because the catalogue's character budget ran out; `chars` is the
    /// catalogue's size.
    #[serde(rename = "runtime.skill.offered", rename_all = "camelCase")]
    SkillOffered {
        offered: Vec<String>,
        #[serde(default)]
        omitted: Vec<String>,
        chars: u64,
    },
    /// A skill's instructions entered the conversation: `reason` says why; `chars` is what
    /// entered, `truncated` whether the body was cut at its budget.
    #[serde(rename = "runtime.skill.injected", rename_all = "camelCase")]
    SkillInjected {
        skill: String,
        reason: SkillReason,
        chars: u64,
        #[serde(default)]
        truncated: bool,
    },
    /// An agent proposed a new skill (`propose_skill`); it waits for a human's approval.
    #[serde(rename = "runtime.skill.candidate.created", rename_all = "camelCase")]
    SkillCandidateCreated {
        candidate_id: String,
        skill: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// Memory recalled into the prompt before the first round (`read-before-plan`): the
    /// records' ids and the exact text added, so a resumed, forked or replayed run sees the
    /// same context.
    #[serde(rename = "runtime.memory.recall.completed", rename_all = "camelCase")]
    MemoryRecallCompleted {
        /// The resolved namespaces searched.
        namespaces: Vec<String>,
        record_ids: Vec<String>,
        /// `fulltext` or `hybrid` (full-text and embeddings fused by reciprocal rank).
        mode: String,
        /// Records that matched but did not fit the character budget.
        #[serde(default)]
        omitted: u64,
        chars: u64,
        /// The memory context as it entered the prompt (empty when nothing matched).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        context: String,
    },
    /// A run submitted a memory candidate (`remember`, or post-run extraction) and the write
    /// policy decided it.
    #[serde(
        rename = "runtime.memory.candidate.submitted",
        rename_all = "camelCase"
    )]
    MemoryCandidateSubmitted {
        /// The `Memory` document.
        memory: String,
        namespace: String,
        kind: crate::MemoryKind,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tags: Vec<String>,
        decision: crate::WriteDecision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The stored record (decision `auto`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record_id: Option<String>,
        /// The approval it waits for (decision `approve`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval_id: Option<String>,
        /// Why it was refused (decision `reject`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A memory candidate waits for a person (`keel approvals`, `/api/approvals`); the run
    /// does not wait for the decision.
    #[serde(rename = "runtime.memory.approval.requested", rename_all = "camelCase")]
    MemoryApprovalRequested {
        approval_id: String,
        memory: String,
        namespace: String,
        text: String,
    },
    /// A record was stored, superseded, deleted, expired or merged.
    #[serde(rename = "runtime.memory.lifecycle", rename_all = "camelCase")]
    MemoryLifecycle {
        action: crate::MemoryAction,
        record_id: String,
        version: u32,
        namespace: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// Memory maintenance began (`keel memory maintain`): which operations, on what.
    #[serde(
        rename = "runtime.memory.maintenance.started",
        rename_all = "camelCase"
    )]
    MemoryMaintenanceStarted {
        /// The namespace, or `*` for all.
        target: String,
        operations: Vec<String>,
    },
    /// Memory maintenance finished: how many records each operation changed.
    #[serde(
        rename = "runtime.memory.maintenance.completed",
        rename_all = "camelCase"
    )]
    MemoryMaintenanceCompleted {
        target: String,
        operation_count: u64,
        merged: u64,
        expired: u64,
    },
    /// Memory maintenance stopped with an error; what it had done stays done.
    #[serde(rename = "runtime.memory.maintenance.failed", rename_all = "camelCase")]
    MemoryMaintenanceFailed { target: String, error: String },
    /// `keel serve` loaded its workspace again (SIGHUP, `POST /api/workspace/reload`, or a
    /// watched file changed): the new workspace's digest and what changed, one
    /// `Kind/name (added|removed|changed)` each. Recorded in a run of its own (agent
    /// `workspace`).
    #[serde(rename = "runtime.workspace.reloaded", rename_all = "camelCase")]
    WorkspaceReloaded {
        digest: String,
        changes: Vec<String>,
    },
    /// The final answer did not match the agent's `output.schema`; the model is asked again
    /// with the issues while `attempt` is within `maxRetries`.
    #[serde(rename = "runtime.output.rejected", rename_all = "camelCase")]
    OutputRejected {
        attempt: u32,
        max_retries: u32,
        issues: Vec<Issue>,
    },
    #[serde(rename = "runtime.workflow.started")]
    WorkflowStarted(crate::WorkflowStarted),
    #[serde(rename = "runtime.workflow.completed")]
    WorkflowCompleted(crate::WorkflowCompleted),
    #[serde(rename = "runtime.workflow.failed")]
    WorkflowFailed(crate::WorkflowFailed),
    #[serde(rename = "runtime.workflow.node.started")]
    NodeStarted(crate::NodeStarted),
    #[serde(rename = "runtime.workflow.node.completed")]
    NodeCompleted(crate::NodeCompleted),
    #[serde(rename = "runtime.workflow.node.failed")]
    NodeFailed(crate::NodeFailed),
    #[serde(rename = "runtime.workflow.node.skipped")]
    NodeSkipped(crate::NodeSkipped),
    #[serde(rename = "runtime.specDriven.phase.started")]
    PhaseStarted(crate::PhaseEvent),
    #[serde(rename = "runtime.specDriven.phase.blocked")]
    PhaseBlocked(crate::PhaseEvent),
    #[serde(rename = "runtime.specDriven.phase.completed")]
    PhaseCompleted(crate::PhaseEvent),
    #[serde(rename = "runtime.specDriven.phase.verified")]
    PhaseVerified(crate::PhaseEvent),
    /// A derived, human-readable view of progress; never stored.
    #[serde(rename = "runtime.progress.narration", rename_all = "camelCase")]
    Narration {
        /// The sentence shown to people.
        #[serde(rename = "message", alias = "text")]
        text: String,
        /// Who wrote it: `rules` for Keel's deterministic narrator.
        #[serde(default)]
        provider: String,
        /// The `type` of each event it describes, in order.
        #[serde(default)]
        source_event_types: Vec<String>,
        source_event_ids: Vec<EventId>,
        /// How it is phrased: `brief` for one short sentence per fact.
        #[serde(default)]
        style: String,
    },
}

/// A recorded permission mode; an unknown name reads as none instead of failing the event.
fn recorded_mode<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<PermissionMode>, D::Error> {
    let name = Option::<String>::deserialize(deserializer)?;
    Ok(name.and_then(|name| name.parse().ok()))
}

impl EventPayload {
    /// The public type name of this payload.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::RequestStarted { .. } => "runtime.request.started",
            Self::RequestCompleted { .. } => "runtime.request.completed",
            Self::RequestFailed { .. } => "runtime.request.failed",
            Self::RequestCancelled { .. } => "runtime.request.cancelled",
            Self::RequestInterrupted { .. } => "runtime.request.interrupted",
            Self::RequestResumed { .. } => "runtime.request.resumed",
            Self::RequestForked { .. } => "runtime.request.forked",
            Self::ContractFailed { .. } => "runtime.execution.contract.failed",
            Self::PromptAssembled { .. } => "runtime.prompt.assembled",
            Self::ModelStarted { .. } => "runtime.model.started",
            Self::ContextCompacted { .. } => "runtime.context.compacted",
            Self::ModelCompleted { .. } => "runtime.model.completed",
            Self::ModelRetry { .. } => "runtime.model.retry",
            Self::ModelFallback { .. } => "runtime.model.fallback",
            Self::ModelQueued { .. } => "runtime.model.queued",
            Self::ToolSandbox { .. } => "runtime.tool.sandbox",
            Self::ToolGuard { .. } => "runtime.tool.guard",
            Self::Adapter { .. } => "runtime.adapter.event",
            Self::ArtifactCreated { .. } => "runtime.artifact.created",
            Self::DirectStarted { .. } => "runtime.tool.direct.started",
            Self::ApprovalRequested { .. } => "runtime.approval.requested",
            Self::ApprovalResolved { .. } => "runtime.approval.resolved",
            Self::PolicyDecided { .. } => "runtime.policy.decided",
            Self::HookCompleted { .. } => "runtime.hook.completed",
            Self::HookFailed { .. } => "runtime.hook.failed",
            Self::DirectCompleted { .. } => "runtime.tool.direct.completed",
            Self::McpLifecycle { .. } => "runtime.mcp.lifecycle",
            Self::SkillOffered { .. } => "runtime.skill.offered",
            Self::SkillInjected { .. } => "runtime.skill.injected",
            Self::SkillCandidateCreated { .. } => "runtime.skill.candidate.created",
            Self::MemoryRecallCompleted { .. } => "runtime.memory.recall.completed",
            Self::MemoryCandidateSubmitted { .. } => "runtime.memory.candidate.submitted",
            Self::MemoryApprovalRequested { .. } => "runtime.memory.approval.requested",
            Self::MemoryLifecycle { .. } => "runtime.memory.lifecycle",
            Self::MemoryMaintenanceStarted { .. } => "runtime.memory.maintenance.started",
            Self::MemoryMaintenanceCompleted { .. } => "runtime.memory.maintenance.completed",
            Self::MemoryMaintenanceFailed { .. } => "runtime.memory.maintenance.failed",
            Self::WorkspaceReloaded { .. } => "runtime.workspace.reloaded",
            Self::OutputRejected { .. } => "runtime.output.rejected",
            Self::WorkflowStarted(_) => "runtime.workflow.started",
            Self::WorkflowCompleted(_) => "runtime.workflow.completed",
            Self::WorkflowFailed(_) => "runtime.workflow.failed",
            Self::NodeStarted(_) => "runtime.workflow.node.started",
            Self::NodeCompleted(_) => "runtime.workflow.node.completed",
            Self::NodeFailed(_) => "runtime.workflow.node.failed",
            Self::NodeSkipped(_) => "runtime.workflow.node.skipped",
            Self::PhaseStarted(_) => "runtime.specDriven.phase.started",
            Self::PhaseBlocked(_) => "runtime.specDriven.phase.blocked",
            Self::PhaseCompleted(_) => "runtime.specDriven.phase.completed",
            Self::PhaseVerified(_) => "runtime.specDriven.phase.verified",
            Self::Narration { .. } => "runtime.progress.narration",
        }
    }

    /// Whether the event is a derived view that is shown live but never stored.
    pub fn is_derived(&self) -> bool {
        matches!(self, Self::Narration { .. })
    }

    /// Whether this event ends the run (`runtime.request.interrupted` ends it until it is
    /// resumed).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::RequestCompleted { .. }
                | Self::RequestFailed { .. }
                | Self::RequestCancelled { .. }
                | Self::RequestInterrupted { .. }
        )
    }

    /// Whether this event ends the run for good (terminal and not an interruption).
    pub fn is_final(&self) -> bool {
        self.is_terminal() && !matches!(self, Self::RequestInterrupted { .. })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn started(mode: Value) -> Value {
        json!({ "type": "runtime.request.started", "input": "hi", "mode": mode })
    }

    #[test]
    fn a_recorded_mode_round_trips_by_its_wire_name() {
        let payload: EventPayload = serde_json::from_value(started(json!("dontAsk"))).unwrap();
        let EventPayload::RequestStarted { mode, .. } = &payload else {
            panic!("{payload:?}");
        };
        assert_eq!(*mode, Some(PermissionMode::DontAsk));
        assert_eq!(
            serde_json::to_value(&payload).unwrap(),
            started(json!("dontAsk"))
        );
    }

    #[test]
    fn a_mode_from_a_newer_keel_still_loads_as_none() {
        let payload: EventPayload = serde_json::from_value(started(json!("yolo"))).unwrap();
        assert!(matches!(
            payload,
            EventPayload::RequestStarted { mode: None, .. }
        ));
    }

    #[test]
    fn policy_decisions_and_repair_kinds_keep_their_wire_names() {
        let decided = EventPayload::PolicyDecided {
            call_id: "c".into(),
            tool: "shell".into(),
            decision: PolicyDecision::Ask,
            source: "Policy/p rules[0]".into(),
            reason: None,
        };
        assert_eq!(serde_json::to_value(&decided).unwrap()["decision"], "ask");
        let repair = Repair {
            path: "/n".into(),
            kind: RepairKind::CoerceNumber,
            from: json!("3"),
            to: json!(3),
        };
        let json = serde_json::to_value(&repair).unwrap();
        assert_eq!(json["kind"], "coerce_number");
        assert_eq!(serde_json::from_value::<Repair>(json).unwrap(), repair);
    }
}

/// An OS sandbox as a process started in it: what it allows and what enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRecord {
    /// `workspace-write`, `read-only` or `off`.
    pub filesystem: String,
    /// `deny` or `allow`.
    pub network: String,
    /// The limits in force, e.g. `processes 256`, `memory 536870912`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
    /// What enforces it, e.g. `landlock (ABI 7)`, `seccomp`, `no_new_privs`, `rlimits`,
    /// `cgroup pids`, `process group`.
    pub mechanisms: Vec<String>,
    /// What the profile asks for and this machine cannot enforce (only with `fallback: warn`;
    /// otherwise the process is not started).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}
