//! `kind: Memory` — a namespace of long-term memory, who reads and writes it, how recall
//! works and what a write needs (`docs/workspace.md#memory`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// A `Memory` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySpec {
    /// The namespace as a template over the request: `{agent}`, `{session}` and
    /// `{metadata.KEY}` (request metadata), e.g. `users/{metadata.user}`.
    pub namespace: String,
    /// Agents (names or globs) whose runs recall from this memory and may search it.
    #[serde(default)]
    pub readers: Vec<String>,
    /// Agents (names or globs) that may submit records (`remember`).
    #[serde(default)]
    pub writers: Vec<String>,
    /// What a submitted record needs: stored at once (`auto`), a person's approval
    /// (`approve`, the default) or nothing at all (`reject`).
    #[serde(default)]
    pub write: WritePolicy,
    #[serde(default)]
    pub recall: RecallSpec,
    /// How long a record lives (e.g. `90d`); none: until deleted.
    #[serde(default)]
    pub ttl: Option<Duration>,
    /// The most characters one record may hold (at most 8000).
    #[serde(default = "default_max_chars")]
    pub max_chars: u32,
    /// Rank recall by embeddings too (hybrid: full-text and cosine similarity, fused by
    /// reciprocal rank).
    #[serde(default)]
    pub embeddings: Option<EmbeddingsSpec>,
    /// After each completed run of a writer, ask this model for candidates from the
    /// conversation (a run of its own; the answer never waits for it).
    #[serde(default)]
    pub extraction: Option<ExtractionSpec>,
}

/// Post-run extraction of memory candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtractionSpec {
    /// A `Model` document.
    pub model: String,
    /// The most candidates taken from one run.
    #[serde(default = "default_max_candidates")]
    pub max_candidates: u32,
}

fn default_max_candidates() -> u32 {
    5
}

fn default_max_chars() -> u32 {
    2_000
}

/// A `Memory` document's write policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WritePolicy {
    Auto,
    #[default]
    Approve,
    Reject,
}

impl From<WritePolicy> for keel_types::WriteDecision {
    fn from(policy: WritePolicy) -> Self {
        match policy {
            WritePolicy::Auto => Self::Auto,
            WritePolicy::Approve => Self::Approve,
            WritePolicy::Reject => Self::Reject,
        }
    }
}

/// How records are recalled into a run's prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RecallSpec {
    /// Recall before the first model round (`read-before-plan`).
    pub enabled: bool,
    /// The most records recalled.
    pub top_k: u32,
    /// The most characters of recalled text in the prompt; records past it are left out
    /// (and counted in `runtime.memory.recall.completed`).
    pub max_chars: u32,
    /// The least full-text relevance (bm25, higher is better) a record needs.
    pub min_score: f64,
}

impl Default for RecallSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            top_k: 5,
            max_chars: 2_000,
            min_score: 0.0,
        }
    }
}

/// The embeddings model of a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddingsSpec {
    /// A `Model` document (provider `openai`) whose endpoint serves `/embeddings`.
    pub model: String,
    /// The least cosine similarity a record needs to be ranked by its embedding.
    #[serde(default)]
    pub min_similarity: f64,
}
