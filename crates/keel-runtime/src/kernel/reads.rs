//! The kernel's reads of stored runs.

use keel_types::{Event, RequestId, RunFilter, RunRecord, RunStatus};

use super::Kernel;
use crate::RuntimeError;

impl Kernel {
    /// Counts of stored runs by status.
    pub async fn run_counts(&self) -> Result<Vec<(RunStatus, u64)>, RuntimeError> {
        Ok(self.inner.store.run_counts().await?)
    }

    /// One run's record.
    pub async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, RuntimeError> {
        Ok(self.inner.store.get_run(id).await?)
    }

    /// Runs, newest first.
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RuntimeError> {
        Ok(self.inner.store.list_runs(filter).await?)
    }

    /// A run's stored events after `seq`.
    pub async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, RuntimeError> {
        Ok(self.inner.store.events(id, after).await?)
    }
}
