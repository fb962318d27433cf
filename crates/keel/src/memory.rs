//! The runtime's long-term memory (`docs/workspace.md#memory`): the operator's side — list,
//! search, add, update, delete, history, candidates, maintenance, export and import. Runs
//! use memory on their own (recall, `memory_search`, `remember`).

use std::sync::Arc;

use keel_runtime::memory::{MaintenanceReport, MaintenanceRequest, MemoryService};
use keel_types::{ApprovalRecord, ApprovalStatus, RequestId};

use crate::{Error, Runtime};

impl Runtime {
    /// The memory of this workspace; [`keel_runtime::RuntimeError::Memory`] when it declares
    /// no `Memory` document.
    pub fn memory(&self) -> Result<Arc<MemoryService>, Error> {
        Ok(self.kernel.memory()?)
    }

    /// Memory candidates waiting for a person: the pending approvals that carry one
    /// (decide them like any approval: [`Runtime::decide_approval`]; approving stores the
    /// record).
    pub async fn memory_candidates(&self) -> Result<Vec<ApprovalRecord>, Error> {
        let pending = self
            .store()
            .list_approvals(Some(ApprovalStatus::Pending))
            .await?;
        Ok(pending.into_iter().filter(|a| a.memory.is_some()).collect())
    }

    /// Runs memory maintenance (expiry, compaction) as a recorded run of its own.
    pub async fn maintain_memory(
        &self,
        request: &MaintenanceRequest,
        owner: Option<String>,
    ) -> Result<(RequestId, MaintenanceReport), Error> {
        Ok(self.kernel.maintain_memory(request, owner).await?)
    }
}
