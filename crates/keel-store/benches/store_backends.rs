//! The same durable work on SQLite and on PostgreSQL with one and two replicas.
//!
//! ```text
//! cargo bench -p keel-store --bench store_backends
//! ```
//!
//! Two workloads, each for `KEEL_BENCH_SECS` (default 5) with `KEEL_BENCH_RUNS` (default 64)
//! concurrent writers, repeated `KEEL_BENCH_ROUNDS` times (default 3; medians printed):
//!
//! - **events/s**: each writer appends output deltas (about 300 bytes of JSON) to its run, one
//!   event per call, each call waiting for its commit — as the runtime's emitter does;
//! - **runs/s**: each writer runs whole run lifecycles at the store as the runtime writes them:
//!   the record with its opening event (`create_run_with`), three batches of deltas (4 events
//!   each), the terminal event with the final record (`append_and_update`) — 14 events and 5
//!   durable writes per run.
//!
//! Backends: `sqlite` (WAL, `synchronous = FULL`, group commit, JSONL mirror; under
//! `KEEL_BENCH_DIR`, default `target/keel-bench`), `postgres x1` (one `PgStore`: one pool, one
//! group-commit writer, one lease), `postgres x2` (two `PgStore`s on the same schema, each
//! with its own pool, writer and lease, half the writers each — two replicas' store layers; in
//! one process here, so the client side shares this process's cores). PostgreSQL is
//! `KEEL_TEST_DATABASE_URL` (default the local `postgres://postgres@127.0.0.1:5432/test`), in
//! a fresh schema dropped afterwards; the server's own settings apply (`synchronous_commit`
//! on by default: a commit is flushed to its WAL). Each line also gives the CPU time per event
//! or run of this process (Keel's store layer) and, for PostgreSQL, of the local server's
//! processes (read from `/proc`: the database's own cost, on the same two cores).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

#[path = "support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_store::{PgOptions, PgStore, SqliteStore};
use keel_test_support::cpu::{own_cpu_ms, postgres_cpu_ms};
use keel_test_support::database_url;
use keel_types::{
    Event, EventPayload, FinishReason, RequestId, RunRecord, RunStatus, RunStore, Usage,
    now_rfc3339,
};
use support::{bench_dir, delta, env_number, event};

