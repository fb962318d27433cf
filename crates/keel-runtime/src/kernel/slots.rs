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

/// The run slots of one kernel.
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

    /// Takes a slot for a run being launched: at once when one is free — so a run launched
    /// is in flight before its task first runs, and a replica counting free slots never
    /// claims more than there are — or, when none is, a place in the queue for one.
    pub(crate) fn take(&self) -> Slot {
        match self.semaphore.clone().try_acquire_owned() {
            Ok(permit) => Slot::Held(permit),
            Err(_) => Slot::Queued(self.semaphore.clone()),
        }
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

/// A launched run's slot: held, or waited for.
pub(crate) enum Slot {
    Held(OwnedSemaphorePermit),
    Queued(Arc<Semaphore>),
}

impl Slot {
    /// The slot, once it is the run's; `None` if the slots were closed.
    pub(crate) async fn ready(self) -> Option<OwnedSemaphorePermit> {
        match self {
            Self::Held(permit) => Some(permit),
            Self::Queued(semaphore) => semaphore.acquire_owned().await.ok(),
        }
    }
}

impl super::Kernel {
    /// The run slots.
    pub(crate) fn slots(&self) -> &RunSlots {
        &self.inner.slots
    }
}

#[cfg(test)]
mod tests {
    use super::{RunSlots, Slot};

    #[tokio::test]
    async fn a_launched_run_holds_its_slot_at_once_and_the_next_queues() {
        let slots = RunSlots::new(1);
        let first = slots.take();
        // In flight before its task runs: a replica counting room sees none left.
        assert!(matches!(first, Slot::Held(_)));
        assert_eq!((slots.in_flight(), slots.room()), (1, 0));
        let second = slots.take();
        assert!(matches!(second, Slot::Queued(_)));
        drop(first.ready().await);
        let second = second.ready().await;
        assert!(second.is_some());
        assert_eq!(slots.in_flight(), 1);
    }
}
