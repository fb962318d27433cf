//! The store-off line's store: it accepts every write and keeps nothing, so what is left of
//! Keel's cost per run is the runtime itself (loop, gateway, policy, events, live stream).

use async_trait::async_trait;
use keel::{
    ApprovalStore, Event, RequestId, RunFilter, RunLog, RunRecord, RunStatus, SessionStore,
    SkillCandidateStore, StoreError, TaskStore,
};

pub(crate) struct NullStore;

#[async_trait]
impl RunLog for NullStore {
    async fn create_run(&self, _run: &RunRecord) -> Result<(), StoreError> {
        Ok(())
    }

    async fn append(&self, _events: &[Event]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn update_run(&self, _run: &RunRecord) -> Result<(), StoreError> {
        Ok(())
    }

    async fn get_run(&self, _id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        Ok(None)
    }

    async fn list_runs(&self, _filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    async fn run_counts(&self) -> Result<Vec<(RunStatus, u64)>, StoreError> {
        Ok(Vec::new())
    }

    async fn started_by_minute(
        &self,
        _since: &str,
    ) -> Result<Vec<(String, RunStatus, u64)>, StoreError> {
        Ok(Vec::new())
    }

    async fn events(&self, _id: &RequestId, _after: u64) -> Result<Vec<Event>, StoreError> {
        Ok(Vec::new())
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        Ok(Vec::new())
    }

    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError> {
        Err(StoreError::NotFound(id.to_string()))
    }

    async fn prune(&self, _before: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
}

impl SessionStore for NullStore {}
impl ApprovalStore for NullStore {}
impl TaskStore for NullStore {}
impl SkillCandidateStore for NullStore {}
impl keel_types::EvalStore for NullStore {}
