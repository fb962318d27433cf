//! The emission pipeline of one run (the events: `docs/events.md`): redact → durable append →
//! live subscribers, then the narrator's derived view to subscribers only.
//!
//! Appends are pipelined: [`Emitter::emit`] assigns the next `seq` and queues the event; a
//! flusher task appends everything queued for the run in one store call, and only once that
//! call returns (the events are durable) forwards them to the subscriber. So the loop never
//! waits for the disk to stream text, yet nobody sees an event that is not stored. The flusher
//! lets a burst gather for up to [`LINGER`] (a barrier ends the wait at once), so the events
//! a loop emits together — a round's start and its quick answer — share one commit.
//!
//! Write-ahead rule: before an action with effects outside the log (running a tool) and before
//! a run is declared finished, the loop calls [`Emitter::barrier`], which waits until every
//! event emitted so far is durable. A failed append is sticky: every later `emit` and
//! `barrier` reports it.
//!
//! A run's first and last writes carry its record: a new request's record is created with its
//! opening event ([`opening_event`], then [`Emitter::opened`]), and [`Emitter::finish`] stores
//! the terminal event and the final record together — one commit each where the store can.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use keel_types::{
    Event, EventId, EventObserver, EventPayload, RequestId, RunRecord, RunStore, SessionId,
    StoreError,
};
use tokio::sync::{Notify, mpsc, watch};

use crate::narrator::Narrator;
use crate::redact::Redactor;

/// The observers of every run of a runtime (usually none).
pub type Observers = Arc<[Arc<dyn EventObserver>]>;

/// What the flusher publishes: the last durable `seq`, or the error that stopped it.
type Durable = Result<u64, StoreError>;

/// Where the events of every run of a runtime go: the store, the redactor applied before it,
/// the observers of stored events, and the narrator of the live view. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    pub store: Arc<dyn RunStore>,
    pub redactor: Arc<Redactor>,
    pub narrator: Arc<Narrator>,
    pub observers: Observers,
}

/// Emits the events of one run.
pub struct Emitter {
    request_id: RequestId,
    session_id: Option<SessionId>,
    agent: String,
    redactor: Arc<Redactor>,
    /// The last assigned `seq` and the queue to the flusher, under one lock so queue order is
    /// `seq` order.
    state: Mutex<State>,
    durable: watch::Receiver<Durable>,
    /// Tells a lingering flusher that someone waits for the events.
    urgent: Arc<Notify>,
}

/// How long the flusher waits for more events before it stores what it has, unless a barrier
/// needs them sooner: subscribers see events at most this much later, and a burst of events
/// costs one commit instead of several.
pub const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// Where a run's live events go, and whether its reader wants narration with them. Events
/// travel boxed: a Tokio channel allocates its slots 32 at a time when it is made, and every
/// run has two (its queue and its subscriber), so slots of a pointer's size keep a run's fixed
/// cost small at a thousand runs in flight.
pub struct Subscriber {
    events: mpsc::UnboundedSender<Box<Event>>,
    /// Cleared by the reader ([`crate::RunHandle::skip_narration`]): narration is made only
    /// for a reader that takes it.
    narration: Arc<AtomicBool>,
}

/// The reading end of a [`Subscriber`], for a [`crate::RunHandle`].
pub(crate) struct Subscription {
    pub events: mpsc::UnboundedReceiver<Box<Event>>,
    pub narration: Arc<AtomicBool>,
}

/// A run's live view: the emitter's end and the handle's.
pub(crate) fn subscription() -> (Subscriber, Subscription) {
    let (tx, rx) = mpsc::unbounded_channel();
    let narration = Arc::new(AtomicBool::new(true));
    let subscriber = Subscriber {
        events: tx,
        narration: Arc::clone(&narration),
    };
    let subscription = Subscription {
        events: rx,
        narration,
    };
    (subscriber, subscription)
}

struct State {
    seq: u64,
    queue: mpsc::UnboundedSender<Box<Queued>>,
}

/// An event on its way to the store; the terminal one carries the run's final record.
struct Queued {
    event: Event,
    record: Option<Box<RunRecord>>,
}

