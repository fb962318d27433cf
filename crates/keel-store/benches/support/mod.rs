//! What the store's benchmarks share: knobs from the environment, where workspaces go, and a
//! realistic event.

use std::path::PathBuf;

use keel_types::{AdapterEvent, Event, EventId, EventPayload, RequestId, now_rfc3339};

/// A number from the environment, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Where benchmark workspaces go: `KEEL_BENCH_DIR`, or `target/keel-bench` (not `/tmp`, which
/// is slow and noisy on small machines).
pub fn bench_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("KEEL_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    target.join("keel-bench")
}

/// An output delta of about 300 bytes of JSON, like a streamed answer chunk.
pub fn delta(id: &RequestId, seq: u64) -> Event {
    Event {
        id: EventId::generate(),
        seq,
        ts: now_rfc3339(),
        request_id: id.clone(),
        session_id: None,
        agent_id: "assistant".into(),
        payload: EventPayload::Adapter {
            event: AdapterEvent::OutputDelta {
                adapter: "native".into(),
                step: 3,
                text: "The quick brown fox jumps over the lazy dog while the model keeps \
                       streaming its answer, token after token, chunk after chunk."
                    .into(),
            },
        },
    }
}
