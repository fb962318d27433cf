//! The one owner of `limits.maxConcurrentRuns`: the slots runs execute in.
//!
//! A run *in flight* is a top-level run of this process that holds a slot: from when it starts
//! executing (a run launched while every slot is taken waits, queued, and may be cancelled
//! meanwhile) until its end is stored. A run waiting for a human keeps its slot. A child run —
//! a delegation's, a workflow node's — rides on its root's slot (a tree cannot starve
//! itself). The kernel takes the limit once, when it is built; a reload does not change it
//! (`keel validate` and `config explain` say so: restart to change it). Everything that asks
//! "is there room for another run?" asks this: the kernel's launches, a replica claiming queued
//! requests, and `keel serve`'s admission (which adds `server.maxQueuedRequests` waiting).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The run slots of one kernel. Cheap to clone; clones share the slots.
#[derive(Clone)]
pub(crate) struct RunSlots {
    semaphore: Arc<Semaphore>,
    capacity: usize,
}

impl RunSlots {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            semaphore: Arc::new(Semaphore::new(capacity)),
            capacity,
        }
    }

    /// Waits for a slot; `None` once the slots are closed.
    pub(crate) async fn acquire(self) -> Option<OwnedSemaphorePermit> {
        self.semaphore.acquire_owned().await.ok()
    }

    /// `limits.maxConcurrentRuns` as the kernel took it.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Runs in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.capacity
            .saturating_sub(self.semaphore.available_permits())
    }

    /// Slots free now.
    pub(crate) fn room(&self) -> usize {
        self.semaphore.available_permits()
    }
}

impl super::Kernel {
    /// The run slots.
    pub(crate) fn slots(&self) -> &RunSlots {
        &self.inner.slots
    }
}