/// A run's opening event (`seq` 1), redacted, to be stored with its record
/// ([`RunLog::create_run_with`](keel_types::RunLog::create_run_with)) before [`Emitter::opened`] continues its log.
pub fn opening_event(pipeline: &Pipeline, run: &RunRecord, mut payload: EventPayload) -> Event {
    pipeline.redactor.redact(&mut payload);
    stamp(&run.request_id, &run.session_id, &run.agent, 1, payload)
}

/// Event `seq` of a run, made now.
fn stamp(
    request_id: &RequestId,
    session_id: &Option<SessionId>,
    agent: &str,
    seq: u64,
    payload: EventPayload,
) -> Event {
    Event {
        id: EventId::generate(),
        seq,
        ts: keel_types::now_rfc3339(),
        request_id: request_id.clone(),
        session_id: session_id.clone(),
        agent_id: agent.to_owned(),
        payload,
    }
}

impl Emitter {
    /// An emitter for `run`, whose log holds `last_seq` events already; `subscriber` receives
    /// every event (and narration) after it is stored; so does each of the pipeline's
    /// observers (stored events only, whether or not there is a subscriber). Must be created
    /// inside a Tokio runtime (it spawns the run's flusher).
    pub fn new(
        pipeline: &Pipeline,
        run: &RunRecord,
        last_seq: u64,
        subscriber: Option<Subscriber>,
    ) -> Self {
        Self::start(pipeline, run, last_seq, None, subscriber)
    }

    /// An emitter for a new run whose record was stored with its `opening` event; the opening
    /// reaches the subscriber and observers first, like any stored event.
    pub fn opened(
        pipeline: &Pipeline,
        run: &RunRecord,
        opening: Event,
        subscriber: Option<Subscriber>,
    ) -> Self {
        Self::start(pipeline, run, opening.seq, Some(opening), subscriber)
    }

    fn start(
        pipeline: &Pipeline,
        run: &RunRecord,
        last_seq: u64,
        stored: Option<Event>,
        subscriber: Option<Subscriber>,
    ) -> Self {
        let (queue, pending) = mpsc::unbounded_channel();
        let (publish, durable) = watch::channel(Ok(last_seq));
        let before = stored.as_ref().map_or(last_seq, |opening| opening.seq - 1);
        for observer in pipeline.observers.iter() {
            observer.opened(run, before);
        }
        let mut forwarder = Forwarder {
            subscriber,
            observers: pipeline.observers.clone(),
            narrator: pipeline.narrator.clone(),
            redactor: pipeline.redactor.clone(),
        };
        if let Some(event) = stored {
            forwarder.forward(event);
        }
        let urgent = Arc::new(Notify::new());
        tokio::spawn(flush(
            pending,
            pipeline.store.clone(),
            forwarder,
            publish,
            urgent.clone(),
            run.request_id.clone(),
        ));
        Self {
            request_id: run.request_id.clone(),
            session_id: run.session_id.clone(),
            agent: run.agent.clone(),
            redactor: pipeline.redactor.clone(),
            state: Mutex::new(State {
                seq: last_seq,
                queue,
            }),
            durable,
            urgent,
        }
    }

    /// Queues an event for the log; it reaches subscribers once it is stored. Returns its
    /// `seq`. Fails if an earlier append failed.
    pub fn emit(&self, payload: EventPayload) -> Result<u64, StoreError> {
        self.queue(payload, None)
    }

    /// Stores the run's terminal event and then its final `record` (its `event_count` set to
    /// the terminal event's `seq`), and waits until both are durable.
    pub async fn finish(
        &self,
        payload: EventPayload,
        record: RunRecord,
    ) -> Result<u64, StoreError> {
        let seq = self.queue(payload, Some(Box::new(record)))?;
        self.barrier().await?;
        Ok(seq)
    }

    fn queue(
        &self,
        mut payload: EventPayload,
        mut record: Option<Box<RunRecord>>,
    ) -> Result<u64, StoreError> {
        if let Err(error) = &*self.durable.borrow() {
            return Err(error.clone());
        }
        self.redactor.redact(&mut payload);
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        let seq = state.seq + 1;
        let event = stamp(
            &self.request_id,
            &self.session_id,
            &self.agent,
            seq,
            payload,
        );
        if let Some(record) = &mut record {
            record.event_count = seq;
        }
        state
            .queue
            .send(Box::new(Queued { event, record }))
            .map_err(|_| StoreError::Invalid("the run's event flusher stopped".into()))?;
        state.seq = seq;
        Ok(seq)
    }

