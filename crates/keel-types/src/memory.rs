//! Long-term memory (`docs/workspace.md#memory`): records of inspectable text in namespaces,
//! with provenance and version history, and the candidates runs submit for them.
//!
//! A record is never changed in place: an update stores a new version and closes the old one
//! (`validTo`), a deletion or expiry closes the current version, and a merge (compaction)
//! closes both records and stores the merged text as a new version of the one kept, with the
//! provenance of both.

use serde::{Deserialize, Serialize};

use crate::RequestId;
use crate::wire_name::wire_names;

/// The longest text a memory record may hold, in characters (a `Memory` document may set a
/// smaller limit).
pub const MAX_MEMORY_TEXT: usize = 8_000;

wire_names! {
    /// What a record is.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum MemoryKind: "memory kind" {
        /// Something true about the world or the user.
        #[default]
        Fact = "fact",
        /// How someone likes things done.
        Preference = "preference",
        /// A standing instruction for the agent.
        Instruction = "instruction",
        /// What happened in an earlier run.
        Episode = "episode",
    }
}

wire_names! {
    /// Whether a version is the current one, and if not, what closed it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum MemoryStatus: "memory status" {
        /// The current version: recalled and searchable.
        Active = "active",
        /// Replaced by a newer version (an update or a merge).
        Superseded = "superseded",
        /// Deleted by an operator or merged into another record.
        Deleted = "deleted",
        /// Past its time to live.
        Expired = "expired",
    }
}

wire_names! {
    /// The decision a write policy gives a candidate.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum WriteDecision: "memory write policy" {
        /// Stored at once.
        Auto = "auto",
        /// Queued for a person (a durable approval); stored once approved.
        #[default]
        Approve = "approve",
        /// Refused.
        Reject = "reject",
    }
}

wire_names! {
    /// Where a candidate came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum MemorySource: "memory source" {
        /// The `remember` tool, called by a model.
        Tool = "tool",
        /// The post-run extraction of a `Memory` document.
        Extraction = "extraction",
        /// An operator (`keel memory add|update`, the API, the SDK).
        Operator = "operator",
        /// `keel memory import`.
        Import = "import",
    }
}

wire_names! {
    /// What happened to a record, as `runtime.memory.lifecycle` reports it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum MemoryAction: "memory action" {
        Stored = "stored",
        Superseded = "superseded",
        Deleted = "deleted",
        Expired = "expired",
        Merged = "merged",
    }
}

/// Where a version came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub source: MemorySource,
    /// The run that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The event of that run the candidate came from (the `remember` call's result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The tool call, for a candidate from `remember`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// When the candidate was submitted.
    pub at: String,
    /// Who approved it (`auto` under an `auto` write policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
}

/// A record a run, an operator or an import wants stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryCandidate {
    /// The resolved namespace, e.g. `users/alice`.
    pub namespace: String,
    /// The `Memory` document whose policy applies.
    pub memory: String,
    #[serde(default)]
    pub kind: MemoryKind,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub provenance: Provenance,
    /// When the record expires (from the document's `ttl`), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// One version of a memory record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRecord {
    /// The record's id, the same for all its versions.
    pub id: String,
    /// 1 for the first version.
    pub version: u32,
    pub namespace: String,
    pub memory: String,
    pub kind: MemoryKind,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub status: MemoryStatus,
    /// Where this version came from; a merged version lists every origin.
    pub provenance: Vec<Provenance>,
    /// Records merged into this version (compaction), by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// When this version became current.
    pub valid_from: String,
    /// When it stopped being current (superseded, deleted or expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Who closed it, and why (for deletions and merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_reason: Option<String>,
}

/// A recalled or searched record and how well it matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryHit {
    pub record: MemoryRecord,
    /// The full-text relevance (bm25, higher is better), when the text matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_score: Option<f64>,
    /// The cosine similarity of the embeddings, when embeddings ranked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// The score it was ranked by: the bm25 score, or the reciprocal-rank fusion of both.
    pub score: f64,
}

/// What to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryFilter {
    /// Only this namespace (exactly).
    pub namespace: Option<String>,
    /// Closed versions too (superseded, deleted, expired).
    pub all_versions: bool,
    /// In the order they were stored (as exports are) instead of newest first.
    pub oldest_first: bool,
    pub limit: Option<usize>,
}

/// A change to a record: a new version with this text, kind or tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryUpdate {
    pub text: Option<String>,
    pub kind: Option<MemoryKind>,
    pub tags: Option<Vec<String>>,
}

/// A merge of `dropped` into `kept` (compaction): `kept` gets a new version with `text` and the
/// provenance of both; `dropped` is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryMerge {
    pub kept: String,
    pub dropped: String,
    pub text: String,
    pub reason: String,
}
