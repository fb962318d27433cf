//! The Runtime document's `skills` settings.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// Skill sources and budgets (`docs/workspace.md#skills`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SkillsSettings {
    /// Folders of skill folders besides the workspace's `resources/skills/` (relative paths
    /// from the workspace), e.g. a team's shared skills.
    pub roots: Vec<SkillRootSpec>,
    /// The most characters of the skill catalogue in an agent's prompt (names and
    /// descriptions); skills past it are left out, and the run records which.
    pub catalogue_chars: u32,
    /// The most characters of one injected skill body; a longer body is cut, with a note.
    pub body_chars: u32,
    /// The most bytes `read_skill_resource` reads from one file.
    pub max_resource_bytes: u64,
    /// How often the skill folders are checked for changes (`0s`: never, after the load).
    pub refresh_interval: Duration,
}

impl Default for SkillsSettings {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            catalogue_chars: 8_000,
            body_chars: 20_000,
            max_resource_bytes: 256 * 1024,
            refresh_interval: Duration::from_secs(1),
        }
    }
}

/// A folder of skill folders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillRootSpec {
    pub path: String,
    /// Its skills replace same-named skills of the other roots (otherwise the same name in
    /// two roots is an error).
    #[serde(default, rename = "override")]
    pub overrides: bool,
}