fn main() {
    let secs = env_number("KEEL_BENCH_SECS", 5);
    let writers = env_number("KEEL_BENCH_RUNS", 64);
    let rounds = env_number("KEEL_BENCH_ROUNDS", 3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let duration = Duration::from_secs(secs as u64);
    println!(
        "store_backends: {writers} concurrent writers, {secs}s per measurement, median of {rounds} rounds"
    );
    for workload in [Workload::Events, Workload::Runs] {
        for backend in [Backend::Sqlite, Backend::Postgres(1), Backend::Postgres(2)] {
            let measured: Vec<Measured> = (0..rounds)
                .map(|_| runtime.block_on(measure(backend, workload, writers, duration)))
                .collect();
            let median = |pick: fn(&Measured) -> f64| {
                let mut values: Vec<f64> = measured.iter().map(pick).collect();
                values.sort_by(f64::total_cmp);
                values[values.len() / 2]
            };
            let database = match backend {
                Backend::Sqlite => String::new(),
                Backend::Postgres(_) => {
                    format!(", PostgreSQL CPU {:.3} ms", median(|m| m.database_cpu_ms))
                }
            };
            println!(
                "{:>8} {:<12} median {:>8.0}/s   rounds: {}   per {}: Keel CPU {:.3} ms{database}",
                workload.name(),
                backend.name(),
                median(|m| m.rate),
                measured
                    .iter()
                    .map(|m| format!("{:.0}", m.rate))
                    .collect::<Vec<_>>()
                    .join(", "),
                workload.item(),
                median(|m| m.own_cpu_ms),
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Workload {
    Events,
    Runs,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Runs => "runs",
        }
    }

    fn item(self) -> &'static str {
        match self {
            Self::Events => "event",
            Self::Runs => "run",
        }
    }
}

#[derive(Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres(usize),
}

impl Backend {
    fn name(self) -> String {
        match self {
            Self::Sqlite => "sqlite".into(),
            Self::Postgres(n) => format!("postgres x{n}"),
        }
    }
}

/// One run's whole life at the store, written as the runtime writes it: the record with its
/// opening event (`create_run_with`), three batches of deltas, the terminal event with the
/// final record (`append_and_update`). Returns its events.
async fn one_run(store: &dyn RunStore) -> u64 {
    let id = RequestId::generate();
    let mut run = RunRecord::new(id.clone(), None, "assistant", "bench");
    run.status = RunStatus::Running;
    let opening = EventPayload::RequestStarted {
        input: "bench".into(),
        history: Vec::new(),
        mode: None,
        metadata: Default::default(),
        params: Default::default(),
        output_schema: None,
        session_owner_overridden: None,
    };
    store
        .create_run_with(&run, &[event(&id, 1, opening)])
        .await
        .unwrap();
    let mut seq = 2;
    for _ in 0..3 {
        let batch: Vec<Event> = (seq..seq + 4).map(|s| delta(&id, s)).collect();
        store.append(&batch).await.unwrap();
        seq += 4;
    }
    let done = EventPayload::RequestCompleted {
        output: "done".into(),
        value: None,
        finish_reason: FinishReason::Completed,
        usage: Usage::default(),
        steps: 1,
        duration_ms: 1,
    };
    run.status = RunStatus::Completed;
    run.event_count = seq;
    run.ended_at = Some(now_rfc3339());
    store
        .append_and_update(&[event(&id, seq, done)], &run)
        .await
        .unwrap();
    seq
}

/// One measurement: items (events or runs) per second, and the CPU each cost this process
/// and the local PostgreSQL server (in milliseconds).
struct Measured {
    rate: f64,
    own_cpu_ms: f64,
    database_cpu_ms: f64,
}

async fn measure(
    backend: Backend,
    workload: Workload,
    writers: usize,
    duration: Duration,
) -> Measured {
    let (stores, cleanup): (Vec<Arc<dyn RunStore>>, Cleanup) = match backend {
        Backend::Sqlite => {
            let dir = bench_dir().join(format!("store_backends-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let store = SqliteStore::open(&dir).unwrap();
            (vec![Arc::new(store)], Cleanup::Dir(dir))
        }
        Backend::Postgres(replicas) => {
            let schema = format!("bench_{}", uuid::Uuid::now_v7().simple());
            let options = PgOptions {
                schema: Some(schema),
                max_connections: 16,
                ..PgOptions::new(database_url())
            };
            let first = PgStore::connect(options.clone()).await.unwrap();
            let mut stores: Vec<Arc<dyn RunStore>> = vec![Arc::new(first.clone())];
            for _ in 1..replicas {
                stores.push(Arc::new(PgStore::connect(options.clone()).await.unwrap()));
            }
            (stores, Cleanup::Schema(first))
        }
    };
    // The database's CPU is read outside this process's measured CPU (reading `/proc` costs).
    let database_before = postgres_cpu_ms();
    let own_before = own_cpu_ms();
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let store = stores[i % stores.len()].clone();
            tokio::spawn(async move {
                let mut done = 0u64;
                match workload {
                    Workload::Events => {
                        let id = RequestId::generate();
                        let mut run = RunRecord::new(id.clone(), None, "assistant", "bench");
                        run.status = RunStatus::Running;
                        store.create_run(&run).await.unwrap();
                        let mut seq = 1;
                        while Instant::now() < deadline {
                            store.append(&[delta(&id, seq)]).await.unwrap();
                            seq += 1;
                            done += 1;
                        }
                    }
                    Workload::Runs => {
                        while Instant::now() < deadline {
                            one_run(store.as_ref()).await;
                            done += 1;
                        }
                    }
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    let items = total.max(1) as f64;
    let own_cpu_ms = (own_cpu_ms() - own_before) / items;
    let database_cpu_ms = (postgres_cpu_ms() - database_before) / items;
    drop(stores);
    match cleanup {
        Cleanup::Dir(dir) => {
            let _ = std::fs::remove_dir_all(dir);
        }
        Cleanup::Schema(store) => store.drop_schema().await.unwrap(),
    }
    Measured {
        rate,
        own_cpu_ms,
        database_cpu_ms,
    }
}

enum Cleanup {
    Dir(PathBuf),
    Schema(PgStore),
}
