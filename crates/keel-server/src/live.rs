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

use std::collections::VecDeque;

use keel::{Event, RequestId, RunStatus};
use tokio::sync::Notify;

use crate::state::AppState;

/// How long a follower waits for news before looking at the store again (events of runs in
/// other processes arrive only that way).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A follower reports [`Followed::Idle`] after this long without events, so a stream can
/// send a keep-alive that proxies see.
const KEEPALIVE: Duration = Duration::from_secs(15);

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

/// What a [`Follower`] found next.
pub(crate) enum Followed {
    /// The run's next stored event.
    Event(Box<Event>),
    /// Nothing for [`KEEPALIVE`]; the run goes on.
    Idle,
}

/// Follows one run's stored events from a `seq` on, live: it reads the store (so it never
/// holds up the run and buffers at most one page of events however slowly its reader reads)
/// and waits for this process's wake-ups or the poll interval between reads. It ends after
/// the final event (`completed`, `failed`, `cancelled`); an interrupted run is followed on
/// through its resume, until this server shuts down.
pub(crate) struct Follower {
    state: AppState,
    /// Signalled when this process stores an event of the run.
    wake: Wake,
    id: RequestId,
    /// The newest `seq` handed out (or skipped by the reader).
    last_seq: u64,
    pending: VecDeque<Event>,
    /// A terminal event was handed out, or the run ended without one; nothing more comes.
    done: bool,
}

impl Follower {
    /// Follows run `id` from after `after`.
    pub(crate) fn new(state: AppState, id: RequestId, after: u64) -> Self {
        Self {
            wake: state.telemetry.subscribe(&id),
            state,
            id,
            last_seq: after,
            pending: VecDeque::new(),
            done: false,
        }
    }

    /// The next event, [`Followed::Idle`] after a long quiet, or `None` once the run has
    /// ended and every event was handed out.
    pub(crate) async fn next(&mut self) -> Option<Followed> {
        let mut idle = Duration::ZERO;
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.last_seq = event.seq;
                // An `interrupted` event is not the end when the run was resumed since; the
                // run's status then says whether more comes.
                if event.payload.is_final() {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(Followed::Event(Box::new(event)));
            }
            if self.done {
                return None;
            }
            let runtime = &self.state.runtime;
            match runtime.runs().events(&self.id, self.last_seq).await {
                Ok(events) if !events.is_empty() => {
                    let last = self.last_seq;
                    self.pending
                        .extend(events.into_iter().filter(|e| e.seq > last));
                }
                Ok(_) => {
                    // Nothing new: stop if the run ended for good without a final event read,
                    // otherwise wait and look again. An `interrupted` run has not ended: it is
                    // resumed (taken over by another replica, or `keel runs resume`) and its
                    // stream goes on — unless this server is shutting down.
                    match runtime.runs().get(&self.id).await {
                        Ok(Some(run))
                            if !run.status.is_terminal()
                                || (run.status == RunStatus::Interrupted
                                    && !runtime.is_shutting_down()) =>
                        {
                            if idle >= KEEPALIVE {
                                return Some(Followed::Idle);
                            }
                            let started = tokio::time::Instant::now();
                            self.wake.wait(POLL_INTERVAL).await;
                            idle += started.elapsed();
                        }
                        Ok(Some(_)) => {
                            // Read once more: the terminal event may have landed meanwhile.
                            let rest = runtime.runs().events(&self.id, self.last_seq).await;
                            self.done = true;
                            if let Ok(rest) = rest {
                                let last = self.last_seq;
                                self.pending
                                    .extend(rest.into_iter().filter(|e| e.seq > last));
                            }
                        }
                        Ok(None) | Err(_) => return None,
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reading events for a live stream failed");
                    return None;
                }
            }
        }
    }
}
