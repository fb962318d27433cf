//! What the store's benchmarks share: knobs from the environment, where workspaces go, and a
//! realistic event.

use keel_types::{AdapterEvent, Event, EventId, EventPayload, RequestId, now_rfc3339};

/// A number from the environment, or `default`.
pub(crate) fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) use keel_test_support::bench_dir;

/// An event of run `id` from the agent `assistant`, now.
pub(crate) fn event(id: &RequestId, seq: u64, payload: EventPayload) -> Event {
    Event {
        id: EventId::generate(),
        seq,
        ts: now_rfc3339(),
        request_id: id.clone(),
        session_id: None,
        agent_id: "assistant".into(),
        payload,
    }
}

/// An output delta of about 300 bytes of JSON, like a streamed answer chunk.
pub(crate) fn delta(id: &RequestId, seq: u64) -> Event {
    event(
        id,
        seq,
        EventPayload::Adapter {
            event: AdapterEvent::OutputDelta {
                adapter: "native".into(),
                step: 3,
                text: "The quick brown fox jumps over the lazy dog while the model keeps \
                       streaming its answer, token after token, chunk after chunk."
                    .into(),
            },
        },
    )
}
