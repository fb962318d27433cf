//! The agent signals of `runtime.adapter.event`: what an agent's loop — Keel's own, or a
//! process-backed agent's program — reports of its output, its tool calls, delegation,
//! progress and logs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::RequestId;

/// The `adapter` of the agent signals Keel's own agent loop emits.
pub const NATIVE_ADAPTER: &str = "native";

fn native_adapter() -> String {
    NATIVE_ADAPTER.to_owned()
}

/// Agent signals, wrapped in `runtime.adapter.event` and told apart by `phase`.
///
/// Field names follow the seed contract (`adapter`, `toolId`, `args`, `error`); logs written
/// before that (`tool`, `arguments`, no `adapter`) still load, as the native loop's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum AdapterEvent {
    /// More answer text from the model.
    #[serde(rename = "agent.output.delta")]
    OutputDelta {
        /// The agent runtime that produced it: [`NATIVE_ADAPTER`] for Keel's own loop.
        #[serde(default = "native_adapter")]
        adapter: String,
        step: u32,
        text: String,
    },
    /// A tool call passed the gateway and starts executing.
    #[serde(rename = "agent.tool.start", rename_all = "camelCase")]
    ToolStart {
        #[serde(default = "native_adapter")]
        adapter: String,
        /// Pairs the start with its result.
        call_id: String,
        /// The tool's id (its name).
        #[serde(rename = "toolId", alias = "tool")]
        tool: String,
        #[serde(rename = "args", alias = "arguments")]
        arguments: Value,
    },
    /// A running tool call reported progress (an MCP server's `notifications/progress`).
    #[serde(rename = "agent.tool.progress", rename_all = "camelCase")]
    ToolProgress {
        #[serde(default = "native_adapter")]
        adapter: String,
        call_id: String,
        #[serde(rename = "toolId", alias = "tool")]
        tool: String,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A tool call finished (successfully or not).
    #[serde(rename = "agent.tool.result", rename_all = "camelCase")]
    ToolResult {
        #[serde(default = "native_adapter")]
        adapter: String,
        call_id: String,
        #[serde(rename = "toolId", alias = "tool")]
        tool: String,
        ok: bool,
        /// What the model receives as the result.
        output: String,
        /// `null` on success; on failure the error text (the same as `output`).
        #[serde(default)]
        error: Option<String>,
        duration_ms: u64,
    },
    /// The run delegated to a subagent (`task`): the child run that answers the call.
    #[serde(rename = "agent.handoff", rename_all = "camelCase")]
    Handoff {
        #[serde(default = "native_adapter")]
        adapter: String,
        call_id: String,
        /// The subagent.
        agent: String,
        child_request_id: RequestId,
    },
    /// A process-backed agent's program reported progress: a JSON line on its stdout of
    /// `type` `progress`, `event` or `plan` (`docs/adapters.md`), its payload as written.
    #[serde(rename = "agent.progress", rename_all = "camelCase")]
    Progress {
        #[serde(default = "native_adapter")]
        adapter: String,
        /// `progress`, `event` or `plan`.
        kind: String,
        data: Value,
    },
    /// A line a process-backed agent's program wrote outside the protocol (stderr, or
    /// stdout that is not a protocol line); a run keeps a bounded number of them.
    #[serde(rename = "agent.log", rename_all = "camelCase")]
    Log {
        #[serde(default = "native_adapter")]
        adapter: String,
        /// `stdout` or `stderr`.
        stream: String,
        line: String,
    },
}
