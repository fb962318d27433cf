//! Following one run's stored events live ([`Follower`]): the operator event stream, AG-UI
//! and A2A streams that continue a run, read the store and wait on [`crate::live`]'s
//! wake-ups between reads.

use std::collections::VecDeque;
use std::time::Duration;

use keel::{ApprovalStatus, Event, EventPayload, RequestId, RunStatus};

use crate::live::Wake;
use crate::state::AppState;

/// How long a follower waits for news before looking at the store again (events of runs in
/// other processes arrive only that way).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A follower reports [`Followed::Idle`] after this long without events, so a stream can
/// send a keep-alive that proxies see.
const KEEPALIVE: Duration = Duration::from_secs(15);

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

/// Whether `event` asks for an approval that still waits for its decision (a stream that
/// continues a run reads approvals that were decided since).
pub(crate) async fn approval_pending(state: &AppState, event: &Event) -> bool {
    match &event.payload {
        EventPayload::ApprovalRequested { approval } => state
            .runtime
            .approvals()
            .get(&approval.approval_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|now| now.status == ApprovalStatus::Pending),
        _ => false,
    }
}
