//! The emission pipeline of one run (SPEC §7): redact → durable append → live subscribers,
//! then the narrator's derived view to subscribers only.
//!
//! `seq` is assigned under the emitter's lock, so events are stored dense and in order even
//! when concurrent tool calls emit at once.

use std::sync::Arc;

use keel_types::{Event, EventId, EventPayload, RequestId, RunStore, SessionId, StoreError};
use tokio::sync::{Mutex, mpsc};

use crate::narrator::Narrator;
use crate::redact::Redactor;

/// Emits the events of one run.
pub struct Emitter {
    request_id: RequestId,
    session_id: Option<SessionId>,
    agent: String,
    store: Arc<dyn RunStore>,
    redactor: Arc<Redactor>,
    narrator: Arc<Narrator>,
    state: Mutex<State>,
}

struct State {
    seq: u64,
    subscriber: Option<mpsc::UnboundedSender<Event>>,
}

impl Emitter {
    /// An emitter for a run whose log holds `last_seq` events already; `subscriber` receives
    /// every event (and narration) after it is stored.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        last_seq: u64,
        request_id: RequestId,
        session_id: Option<SessionId>,
        agent: String,
        store: Arc<dyn RunStore>,
        redactor: Arc<Redactor>,
        narrator: Arc<Narrator>,
        subscriber: Option<mpsc::UnboundedSender<Event>>,
    ) -> Self {
        Self {
            request_id,
            session_id,
            agent,
            store,
            redactor,
            narrator,
            state: Mutex::new(State {
                seq: last_seq,
                subscriber,
            }),
        }
    }

    /// Stores an event and then shows it to subscribers. Returns the stored event.
    pub async fn emit(&self, mut payload: EventPayload) -> Result<Event, StoreError> {
        self.redactor.redact(&mut payload);
        let mut state = self.state.lock().await;
        let event = Event {
            id: EventId::generate(),
            seq: state.seq + 1,
            ts: keel_types::now_rfc3339(),
            request_id: self.request_id.clone(),
            session_id: self.session_id.clone(),
            agent_id: self.agent.clone(),
            payload,
        };
        self.store.append(std::slice::from_ref(&event)).await?;
        state.seq = event.seq;
        if let Some(subscriber) = &state.subscriber {
            let narration = self.narrator.narrate(&event).map(|text| {
                let mut payload = EventPayload::Narration {
                    text,
                    source_event_ids: vec![event.id.clone()],
                };
                self.redactor.redact(&mut payload);
                Event {
                    id: EventId::generate(),
                    payload,
                    ..event.clone()
                }
            });
            // A subscriber that went away simply stops receiving.
            if subscriber.send(event.clone()).is_err() {
                state.subscriber = None;
            } else if let Some(narration) = narration {
                let _ = subscriber.send(narration);
            }
        }
        Ok(event)
    }

    /// Number of events stored so far.
    pub async fn count(&self) -> u64 {
        self.state.lock().await.seq
    }
}
