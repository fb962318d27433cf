//! Redaction of everything stored besides events (`docs/events.md#redaction`): the kernel's
//! store is a [`RedactingStore`], which passes each record it writes — a run record, a
//! session's transcript, an approval, a task — through the `redact_*` functions of the current workspace's [`Redactor`] before the store underneath sees it.
//! Events pass through untouched: the emission pipeline redacted them already.
//!
//! The caller keeps its own, unredacted copy: a run's prompt is built from what it holds in
//! memory, and only what is stored (and so shown by `keel runs show`, the API, the console)
//! is redacted. What is rebuilt from the store — a session's next turn, a resumed run, a
//! staged task — sees the redacted text, as a resumed run already saw it in its events.

use keel_types::{ApprovalStore, EvalStore, RunLog, SessionStore, SkillCandidateStore, TaskStore};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, CandidateStatus, Event, Message, RequestId,
    RunFilter, RunRecord, RunStatus, RunStore, SessionId, SessionMessage, SessionRecord,
    SkillCandidate, StoreError, StoreHealth, TaskRecord, ToolStats, eval::EvalResult,
};

use crate::redact::{Redactor, digest_message};

impl Redactor {
    /// A run record as it may be stored: input, output, value and error message redacted.
    pub fn redact_run(&self, run: &mut RunRecord) {
        self.redact_str(&mut run.input);
        if let Some(output) = &mut run.output {
            self.redact_str(output);
        }
        if let Some(value) = &mut run.value {
            self.redact_value(value);
        }
        if let Some(error) = &mut run.error {
            self.redact_str(&mut error.message);
        }
    }

    /// A transcript message as it may be stored: written contents digested, text redacted.
    pub fn redact_message(&self, message: &mut Message) {
        digest_message(message);
        self.redact_str(&mut message.content);
        for call in &mut message.tool_calls {
            self.redact_str(&mut call.arguments);
        }
    }

    /// An approval as it may be stored: arguments and reasons redacted. Written contents
    /// stay whole: they are what the human approves (the `runtime.approval.requested` event
    /// records their digest).
    pub fn redact_approval(&self, approval: &mut ApprovalRecord) {
        self.redact_value(&mut approval.arguments);
        [&mut approval.ask_reason, &mut approval.decision_reason]
            .into_iter()
            .flatten()
            .for_each(|reason| self.redact_str(reason));
    }

    /// A task as it may be stored: arguments, reasons and output redacted. Written contents
    /// stay whole: a staged task is run from its stored arguments.
    pub fn redact_task(&self, task: &mut TaskRecord) {
        self.redact_value(&mut task.arguments);
        if let Some(reason) = &mut task.reason {
            self.redact_str(reason);
        }
        for issue in &mut task.issues {
            self.redact_str(&mut issue.found);
            self.redact_str(&mut issue.message);
        }
        for repair in &mut task.repairs {
            self.redact_value(&mut repair.from);
            self.redact_value(&mut repair.to);
        }
        if let Some(output) = &mut task.output {
            self.redact_str(output);
        }
    }
}

/// A [`RunStore`] that redacts every record before the store underneath writes it, with the
/// redactor of the workspace current when it writes (a reload swaps it).
pub struct RedactingStore {
    inner: Arc<dyn RunStore>,
    redactor: RwLock<Arc<Redactor>>,
}

impl RedactingStore {
    /// Wraps `inner`; it redacts nothing until [`set_redactor`](Self::set_redactor).
    pub fn new(inner: Arc<dyn RunStore>) -> Self {
        Self {
            inner,
            redactor: RwLock::default(),
        }
    }

    /// Redacts with `redactor` from now on.
    pub fn set_redactor(&self, redactor: Arc<Redactor>) {
        match self.redactor.write() {
            Ok(mut slot) => *slot = redactor,
            Err(poisoned) => *poisoned.into_inner() = redactor,
        }
    }

    fn redactor(&self) -> Arc<Redactor> {
        match self.redactor.read() {
            Ok(slot) => slot.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn run(&self, run: &RunRecord) -> RunRecord {
        let mut run = run.clone();
        self.redactor().redact_run(&mut run);
        run
    }
}

#[async_trait]
impl RunLog for RedactingStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.inner.create_run(&self.run(run)).await
    }

    fn log_path(&self, id: &RequestId) -> Option<PathBuf> {
        self.inner.log_path(id)
    }

