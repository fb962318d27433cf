//! Integration tests of keel-store on real files and real SQLite databases in temp dirs.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod backends;
mod candidates;
mod checkpoints;
mod claims;
mod concurrency;
mod corrupt;
mod evals;
mod health;
mod memory;
mod multiprocess;
mod pagination;
mod postgres;
mod records;
mod recovery;
mod segments;
mod seq_rules;
mod session_owners;
mod sqlite;

use keel_types::RunLog;
use std::path::Path;

use keel_store::SqliteStore;
use keel_types::{
    AdapterEvent, Event, EventId, EventPayload, FinishReason, RequestId, RunRecord, RunStatus,
    RunStore, Usage,
};

/// A run record with the given status.
pub fn record(id: &str, agent: &str, status: RunStatus) -> RunRecord {
    let mut run = RunRecord::new(RequestId::from(id), None, agent, "hi");
    run.status = status;
    run
}

/// An event of run `id`.
pub fn event(id: &str, seq: u64, payload: EventPayload) -> Event {
    Event {
        id: EventId::generate(),
        seq,
        ts: "2026-11-22T12:00:00.000Z".into(),
        request_id: RequestId::from(id),
        session_id: None,
        agent_id: "a".into(),
        payload,
    }
}

/// A `runtime.request.started` event.
pub fn started(id: &str, seq: u64) -> Event {
    event(
        id,
        seq,
        EventPayload::RequestStarted {
            input: format!("input {seq}"),
            history: Vec::new(),
            mode: None,
            metadata: Default::default(),
            params: Default::default(),
            output_schema: None,
            session_owner_overridden: None,
        },
    )
}

/// A `runtime.adapter.event` output delta, like most of a real run's log.
pub fn delta(id: &str, seq: u64) -> Event {
    event(
        id,
        seq,
        EventPayload::Adapter {
            event: AdapterEvent::OutputDelta {
                adapter: "native".into(),
                step: 1,
                text: format!("delta {seq} of {id}: some streamed answer text"),
            },
        },
    )
}

/// A `runtime.request.completed` event (terminal).
pub fn completed(id: &str, seq: u64) -> Event {
    event(
        id,
        seq,
        EventPayload::RequestCompleted {
            output: "done".into(),
            value: None,
            finish_reason: FinishReason::Completed,
            usage: Usage::default(),
            steps: 1,
            duration_ms: 5,
        },
    )
}

/// A SQLite store in a fresh temp workspace.
pub fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    (dir, store)
}

/// Creates run `id` and appends `started` plus `count - 1` deltas, one append each.
pub async fn run_with_events(store: &dyn RunStore, id: &str, count: u64) {
    store
        .create_run(&record(id, "a", RunStatus::Running))
        .await
        .unwrap();
    store.append(&[started(id, 1)]).await.unwrap();
    for seq in 2..=count {
        store.append(&[delta(id, seq)]).await.unwrap();
    }
}

/// The `seq`s of a run's stored events.
pub async fn stored_seqs(store: &dyn RunStore, id: &str) -> Vec<u64> {
    store
        .events(&RequestId::from(id), 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect()
}

/// Asserts that a run's mirror holds exactly the store's events (parsed and compared).
pub async fn assert_mirror_matches(store: &SqliteStore, id: &str) {
    let id = RequestId::from(id);
    let stored = store.events(&id, 0).await.unwrap();
    let mirrored = keel_store::read_events_file(&store.events_path(&id)).unwrap();
    assert_eq!(mirrored, stored, "mirror of {id} differs from the store");
    let text = std::fs::read_to_string(store.events_path(&id)).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "no torn tail");
}

/// A direct connection to a store's database, for setting up states the API cannot make.
pub fn raw_db(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn
}

/// The pid of a process that has exited (and been reaped).
pub fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}
