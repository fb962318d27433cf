//! Refusals both stores word the same way: a second decision of an approval or a skill
//! candidate names the first.

use keel_types::{ApprovalRecord, SkillCandidate, StoreError};

/// A decision of approval `id` refused: it was decided already (by whom, when), or is unknown.
pub(crate) fn approval_decided(id: &str, current: Option<&ApprovalRecord>) -> StoreError {
    StoreError::Invalid(match current {
        Some(current) => format!(
            "approval `{id}` was already {} by {} at {}",
            current.status.as_str(),
            current.decided_by.as_deref().unwrap_or("someone"),
            current.decided_at.as_deref().unwrap_or("an earlier time"),
        ),
        None => format!("no approval `{id}`"),
    })
}

/// A decision of skill candidate `id` refused: decided already, or unknown.
pub(crate) fn candidate_decided(id: &str, current: Option<&SkillCandidate>) -> StoreError {
    StoreError::Invalid(match current {
        Some(current) => format!(
            "skill candidate `{id}` was already {} by {} at {}",
            current.status.as_str(),
            current.decided_by.as_deref().unwrap_or("someone"),
            current.decided_at.as_deref().unwrap_or("an earlier time"),
        ),
        None => format!("no skill candidate `{id}`"),
    })
}
