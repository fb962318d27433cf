//! The store port, one trait per kind of record, so an embedder's store implements what it
//! stores: [`RunLog`] (runs and their events — every store keeps them), [`SessionStore`],
//! [`ApprovalStore`], [`TaskStore`], [`SkillCandidateStore`] and [`EvalStore`]. A store that
//! keeps no sessions, approvals, tasks, skill candidates or eval results writes an empty
//! `impl` of that trait: each
//! method then fails with [`StoreError::Unsupported`] naming what the store does not keep,
//! and so does whatever needed it (a run in a session, a call that asks a human, a task).
//! [`RunStore`] is all six together, and what the runtime holds.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::{RunFilter, StoreError, StoreHealth};
use crate::event::Event;
use crate::message::Message;
use crate::run::{RunRecord, RunStatus, SessionMessage, SessionRecord};
use crate::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, CandidateStatus, RequestId, SessionId,
    SessionOwner, SkillCandidate, TaskRecord, ToolStats, eval::EvalResult,
};

/// Checks that `events` belong to `run`, for the writes that store a run's record with its
/// events.
pub fn check_run_of(run: &RunRecord, events: &[Event]) -> Result<(), StoreError> {
    match events.iter().find(|e| e.request_id != run.request_id) {
        Some(event) => Err(StoreError::Invalid(format!(
            "event {} of run {} cannot be written with the record of run {}",
            event.type_name(),
            event.request_id,
            run.request_id
        ))),
        None => Ok(()),
    }
}

/// Everything a store keeps: runs, their events, sessions, approvals, tasks and skill
/// candidates. Implemented for every type that implements the five parts.
pub trait RunStore:
    RunLog + SessionStore + ApprovalStore + TaskStore + SkillCandidateStore + EvalStore
{
}

impl<T> RunStore for T where
    T: RunLog + SessionStore + ApprovalStore + TaskStore + SkillCandidateStore + EvalStore + ?Sized
{
}

/// Durable storage of runs and their events.
///
/// Contract: `append` is called with events in `seq` order, dense from 1; when it returns, the
/// events are durable (as far as the implementation promises) and may be shown to anyone.
#[async_trait]
pub trait RunLog: Send + Sync {
    /// Records a new run.
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// The file holding a run's log as JSONL, when the store keeps one (hooks get it as
    /// `transcript_path`); none by default.
    fn log_path(&self, _id: &RequestId) -> Option<PathBuf> {
        None
    }
    /// Appends events of one run.
    async fn append(&self, events: &[Event]) -> Result<(), StoreError>;
    /// Replaces the run record (status, output, usage…).
    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// Records a new run together with its first events — one durable write where the store
    /// can, so a run's start costs one commit (then either both are stored or neither is; a
    /// store that writes them separately may keep the record alone).
    async fn create_run_with(&self, run: &RunRecord, events: &[Event]) -> Result<(), StoreError> {
        check_run_of(run, events)?;
        self.create_run(run).await?;
        self.append(events).await
    }
    /// Appends a run's last events and then replaces its record — one durable write where the
    /// store can, so a run's end costs one commit. When it fails, the record may be left as it
    /// was even if the events were stored (a store that writes them separately).
    async fn append_and_update(&self, events: &[Event], run: &RunRecord) -> Result<(), StoreError> {
        check_run_of(run, events)?;
        self.append(events).await?;
        self.update_run(run).await
    }
    /// One run, if it exists.
    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError>;
    /// Runs matching the filter, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError>;
    /// How many stored runs have each status (statuses with no run are left out).
    async fn run_counts(&self) -> Result<Vec<(RunStatus, u64)>, StoreError>;
    /// How many runs started at or after `since` (RFC 3339, UTC) in each minute, by status:
    /// `(minute, status, count)` with `minute` as `YYYY-MM-DDTHH:MM`, in minute order (empty
    /// minutes left out), for the console's overview: one grouped query, never the records.
    async fn started_by_minute(
        &self,
        since: &str,
    ) -> Result<Vec<(String, RunStatus, u64)>, StoreError>;
    /// The stored events of a run with `seq > after`, in order.
    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError>;

    /// Marks runs left `running` or `waiting_approval` by processes that no longer exist as
    /// `interrupted`, and returns their ids. Runs of live processes are left alone.
    async fn recover(&self) -> Result<Vec<RequestId>, StoreError>;
    /// Takes over an `interrupted` run to resume it: it becomes `running`, owned by this
    /// process. Exactly one caller wins; the others get [`StoreError::Invalid`].
    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError>;
    /// Deletes ended runs that started before `before` (RFC 3339) with their events and
    /// mirrors; returns how many were deleted.
    async fn prune(&self, before: &str) -> Result<u64, StoreError>;
    /// Usage telemetry per tool, from the recorded events; a store may not keep it.
    async fn tool_stats(&self) -> Result<Vec<ToolStats>, StoreError> {
        Err(StoreError::Unsupported("tool statistics"))
    }

    /// Leases, the queue and signals, when several processes share this store.
    fn cluster(&self) -> Option<Arc<dyn crate::Cluster>> {
        None
    }

    /// Whether the store is usable now, cheaply: an `Err` says why it is not. Stores should
    /// try a read and a write that changes nothing; this default only reads (the run counts)
    /// and reports neither a schema version nor writability.
    async fn health(&self) -> Result<StoreHealth, StoreError> {
        self.run_counts().await?;
        Ok(StoreHealth {
            kind: "custom".into(),
            schema_version: None,
            writable: None,
        })
    }
}

