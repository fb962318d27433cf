//! `context:` — how a run keeps its prompt within its model's context window
//! (`Model.contextWindow`): when the prompt's estimated size passes `compactAt` of the window,
//! old tool results are elided, then the oldest rounds summarized.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One way of making room, tried in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompactStep {
    /// Replace old tool results by a stub naming the call (its full text stays in the log).
    Elide,
    /// Summarize the oldest rounds into one message.
    Summarize,
}

/// Context-window management, on the Runtime and per Agent (an agent's replaces the
/// runtime's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ContextSpec {
    /// Compact when the prompt passes this fraction of the model's `contextWindow`.
    #[schemars(range(min = 0.1, max = 1.0))]
    pub compact_at: f64,
    /// Rounds (an answer and its tool results) at the end kept word for word.
    pub keep_recent: u32,
    /// The `Model` that writes summaries (default: the agent's own).
    pub summarizer: Option<String>,
    /// What compaction does, in order.
    pub strategy: Vec<CompactStep>,
}

impl Default for ContextSpec {
    fn default() -> Self {
        Self {
            compact_at: 0.8,
            keep_recent: 4,
            summarizer: None,
            strategy: vec![CompactStep::Elide, CompactStep::Summarize],
        }
    }
}
