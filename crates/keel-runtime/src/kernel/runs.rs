//! The stored runs as their readers see them (`Runtime::runs()` in the SDK): records, events,
//! counts, the runs live here, where a replayed run diverged, artifacts, the store's health,
//! recovery after a crash and pruning. Starting, continuing and stopping runs is the kernel's
//! lifecycle (`request`, `resume`, `fork`, `replay`, `retry`, `cancel`, `shutdown`).

use keel_types::{ArtifactRecord, Event, RequestId, RunFilter, RunRecord, RunStatus, StoreHealth};

use super::Kernel;
use crate::RuntimeError;
use crate::replay::Divergence;

/// The runs of this runtime's store. Cheap to clone.
#[derive(Clone)]
pub struct Runs {
    kernel: Kernel,
}

impl Kernel {
    /// The runs of this runtime's store.
    pub fn runs(&self) -> Runs {
        Runs {
            kernel: self.clone(),
        }
    }
}

impl Runs {
    /// One run's record.
    pub async fn get(&self, id: &RequestId) -> Result<Option<RunRecord>, RuntimeError> {
        Ok(self.kernel.store().get_run(id).await?)
    }

    /// Stores an eval result (again when it ends).
    pub async fn save_eval_result(
        &self,
        result: &keel_types::eval::EvalResult,
    ) -> Result<(), RuntimeError> {
        Ok(self.kernel.store().save_eval_result(result).await?)
    }

    /// One eval result.
    pub async fn eval_result(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::eval::EvalResult>, RuntimeError> {
        Ok(self.kernel.store().get_eval_result(id).await?)
    }

    /// Eval results, newest first, of one eval or all, at most `limit`.
    pub async fn eval_results(
        &self,
        eval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<keel_types::eval::EvalResult>, RuntimeError> {
        Ok(self.kernel.store().list_eval_results(eval, limit).await?)
    }

    /// Runs, newest first.
    pub async fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RuntimeError> {
        Ok(self.kernel.store().list_runs(filter).await?)
    }

    /// What the runs `filter` selects used and cost, summed by agent, session, key or day.
    pub async fn usage(
        &self,
        by: crate::usage::UsageBy,
        filter: &RunFilter,
    ) -> Result<Vec<crate::usage::UsageRow>, RuntimeError> {
        Ok(crate::usage::usage_by(self.kernel.store().as_ref(), by, filter).await?)
    }

    /// [`Self::usage`] grouped by several at once (`[Day, Agent]`: each agent's per day).
    pub async fn usage_grouped(
        &self,
        by: &[crate::usage::UsageBy],
        filter: &RunFilter,
    ) -> Result<Vec<crate::usage::UsageRow>, RuntimeError> {
        Ok(crate::usage::usage_grouped(self.kernel.store().as_ref(), by, filter).await?)
    }

    /// How many runs started at or after `since` in each minute, by status
    /// ([`keel_types::RunLog::started_by_minute`]).
    pub async fn started_by_minute(
        &self,
        since: &str,
    ) -> Result<Vec<(String, RunStatus, u64)>, RuntimeError> {
        Ok(self.kernel.store().started_by_minute(since).await?)
    }

    /// A run's stored events with `seq > after`.
    pub async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, RuntimeError> {
        Ok(self.kernel.store().events(id, after).await?)
    }

    /// How many stored runs have each status (for metrics).
    pub async fn counts(&self) -> Result<Vec<(RunStatus, u64)>, RuntimeError> {
        Ok(self.kernel.store().run_counts().await?)
    }

    /// How many runs of this runtime are live: in flight, waiting for a slot, or a child of
    /// one of those.
    pub fn active(&self) -> usize {
        self.kernel.active_runs()
    }

    /// How many runs may be in flight at once: `limits.maxConcurrentRuns`, as this runtime
    /// took it when it was built (`kernel/slots.rs` says what "in flight" means).
    pub fn capacity(&self) -> usize {
        self.kernel.slots().capacity()
    }

    /// How many runs are in flight now: top-level runs holding a slot.
    pub fn in_flight(&self) -> usize {
        self.kernel.slots().in_flight()
    }

    /// Where run `new`'s events first differ from run `original`'s; `None` if they agree.
    pub async fn divergence(
        &self,
        original: &RequestId,
        new: &RequestId,
    ) -> Result<Option<Divergence>, RuntimeError> {
        self.kernel.divergence(original, new).await
    }

    /// Marks runs left active by processes that died as `interrupted`; returns their ids.
    /// Call it when your program starts (the CLI does).
    pub async fn recover(&self) -> Result<Vec<RequestId>, RuntimeError> {
        self.kernel.recover().await
    }

    /// Deletes ended runs that started before `before` (RFC 3339); returns how many.
    pub async fn prune(&self, before: &str) -> Result<u64, RuntimeError> {
        Ok(self.kernel.store().prune(before).await?)
    }

    /// An artifact and its content, by URI (`keel://artifacts/<id>`) or id.
    pub async fn artifact(
        &self,
        uri: &str,
    ) -> Result<Option<(ArtifactRecord, Vec<u8>)>, RuntimeError> {
        Ok(self.kernel.artifacts().get(uri).await?)
    }

    /// Whether the run store is usable now: its schema version and whether a write succeeds;
    /// an error says why it is not usable.
    pub async fn store_health(&self) -> Result<StoreHealth, RuntimeError> {
        Ok(self.kernel.store().health().await?)
    }
}
