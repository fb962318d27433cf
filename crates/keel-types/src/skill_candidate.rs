//! Skill candidates: a new skill an agent proposed (`propose_skill`), kept until a person
//! approves it — then it is written under `resources/skills/` — or rejects it
//! (`docs/workspace.md#skill-candidates`).

use serde::{Deserialize, Serialize};

use crate::RequestId;
use crate::wire_name::wire_names;

wire_names! {
    /// Where a candidate is in its life.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum CandidateStatus: "candidate status" {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
}

/// A proposed skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillCandidate {
    pub candidate_id: String,
    /// The skill's name (its folder's name once written).
    pub name: String,
    pub description: String,
    /// The skill's body: Markdown instructions.
    pub instructions: String,
    pub status: CandidateStatus,
    /// The run that proposed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// The agent that proposed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Why it was rejected, if a reason was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the skill was written once approved, relative to the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}
