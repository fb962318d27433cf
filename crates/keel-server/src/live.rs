//! Wake-ups for live event streams: an operator event stream (`GET /api/requests/{id}/events`
//! with SSE) that has read everything stored so far waits here for news of its run, and
//! the telemetry observer, which sees every event this process stores, wakes it.
//!
//! A wake-up is only a hint to read the store again: the stream also wakes on its own after a
//! timeout, so runs of other processes sharing the store are followed too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::RequestId;
use tokio::sync::Notify;

/// The live streams waiting for news, by run; cheap to clone (one shared value).
#[derive(Clone, Default)]
pub(crate) struct Followers {
    inner: Arc<Waiting>,
}

#[derive(Default)]
struct Waiting {
    /// Live event streams waiting for news of a run.
    by_run: Mutex<HashMap<RequestId, Vec<Arc<Notify>>>>,
    /// How many streams wait (so [`Followers::wake`] skips the lock when none do).
    count: AtomicUsize,
}

impl Followers {
    /// A wake-up for news of run `id`.
    pub(crate) fn follow(&self, id: &RequestId) -> Wake {
        let notify = Arc::new(Notify::new());
        if let Ok(mut by_run) = self.inner.by_run.lock() {
            by_run.entry(id.clone()).or_default().push(notify.clone());
            self.inner.count.fetch_add(1, Ordering::AcqRel);
        }
        Wake {
            followers: self.clone(),
            id: id.clone(),
            notify,
        }
    }

    /// Wakes the streams following run `id`.
    pub(crate) fn wake(&self, id: &RequestId) {
        if self.inner.count.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Ok(by_run) = self.inner.by_run.lock()
            && let Some(streams) = by_run.get(id)
        {
            for notify in streams {
                notify.notify_one();
            }
        }
    }
}

/// A live stream's wake-up for one run; unregisters itself when dropped.
pub(crate) struct Wake {
    followers: Followers,
    id: RequestId,
    notify: Arc<Notify>,
}

impl Wake {
    /// Waits until an event of the run is stored in this process, or `timeout` passes.
    pub(crate) async fn wait(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.notify.notified()).await;
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        let inner = &self.followers.inner;
        if let Ok(mut by_run) = inner.by_run.lock() {
            if let Some(streams) = by_run.get_mut(&self.id) {
                streams.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if streams.is_empty() {
                    by_run.remove(&self.id);
                }
            }
            inner.count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
