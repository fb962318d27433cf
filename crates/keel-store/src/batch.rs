//! The append contract shared by both stores: a batch holds events of one run, dense in `seq`,
//! none of them derived. [`encode`] checks that and serializes each event once — in the
//! caller's task, so the SQLite writer thread only copies bytes.

use keel_types::{Event, RequestId, StoreError};

/// One event, checked and serialized.
#[derive(Debug)]
pub(crate) struct EncodedEvent {
    pub seq: u64,
    pub id: String,
    pub type_name: &'static str,
    pub ts: String,
    /// The whole event as compact JSON: the `body` column and the mirror line.
    pub body: String,
}

/// A checked batch of one run's events.
#[derive(Debug)]
pub(crate) struct EncodedBatch {
    pub request_id: RequestId,
    pub events: Vec<EncodedEvent>,
    /// Whether the batch ends the run (its mirror can then be closed).
    pub terminal: bool,
}

impl EncodedBatch {
    /// `seq` of the first event.
    pub(crate) fn first_seq(&self) -> u64 {
        self.events.first().map_or(0, |e| e.seq)
    }

    /// `seq` of the last event.
    pub(crate) fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |e| e.seq)
    }

    /// The size of the batch's mirror lines (each event's JSON and a newline).
    pub(crate) fn bytes(&self) -> usize {
        self.events.iter().map(|e| e.body.len() + 1).sum()
    }
}

/// Checks a batch against the contract (one run, dense `seq`, nothing derived) and serializes
/// it. Returns `None` for an empty batch. Continuity with the stored log is checked by the
/// store, which knows its last `seq`.
pub(crate) fn encode(events: &[Event]) -> Result<Option<EncodedBatch>, StoreError> {
    let Some(first) = events.first() else {
        return Ok(None);
    };
    let id = &first.request_id;
    let mut encoded = Vec::with_capacity(events.len());
    for (expected, event) in (first.seq..).zip(events) {
        if &event.request_id != id || event.seq != expected {
            return Err(seq_error(event, expected, id));
        }
        if event.payload.is_derived() {
            return Err(StoreError::Invalid(format!(
                "{} is a derived view and is never stored",
                event.type_name()
            )));
        }
        let body = serde_json::to_string(event).map_err(|e| {
            StoreError::Invalid(format!("event {} cannot be serialized: {e}", event.id))
        })?;
        encoded.push(EncodedEvent {
            seq: event.seq,
            id: event.id.0.clone(),
            type_name: event.type_name(),
            ts: event.ts.clone(),
            body,
        });
    }
    Ok(Some(EncodedBatch {
        request_id: id.clone(),
        terminal: events.iter().any(|e| e.payload.is_terminal()),
        events: encoded,
    }))
}

/// The error for an event whose `seq` (or run) is not the expected one.
pub(crate) fn seq_error(event: &Event, expected: u64, id: &RequestId) -> StoreError {
    StoreError::Invalid(format!(
        "event {} of run {} has seq {}, expected {expected} of run {id}",
        event.type_name(),
        event.request_id,
        event.seq,
    ))
}

/// The error for a batch whose first `seq` does not continue the stored log.
pub(crate) fn continuity_error(batch: &EncodedBatch, expected: u64) -> StoreError {
    let (type_name, seq) = batch
        .events
        .first()
        .map_or(("(none)", 0), |e| (e.type_name, e.seq));
    let id = &batch.request_id;
    StoreError::Invalid(format!(
        "event {type_name} of run {id} has seq {seq}, expected {expected} of run {id}"
    ))
}
