//! Records tests put straight into a store, built in one place.

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus, RequestId, new_id, now_rfc3339};
use serde_json::json;

/// A pending approval of `shell ./deploy.sh` asked by the default policy's first rule, for
/// agent `agent` in run `request_id`.
pub fn approval(request_id: &RequestId, agent: &str) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: new_id("apr"),
        root_request_id: None,
        request_id: request_id.clone(),
        session_id: None,
        agent: agent.into(),
        tool: "shell".into(),
        arguments: json!({ "command": "./deploy.sh" }),
        call_id: Some("call_1".into()),
        asked_by: "Policy/default rules[0]".into(),
        ask_reason: Some("deploys need a human".into()),
        status: ApprovalStatus::Pending,
        scope: ApprovalScope::Once,
        decided_by: None,
        decided_at: None,
        decision_reason: None,
        created_at: now_rfc3339(),
        memory: None,
        memory_record: None,
    }
}
