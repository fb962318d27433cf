//! Approvals: a pending human decision on a gated action (a tool call a policy rule or a hook
//! said to ask about). Decided exactly once — from the CLI, the API or another process.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire_name::wire_names;
use crate::{RequestId, SessionId};

wire_names! {
    /// Where an approval is in its life.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ApprovalStatus: "approval status" {
        Pending = "pending",
        Approved = "approved",
        Denied = "denied",
        /// Nobody decided within the configured timeout (counts as denied).
        Expired = "expired",
    }
}

/// How far an approval reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This call only.
    #[default]
    Once,
    /// Calls of the same tool for the rest of the session.
    Session,
}

/// A gated action waiting for (or having had) a human decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    pub approval_id: String,
    pub request_id: RequestId,
    /// The first run of the tree when the asking run is a subagent's or a workflow node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_request_id: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    pub agent: String,
    pub tool: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// What asked: a policy rule (`Policy/default rules[1]`) or a hook (`Hook/review`).
    pub asked_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_reason: Option<String>,
    pub status: ApprovalStatus,
    #[serde(default)]
    pub scope: ApprovalScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_reason: Option<String>,
    pub created_at: String,
    /// For a memory write a write policy sent for approval: the candidate. Approving it
    /// stores the record (in the same transaction as the decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Box<crate::MemoryCandidate>>,
    /// The memory record an approved candidate became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_record: Option<String>,
}

impl ApprovalRecord {
    /// A pending approval that run `run` asks for its call `call_id` (a tool call, or a
    /// workflow's approval node or gate): linked to the run, its session and its root.
    pub fn pending(
        run: &crate::RunRecord,
        call_id: &str,
        tool: String,
        arguments: Value,
        asked_by: &str,
        ask_reason: Option<String>,
    ) -> Self {
        Self {
            approval_id: crate::new_id("apr"),
            request_id: run.request_id.clone(),
            root_request_id: run.links.root_id.clone(),
            session_id: run.session_id.clone(),
            agent: run.agent.clone(),
            tool,
            arguments,
            call_id: Some(call_id.to_owned()),
            asked_by: asked_by.to_owned(),
            ask_reason,
            status: ApprovalStatus::Pending,
            scope: ApprovalScope::Once,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            created_at: crate::now_rfc3339(),
            memory: None,
            memory_record: None,
        }
    }
}
