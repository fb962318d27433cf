//! The payloads of workflow and spec-driven events (`runtime.workflow.*`,
//! `runtime.specDriven.phase.*`), kept apart from [`crate::event`] so each stays readable.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::RequestId;

/// `runtime.workflow.started`: a workflow run began with this input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStarted {
    pub workflow: String,
    /// The input as the nodes' templates see it (`input`).
    pub input: Value,
}

/// `runtime.workflow.completed`: every reachable node was resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowCompleted {
    pub workflow: String,
    pub output: Value,
}

/// `runtime.workflow.failed`: a node failed after its retries, an approval was denied, or a
/// gate blocked; `node` names it when one did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowFailed {
    pub workflow: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub error: String,
}

/// Which execution of a node an event is about: a loop's `iteration` (from 1) and, inside a
/// `map` node, the `item`'s index.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub struct NodeKey {
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
}

impl NodeKey {
    /// `{prefix}:{node}#{iteration}[.{item}]@{attempt}`: the key a node's attempt is found by
    /// again — its child run's `links.parentCall`, and the key of its span (`trace`).
    pub fn call_key(self, prefix: &str, node: &str, attempt: u32) -> String {
        let item = self.item.map(|i| format!(".{i}")).unwrap_or_default();
        format!("{prefix}:{node}#{}{item}@{attempt}", self.iteration)
    }
}

/// `runtime.workflow.node.started`: a node (or one item of a `map`) starts an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStarted {
    pub node: String,
    /// `agent`, `tool`, `workflow`, `approval`, `map` or `join`.
    pub kind: String,
    #[serde(flatten)]
    pub key: NodeKey,
    pub attempt: u32,
    /// The node's rendered input (an agent's prompt, a tool's arguments, a nested workflow's
    /// input, a `map`'s items).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input: Value,
    /// The run that executes it (agent, tool and workflow nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_request_id: Option<RequestId>,
}

/// `runtime.workflow.node.completed`: a node's output, which later nodes and edge conditions
/// read; a resumed workflow takes it from here instead of running the node again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCompleted {
    pub node: String,
    #[serde(flatten)]
    pub key: NodeKey,
    pub output: Value,
    pub duration_ms: u64,
}

/// `runtime.workflow.node.failed`: one attempt failed; `willRetry` says whether another
/// follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFailed {
    pub node: String,
    #[serde(flatten)]
    pub key: NodeKey,
    pub attempt: u32,
    pub error: String,
    pub will_retry: bool,
}

/// `runtime.workflow.node.skipped`: no edge into the node was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSkipped {
    pub node: String,
    #[serde(flatten)]
    pub key: NodeKey,
    pub reason: String,
}

/// `runtime.specDriven.phase.started|blocked|completed|verified`: a phase of a spec-driven
/// workflow began, had its gate refuse (`reason`), finished its nodes, or passed its gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseEvent {
    pub phase: String,
    /// The gate's kind: `command`, `agent` or `approval` (`none` without a gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
