//! Approvals: the human decisions runs and tasks wait for (`Runtime::approvals()` in the SDK,
//! `keel approvals`, `/api/approvals`). A run persists an approval before it waits on it, so
//! any process may decide it; the decision wakes the runs of this process at once, and those
//! of other processes at their next look (`approval_wait.rs`).

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus};

use super::Kernel;
use crate::RuntimeError;

/// The approvals of this runtime's store. Cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    kernel: Kernel,
}

impl Kernel {
    /// The approvals of this runtime's store.
    pub fn approvals(&self) -> Approvals {
        Approvals {
            kernel: self.clone(),
        }
    }
}

impl Approvals {
    /// Approvals, newest first, optionally only those with `status`.
    pub async fn list(
        &self,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<ApprovalRecord>, RuntimeError> {
        Ok(self.kernel.store().list_approvals(status).await?)
    }

    /// One approval.
    pub async fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, RuntimeError> {
        Ok(self.kernel.store().get_approval(id).await?)
    }

    /// Decides a pending approval, exactly once (a second decision fails, naming the first),
    /// and wakes the runs of this process waiting on it.
    pub async fn decide(
        &self,
        id: &str,
        approve: bool,
        scope: ApprovalScope,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<ApprovalRecord, RuntimeError> {
        let status = match approve {
            true => ApprovalStatus::Approved,
            false => ApprovalStatus::Denied,
        };
        let decided = self
            .kernel
            .store()
            .decide_approval(id, status, scope, decided_by, reason)
            .await?;
        self.kernel.approval_decided();
        Ok(decided)
    }

    /// Memory candidates waiting for a person: the pending approvals that carry one (decide
    /// them like any approval; approving stores the record).
    pub async fn memory_candidates(&self) -> Result<Vec<ApprovalRecord>, RuntimeError> {
        let pending = self.list(Some(ApprovalStatus::Pending)).await?;
        Ok(pending.into_iter().filter(|a| a.memory.is_some()).collect())
    }
}
