//! Keel's vocabulary: the wire types, events, typed errors and ports that every other crate
//! shares.
//!
//! This crate is deliberately logic-free and dependency-light (serde, ids and time; no tokio, no
//! HTTP, no database). Start with [`event`] for the public event contract, [`run`] for the run
//! record, [`governance`] for permission modes, policy decisions and hook events, and [`ports`]
//! for the traits concrete providers, tools and stores implement.
//!
//! The optional `schemars` feature derives `JsonSchema` for the types the workspace's schemas
//! and the HTTP API's OpenAPI document describe (it adds no logic).

pub mod approval;
pub mod cassette;
pub mod cluster;
pub mod cost;
pub mod error;
pub mod eval;
pub mod event;
pub mod governance;
pub mod ids;
pub mod memory;
pub mod message;
pub mod ports;
pub mod run;
pub mod skill_candidate;
pub mod source;
pub mod task;
pub mod trace;
mod wire_name;
pub mod workflow;

pub use approval::{ApprovalRecord, ApprovalScope, ApprovalStatus};
pub use cluster::{Claimed, Cluster, ClusterStatus, Lease, Signal, SignalSink};
pub use error::error_chain;
pub use event::{
    AdapterEvent, Event, EventPayload, GuardDecision, Issue, NATIVE_ADAPTER, PromptSection, Repair,
    RepairKind, SandboxRecord, SkillReason,
};
pub use governance::{HookEvent, HookOnError, PermissionMode, PolicyDecision};
pub use ids::{EventId, InvalidSessionId, RequestId, SessionId, new_id};
pub use memory::{
    MAX_MEMORY_TEXT, MemoryAction, MemoryCandidate, MemoryFilter, MemoryHit, MemoryKind,
    MemoryMerge, MemoryRecord, MemorySource, MemoryStatus, MemoryUpdate, Provenance, WriteDecision,
};
pub use message::{
    Message, ModelEvent, ModelParams, ModelRequest, ModelStopReason, Role, Thinking, ToolCall,
    ToolSpec, Usage,
};
pub use ports::{
    ARTIFACT_URI_PREFIX, ApprovalStore, ArtifactRecord, ArtifactStore, Attachment, BoxStream,
    Embedder, EvalStore, EventObserver, MemoryStore, ModelError, ModelProvider, ModelStream,
    ProgressSink, RunFilter, RunLog, RunStore, SeenFiles, SessionStore, SkillCandidateStore,
    StoreError, StoreHealth, TaskStore, TextFiles, Tool, ToolContext, ToolError, ToolOutput,
    ToolProgress, artifact_id, artifact_id_problem, check_run_of,
};
pub use run::{
    ErrorCode, ErrorInfo, FinishReason, RunCursor, RunLinks, RunRecord, RunStatus, SessionMessage,
    SessionOwner, SessionRecord, SessionSummary, WORKFLOW_PREFIX,
};
pub use skill_candidate::{CandidateStatus, SkillCandidate};
pub use source::SourceLifecycle;
pub use task::{TaskDecision, TaskHook, TaskRecord, TaskStatus, ToolStats};
pub use trace::{RunTrace, SpanId, TraceContextError, TraceId, TraceParent};
pub use wire_name::UnknownName;
pub use workflow::{
    NodeCompleted, NodeFailed, NodeKey, NodeSkipped, NodeStarted, PhaseEvent, WorkflowCompleted,
    WorkflowFailed, WorkflowStarted,
};

const TIMESTAMP: &[time::format_description::BorrowedFormatItem<'static>] = time::macros::format_description!(
    "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
);

/// The current time as an RFC 3339 string in UTC with exactly three fractional digits, e.g.
/// `2026-11-22T12:00:00.120Z` (fixed width, so timestamps sort as text).
pub fn now_rfc3339() -> String {
    timestamp(time::OffsetDateTime::now_utc())
}

/// The time `seconds` ago, in the [`now_rfc3339`] format (a `since` for store filters).
pub fn rfc3339_ago(seconds: u64) -> String {
    let ago = time::Duration::seconds(i64::try_from(seconds).unwrap_or(i64::MAX));
    timestamp(
        time::OffsetDateTime::now_utc()
            .checked_sub(ago)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH),
    )
}

/// `t` in the [`now_rfc3339`] format. Written digit by digit: every event gets a timestamp,
/// and the general formatter costs several times as much.
fn timestamp(t: time::OffsetDateTime) -> String {
    let Ok(year) = u32::try_from(t.year()) else {
        return t.format(TIMESTAMP).unwrap_or_default();
    };
    if year > 9999 {
        return t.format(TIMESTAMP).unwrap_or_default();
    }
    let mut out = String::with_capacity(24);
    push_digits(&mut out, year, 4);
    for (separator, value, width) in [
        ('-', u32::from(u8::from(t.month())), 2),
        ('-', u32::from(t.day()), 2),
        ('T', u32::from(t.hour()), 2),
        (':', u32::from(t.minute()), 2),
        (':', u32::from(t.second()), 2),
        ('.', u32::from(t.millisecond()), 3),
    ] {
        out.push(separator);
        push_digits(&mut out, value, width);
    }
    out.push('Z');
    out
}

/// Appends `value` as exactly `width` decimal digits (zero-padded).
fn push_digits(out: &mut String, value: u32, width: u32) {
    for place in (0..width).rev() {
        let digit = value / 10u32.pow(place) % 10;
        out.push(char::from_digit(digit, 10).unwrap_or('0'));
    }
}

/// The time `ahead` after now, in the same format as [`now_rfc3339`].
pub fn time_after(ahead: std::time::Duration) -> String {
    let now = time::OffsetDateTime::now_utc();
    let then = time::Duration::try_from(ahead)
        .ok()
        .and_then(|ahead| now.checked_add(ahead))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(365 * 8000));
    timestamp(then)
}

/// The time `ago` before now, in the same format as [`now_rfc3339`].
pub fn time_before(ago: std::time::Duration) -> String {
    let now = time::OffsetDateTime::now_utc();
    let then = time::Duration::try_from(ago)
        .ok()
        .and_then(|ago| now.checked_sub(ago))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    timestamp(then)
}

/// `text` on one line for a table or a summary: control characters (newlines, tabs) become
/// spaces, and past `max` characters it is cut with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// `bytes` as lowercase hexadecimal, two digits a byte (digests, keys, ids).
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(to_hex(&[]), "");
        assert_eq!(to_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(to_hex(&all), expected);
    }

    #[test]
    fn timestamps_match_the_general_formatter_digit_for_digit() {
        let now = time::OffsetDateTime::now_utc();
        let times = [
            now,
            time::OffsetDateTime::UNIX_EPOCH,
            time::macros::datetime!(2026-11-22 12:00:00.120 UTC),
            time::macros::datetime!(2026-01-09 03:04:05.999 UTC),
            time::macros::datetime!(0999-12-31 23:59:59.001 UTC),
            time::macros::datetime!(9999-12-31 23:59:59.999 UTC),
        ];
        for t in times {
            assert_eq!(timestamp(t), t.format(TIMESTAMP).unwrap(), "{t}");
        }
        assert_eq!(now_rfc3339().len(), 24);
    }
}
