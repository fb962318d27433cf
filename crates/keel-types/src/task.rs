//! Tasks: staged tool calls for operators, CI and external AIs
//! (`docs/tool-gateway.md#tasks-and-direct-calls`). A task is created (the call passes the
//! gateway's checks, policy and `PreToolUse` hooks and gets a decision), may be inspected and updated (re-checked), is run (as a
//! run of its own, with `runtime.tool.direct.*` events) and deleted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::RequestId;
use crate::event::{Issue, Repair};
use crate::wire_name::wire_names;

/// What the gateway decided about a task's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskDecision {
    /// The call may run.
    Allow,
    /// The call is blocked; `issues` says why.
    Deny,
    /// A human must approve it first (governance).
    NeedsApproval,
}

wire_names! {
    /// Where a task is in its life.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum TaskStatus: "task status" {
        Created = "created",
        Running = "running",
        Completed = "completed",
        Failed = "failed",
    }
}

/// A staged tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    pub task_id: String,
    /// The agent whose inventory and settings apply.
    pub agent: String,
    /// The tool as requested.
    pub requested_tool: String,
    /// The tool that runs (the requested name, or what the gateway repaired it to).
    pub tool: String,
    /// The arguments as they will run (repaired when the gateway repaired them).
    pub arguments: Value,
    pub decision: TaskDecision,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<Repair>,
    /// Why the decision is `deny` or `needs_approval` when policy or a hook said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What each `PreToolUse` hook answered when the task was created (or updated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<TaskHook>,
    /// The permission decision the hooks gave together at create (deny > ask > allow); it
    /// stands at `run` unless the hooks run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_decision: Option<crate::PolicyDecision>,
    /// Whether `run` runs the `PreToolUse` hooks again (the request or the tool asked for
    /// it); otherwise their answers at create stand.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub double_check_on_run: bool,
    /// The permission mode the call is checked under, at create and when it runs (the
    /// agent's own when the request set none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::PermissionMode>,
    pub status: TaskStatus,
    /// The run that executed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// What one `PreToolUse` hook answered about a task's call at create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskHook {
    pub hook: String,
    /// What it said (as in `runtime.hook.completed`), or `failed` with `error` set.
    pub outcome: String,
    /// The reason it gave for a deny, an ask or a block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it failed, and its `onError` applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Usage telemetry of one tool, from the recorded events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStats {
    pub tool: String,
    /// Calls that ran.
    pub calls: u64,
    /// Calls that ran and failed.
    pub errors: u64,
    /// Calls the gateway repaired.
    pub repairs: u64,
    /// Calls the gateway blocked.
    pub blocks: u64,
    pub latency_p50_ms: u64,
    pub latency_p99_ms: u64,
}