/// Sessions and their transcripts. The defaults keep none ([`StoreError::Unsupported`]).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session, created (for `agent`, belonging to `owner`) if it does not exist yet; an
    /// existing session keeps the owner it was created with.
    async fn ensure_session(
        &self,
        _id: &SessionId,
        _agent: &str,
        _owner: &SessionOwner,
    ) -> Result<SessionRecord, StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
    /// One session, if it exists.
    async fn get_session(&self, _id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
    /// Sessions, most recently updated first.
    async fn list_sessions(&self, _limit: Option<usize>) -> Result<Vec<SessionRecord>, StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
    /// Deletes a session and its transcript (its runs stay, as records). Returns whether it
    /// existed.
    async fn delete_session(&self, _id: &SessionId) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
    /// The session's whole transcript, in order.
    async fn session_messages(&self, _id: &SessionId) -> Result<Vec<SessionMessage>, StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
    /// Sets the session's summary (its compacted history). Returns whether it exists.
    async fn set_session_summary(
        &self,
        _id: &SessionId,
        _summary: &crate::SessionSummary,
    ) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported("session summaries"))
    }
    /// Appends the messages a request added to its session's transcript (in one transaction)
    /// and touches the session.
    async fn append_session_messages(
        &self,
        _id: &SessionId,
        _request_id: &RequestId,
        _messages: &[Message],
    ) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("sessions"))
    }
}

/// Human approvals, persisted before a run waits on one. The defaults keep none
/// ([`StoreError::Unsupported`]): a call that asks a human then fails the run saying so.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Records a new pending approval.
    async fn create_approval(&self, _approval: &ApprovalRecord) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("approvals"))
    }
    /// One approval.
    async fn get_approval(&self, _id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        Err(StoreError::Unsupported("approvals"))
    }
    /// Approvals, newest first, optionally only those with `status`.
    async fn list_approvals(
        &self,
        _status: Option<ApprovalStatus>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        Err(StoreError::Unsupported("approvals"))
    }
    /// Decides a pending approval, exactly once: a second decision (from any process) gets
    /// [`StoreError::Invalid`] naming the first.
    async fn decide_approval(
        &self,
        _id: &str,
        _status: ApprovalStatus,
        _scope: ApprovalScope,
        _decided_by: &str,
        _reason: Option<&str>,
    ) -> Result<ApprovalRecord, StoreError> {
        Err(StoreError::Unsupported("approvals"))
    }
}

/// Tasks: staged tool calls. The defaults keep none ([`StoreError::Unsupported`]).
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Creates or replaces a task.
    async fn put_task(&self, _task: &TaskRecord) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("tasks"))
    }
    /// One task.
    async fn get_task(&self, _id: &str) -> Result<Option<TaskRecord>, StoreError> {
        Err(StoreError::Unsupported("tasks"))
    }
    /// Tasks, newest first.
    async fn list_tasks(&self, _limit: Option<usize>) -> Result<Vec<TaskRecord>, StoreError> {
        Err(StoreError::Unsupported("tasks"))
    }
    /// Deletes a task; returns whether it existed.
    async fn delete_task(&self, _id: &str) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported("tasks"))
    }
}

/// Skills agents proposed (`propose_skill`), waiting for a person. The defaults keep none
/// ([`StoreError::Unsupported`]).
#[async_trait]
pub trait SkillCandidateStore: Send + Sync {
    /// Stores a new skill candidate.
    async fn create_skill_candidate(&self, _candidate: &SkillCandidate) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("skill candidates"))
    }
    /// One skill candidate.
    async fn get_skill_candidate(&self, _id: &str) -> Result<Option<SkillCandidate>, StoreError> {
        Err(StoreError::Unsupported("skill candidates"))
    }
    /// Skill candidates, newest first, optionally only those with `status`.
    async fn list_skill_candidates(
        &self,
        _status: Option<CandidateStatus>,
    ) -> Result<Vec<SkillCandidate>, StoreError> {
        Err(StoreError::Unsupported("skill candidates"))
    }
    /// Decides a pending candidate, exactly once: approved (with `path`, where it was
    /// written) or rejected (with an optional `reason`); a candidate already decided is
    /// [`StoreError::Invalid`] naming the first decision.
    async fn decide_skill_candidate(
        &self,
        _id: &str,
        _status: CandidateStatus,
        _decided_by: &str,
        _reason: Option<&str>,
        _path: Option<&str>,
    ) -> Result<SkillCandidate, StoreError> {
        Err(StoreError::Unsupported("skill candidates"))
    }
}

/// The results of evaluations (`keel eval`). The defaults keep none
/// ([`StoreError::Unsupported`]).
#[async_trait]
pub trait EvalStore: Send + Sync {
    /// Stores an eval result, replacing the one with its id (a running eval is stored when it
    /// starts and again when it ends).
    async fn save_eval_result(&self, _result: &EvalResult) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("eval results"))
    }
    /// One eval result.
    async fn get_eval_result(&self, _id: &str) -> Result<Option<EvalResult>, StoreError> {
        Err(StoreError::Unsupported("eval results"))
    }
    /// Eval results, newest first, optionally of one eval only, at most `limit`.
    async fn list_eval_results(
        &self,
        _eval: Option<&str>,
        _limit: usize,
    ) -> Result<Vec<EvalResult>, StoreError> {
        Err(StoreError::Unsupported("eval results"))
    }
}
