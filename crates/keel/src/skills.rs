//! The runtime's skills: the latest scan, and the task that keeps it current.

use std::sync::Arc;

use keel_workspace::skills::SkillSet;

use crate::Runtime;

impl Runtime {
    /// The skills of the latest scan.
    pub fn skills(&self) -> Arc<SkillSet> {
        self.workspace().skills.current()
    }

    /// Starts the task that keeps the skills current, once per runtime: it checks the skill
    /// folders every `skills.refreshInterval` and scans them again when a skill's files
    /// changed, so a long-running service offers new and edited skills without a restart.
    /// `keel serve` calls it at boot; the first request through the SDK does too. Needs a
    /// Tokio runtime; `0s` turns it off.
    pub fn watch_skills(&self) {
        self.kernel.watch_skills();
    }
}
