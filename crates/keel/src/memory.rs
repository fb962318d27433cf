//! The runtime's long-term memory (`docs/workspace.md#memory`): the operator's side — list,
//! search, add, update, delete, history, candidates, maintenance, export and import. Runs
//! use memory on their own (recall, `memory_search`, `remember`).

use std::sync::Arc;

use keel_runtime::memory::{MaintenanceReport, MaintenanceRequest, MemoryService};
use keel_types::RequestId;

use crate::{Error, Runtime};

impl Runtime {
    /// The memory of this workspace; [`keel_runtime::RuntimeError::Memory`] when it declares
    /// no `Memory` document.
    pub fn memory(&self) -> Result<Arc<MemoryService>, Error> {
        Ok(self.kernel.memory()?)
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