    /// Emits an event and waits until it (and everything before it) is durable.
    pub async fn emit_durable(&self, payload: EventPayload) -> Result<u64, StoreError> {
        let seq = self.emit(payload)?;
        self.barrier().await?;
        Ok(seq)
    }

    /// Waits until every event emitted so far is stored and delivered to the subscriber.
    pub async fn barrier(&self) -> Result<(), StoreError> {
        let target = self.count();
        if self
            .durable
            .borrow()
            .as_ref()
            .is_ok_and(|seq| *seq < target)
        {
            self.urgent.notify_one();
        }
        let mut durable = self.durable.clone();
        let outcome = durable
            .wait_for(|d| d.as_ref().map_or(true, |seq| *seq >= target))
            .await
            .map_err(|_| StoreError::Invalid("the run's event flusher stopped".into()))?;
        match &*outcome {
            Ok(_) => Ok(()),
            Err(error) => Err(error.clone()),
        }
    }

    /// Number of events emitted so far (the last `seq`).
    pub fn count(&self) -> u64 {
        match self.state.lock() {
            Ok(state) => state.seq,
            Err(poisoned) => poisoned.into_inner().seq,
        }
    }
}

/// Delivers stored events to the observers, and them and narration derived from them to the
/// live subscriber.
struct Forwarder {
    subscriber: Option<Subscriber>,
    observers: Observers,
    narrator: Arc<Narrator>,
    redactor: Arc<Redactor>,
}

impl Forwarder {
    fn forward(&mut self, event: Event) {
        for observer in self.observers.iter() {
            observer.observe(&event);
        }
        let Some(subscriber) = &self.subscriber else {
            return;
        };
        let narration = subscriber
            .narration
            .load(Ordering::Relaxed)
            .then(|| self.narrator.narration_of(&event))
            .flatten()
            .map(|mut narration| {
                self.redactor.redact(&mut narration.payload);
                narration
            });
        // A subscriber that went away simply stops receiving.
        if subscriber.events.send(Box::new(event)).is_err() {
            self.subscriber = None;
        } else if let Some(narration) = narration {
            let _ = subscriber.events.send(Box::new(narration));
        }
    }
}

/// The run's flusher: appends whatever is queued in one call, then forwards it and publishes
/// the new durable `seq`. Ends when the emitter is dropped and the queue is drained, or at the
/// first failed append.
async fn flush(
    mut pending: mpsc::UnboundedReceiver<Box<Queued>>,
    store: Arc<dyn RunStore>,
    forwarder: Forwarder,
    publish: watch::Sender<Durable>,
    urgent: Arc<Notify>,
    run: RequestId,
) {
    let observers = forwarder.observers.clone();
    flush_until_done(&mut pending, store, forwarder, publish, urgent).await;
    for observer in observers.iter() {
        observer.closed(&run);
    }
}

async fn flush_until_done(
    pending: &mut mpsc::UnboundedReceiver<Box<Queued>>,
    store: Arc<dyn RunStore>,
    mut forwarder: Forwarder,
    publish: watch::Sender<Durable>,
    urgent: Arc<Notify>,
) {
    let mut queued = Vec::new();
    let mut batch = Vec::new();
    while pending.recv_many(&mut queued, 256).await > 0 {
        // A terminal event is stored at once (its run is finishing); anything else waits a
        // little for company, or for a barrier.
        if queued.last().is_some_and(|q| q.record.is_none()) {
            tokio::select! {
                () = urgent.notified() => {}
                () = tokio::time::sleep(LINGER) => {}
            }
            while queued.len() < 1024
                && let Ok(item) = pending.try_recv()
            {
                queued.push(item);
            }
        }
        // Only the terminal event carries a record, and nothing follows it.
        let mut record = None;
        for item in queued.drain(..) {
            record = item.record.or(record);
            batch.push(item.event);
        }
        let stored = match &record {
            Some(record) => store.append_and_update(&batch, record).await,
            None => store.append(&batch).await,
        };
        if let Err(error) = stored {
            tracing::error!(request_id = %batch[0].request_id, %error, "Could not store events.");
            let _previous = publish.send_replace(Err(error));
            return;
        }
        let last = batch.last().map_or(0, |e| e.seq);
        for event in batch.drain(..) {
            forwarder.forward(event);
        }
        let _previous = publish.send_replace(Ok(last));
    }
}