    async fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        self.inner.append(events).await
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.inner.update_run(&self.run(run)).await
    }

    async fn create_run_with(&self, run: &RunRecord, events: &[Event]) -> Result<(), StoreError> {
        self.inner.create_run_with(&self.run(run), events).await
    }

    async fn append_and_update(&self, events: &[Event], run: &RunRecord) -> Result<(), StoreError> {
        self.inner.append_and_update(events, &self.run(run)).await
    }

    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        self.inner.get_run(id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.list_runs(filter).await
    }

    async fn run_counts(&self) -> Result<Vec<(RunStatus, u64)>, StoreError> {
        self.inner.run_counts().await
    }

    async fn started_by_minute(
        &self,
        since: &str,
    ) -> Result<Vec<(String, RunStatus, u64)>, StoreError> {
        self.inner.started_by_minute(since).await
    }

    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError> {
        self.inner.events(id, after).await
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        self.inner.recover().await
    }

    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError> {
        self.inner.claim(id).await
    }

    async fn prune(&self, before: &str) -> Result<u64, StoreError> {
        self.inner.prune(before).await
    }

    async fn tool_stats(&self) -> Result<Vec<ToolStats>, StoreError> {
        self.inner.tool_stats().await
    }

    fn cluster(&self) -> Option<Arc<dyn keel_types::Cluster>> {
        self.inner.cluster()
    }

    async fn health(&self) -> Result<StoreHealth, StoreError> {
        self.inner.health().await
    }
}

#[async_trait]
impl SessionStore for RedactingStore {
    async fn ensure_session(
        &self,
        id: &SessionId,
        agent: &str,
        owner: &keel_types::SessionOwner,
    ) -> Result<SessionRecord, StoreError> {
        self.inner.ensure_session(id, agent, owner).await
    }

    async fn get_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.get_session(id).await
    }

    async fn list_sessions(&self, limit: Option<usize>) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.list_sessions(limit).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.inner.delete_session(id).await
    }

    async fn session_messages(&self, id: &SessionId) -> Result<Vec<SessionMessage>, StoreError> {
        self.inner.session_messages(id).await
    }

    async fn set_session_summary(
        &self,
        id: &SessionId,
        summary: &keel_types::SessionSummary,
    ) -> Result<bool, StoreError> {
        let mut summary = summary.clone();
        self.redactor().redact_str(&mut summary.text);
        self.inner.set_session_summary(id, &summary).await
    }

    async fn append_session_messages(
        &self,
        id: &SessionId,
        request_id: &RequestId,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        let redactor = self.redactor();
        let messages: Vec<Message> = messages
            .iter()
            .cloned()
            .map(|mut message| {
                redactor.redact_message(&mut message);
                message
            })
            .collect();
        self.inner
            .append_session_messages(id, request_id, &messages)
            .await
    }
}

#[async_trait]
impl ApprovalStore for RedactingStore {
    async fn create_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError> {
        let mut approval = approval.clone();
        self.redactor().redact_approval(&mut approval);
        self.inner.create_approval(&approval).await
    }

    async fn get_approval(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        self.inner.get_approval(id).await
    }

    async fn list_approvals(
        &self,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.inner.list_approvals(status).await
    }

    async fn decide_approval(
        &self,
        id: &str,
        status: ApprovalStatus,
        scope: ApprovalScope,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<ApprovalRecord, StoreError> {
        let reason = reason.map(|r| self.redactor().redact_text(r));
        self.inner
            .decide_approval(id, status, scope, decided_by, reason.as_deref())
            .await
    }
}

#[async_trait]
impl TaskStore for RedactingStore {
    async fn put_task(&self, task: &TaskRecord) -> Result<(), StoreError> {
        let mut task = task.clone();
        self.redactor().redact_task(&mut task);
        self.inner.put_task(&task).await
    }

    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.get_task(id).await
    }

    async fn list_tasks(&self, limit: Option<usize>) -> Result<Vec<TaskRecord>, StoreError> {
        self.inner.list_tasks(limit).await
    }

    async fn delete_task(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete_task(id).await
    }
}

#[async_trait]
impl SkillCandidateStore for RedactingStore {
    async fn create_skill_candidate(&self, candidate: &SkillCandidate) -> Result<(), StoreError> {
        self.inner.create_skill_candidate(candidate).await
    }

    async fn get_skill_candidate(&self, id: &str) -> Result<Option<SkillCandidate>, StoreError> {
        self.inner.get_skill_candidate(id).await
    }

    async fn list_skill_candidates(
        &self,
        status: Option<CandidateStatus>,
    ) -> Result<Vec<SkillCandidate>, StoreError> {
        self.inner.list_skill_candidates(status).await
    }

    async fn decide_skill_candidate(
        &self,
        id: &str,
        status: CandidateStatus,
        decided_by: &str,
        reason: Option<&str>,
        path: Option<&str>,
    ) -> Result<SkillCandidate, StoreError> {
        self.inner
            .decide_skill_candidate(id, status, decided_by, reason, path)
            .await
    }
}

#[async_trait]
impl EvalStore for RedactingStore {
    async fn save_eval_result(&self, result: &EvalResult) -> Result<(), StoreError> {
        self.inner.save_eval_result(result).await
    }

    async fn get_eval_result(&self, id: &str) -> Result<Option<EvalResult>, StoreError> {
        self.inner.get_eval_result(id).await
    }

    async fn list_eval_results(
        &self,
        eval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<EvalResult>, StoreError> {
        self.inner.list_eval_results(eval, limit).await
    }
}

/// Whether a task's stored arguments lost text to redaction (it cannot be run from them).
pub(crate) fn was_redacted(task: &TaskRecord) -> bool {
    task.arguments.to_string().contains(crate::redact::REDACTED)
}
