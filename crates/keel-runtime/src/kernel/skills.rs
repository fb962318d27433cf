//! Skills as their callers see them (`Runtime::skills()` in the SDK, `keel skills`,
//! `/api/skills`): the latest scan, the task that keeps it current, and the skill candidates
//! agents propose with `propose_skill`, waiting for a person.

use std::path::Path;
use std::sync::Arc;

use keel_types::{CandidateStatus, RunStore, SkillCandidate};
use keel_workspace::skills::SkillSet;

use super::Kernel;
use crate::RuntimeError;

/// The skills of a runtime. Cheap to clone.
#[derive(Clone)]
pub struct Skills {
    kernel: Kernel,
}

impl Kernel {
    /// The skills of this runtime.
    pub fn skills(&self) -> Skills {
        Skills {
            kernel: self.clone(),
        }
    }
}

impl Skills {
    /// The skills of the latest scan.
    pub fn current(&self) -> Arc<SkillSet> {
        self.kernel.workspace().skills.current()
    }

    /// Starts the task that keeps the skills current, once per workspace: it checks the
    /// skill folders every `skills.refreshInterval` and scans them again when a skill's files
    /// changed, so a long-running service offers new and edited skills without a restart.
    /// `keel serve` calls it at boot; the first request through the SDK does too, and a
    /// reload for the new workspace. Needs a Tokio runtime (without one it does nothing);
    /// `0s` turns it off.
    pub fn watch(&self) {
        let current = self.kernel.current();
        let workspace = &current.services.workspace;
        let interval = workspace.runtime.skills.refresh_interval.0;
        if interval.is_zero() || workspace.skills.roots().is_empty() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let library = Arc::downgrade(&workspace.skills);
            current
                .skill_watch
                .call_once(|| drop(handle.spawn(crate::skills::watch(library, interval))));
        }
    }

    /// Candidates, newest first, optionally only those with `status`.
    pub async fn candidates(
        &self,
        status: Option<CandidateStatus>,
    ) -> Result<Vec<SkillCandidate>, RuntimeError> {
        Ok(self.store().list_skill_candidates(status).await?)
    }

    /// One candidate.
    pub async fn candidate(&self, id: &str) -> Result<Option<SkillCandidate>, RuntimeError> {
        Ok(self.store().get_skill_candidate(id).await?)
    }

    /// Approves a pending candidate: writes `resources/skills/<name>/SKILL.md` (front matter
    /// and instructions), records the decision, and scans the skills again, so the next run
    /// can use it. Refused when the candidate is not pending or a skill of that name exists;
    /// if writing fails the candidate stays pending.
    pub async fn approve(
        &self,
        id: &str,
        decided_by: &str,
    ) -> Result<SkillCandidate, RuntimeError> {
        let candidate = self.pending_candidate(id).await?;
        let workspace = self.kernel.workspace();
        if let Some(skill) = workspace.skills.current().get(&candidate.name) {
            return Err(conflict(format!(
                "a skill `{}` exists already ({}); reject the candidate or rename that skill",
                candidate.name,
                skill.file.display()
            )));
        }
        let relative = format!("resources/skills/{}", candidate.name);
        let dir = workspace.root.join(&relative);
        write_skill(&dir, &candidate)?;
        let decided = self
            .store()
            .decide_skill_candidate(
                id,
                CandidateStatus::Approved,
                decided_by,
                None,
                Some(&relative),
            )
            .await;
        let decided = match decided {
            Ok(decided) => decided,
            Err(error) => {
                // Decided elsewhere meanwhile: what this call wrote goes.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(conflict(error.to_string()));
            }
        };
        workspace.skills.rescan();
        Ok(decided)
    }

    /// Rejects a pending candidate; nothing is written.
    pub async fn reject(
        &self,
        id: &str,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<SkillCandidate, RuntimeError> {
        self.pending_candidate(id).await?;
        self.store()
            .decide_skill_candidate(id, CandidateStatus::Rejected, decided_by, reason, None)
            .await
            .map_err(|error| conflict(error.to_string()))
    }

    fn store(&self) -> &Arc<dyn RunStore> {
        self.kernel.store()
    }

    async fn pending_candidate(&self, id: &str) -> Result<SkillCandidate, RuntimeError> {
        let candidate = self
            .store()
            .get_skill_candidate(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no skill candidate `{id}`")))?;
        if candidate.status != CandidateStatus::Pending {
            return Err(conflict(format!(
                "skill candidate `{id}` was already {} by {} at {}",
                candidate.status.as_str(),
                candidate.decided_by.as_deref().unwrap_or("someone"),
                candidate.decided_at.as_deref().unwrap_or("an earlier time"),
            )));
        }
        Ok(candidate)
    }
}

fn conflict(message: String) -> RuntimeError {
    RuntimeError::Conflict(message)
}

/// Creates the skill's folder (which must not exist: of two approvals, one creates it) and
/// its `SKILL.md`, written to a temporary file first and renamed into place.
fn write_skill(dir: &Path, candidate: &SkillCandidate) -> Result<(), RuntimeError> {
    let failed = |what: &str, e: std::io::Error| {
        RuntimeError::Internal(format!("cannot {what} {}: {e}", dir.display()))
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| failed("create the folder of", e))?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(conflict(format!(
                "{} exists already; reject the candidate or move that folder",
                dir.display()
            )));
        }
        Err(e) => return Err(failed("create", e)),
    }
    // JSON strings are YAML double-quoted scalars: any description round-trips.
    let text = format!(
        "---\nname: {}\ndescription: {}\n---\n{}\n",
        candidate.name,
        serde_json::Value::from(candidate.description.as_str()),
        candidate.instructions.trim_end()
    );
    let temporary = dir.join(".SKILL.md.tmp");
    let written = std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, dir.join("SKILL.md")));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(dir);
        return Err(failed("write the skill into", e));
    }
    Ok(())
}
