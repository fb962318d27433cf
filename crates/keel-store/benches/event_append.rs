//! Durable event-append throughput of `SqliteStore` (WAL, `synchronous = FULL`, group commit).
//!
//! ```text
//! cargo bench -p keel-store --bench event_append
//! ```
//!
//! Each scenario appends realistic events (`runtime.adapter.event` output deltas, about 300
//! bytes of JSON) from N concurrent runs for a few seconds — one event per call (64 runs,
//! then 1), and 16 per call (64 runs: the runtime's pipelined flusher under load) — and prints events/s, the p50/p99 latency of one `append` (until the event is
//! committed, synced and mirrored) and how many commits (batches, one WAL sync each) that took.
//!
//! Knobs: `KEEL_BENCH_DIR` (where the workspaces go; default `target/keel-bench`, not `/tmp`,
//! which is slow and noisy on small machines), `KEEL_BENCH_SECS` (per scenario, default 5),
//! `KEEL_BENCH_RUNS` (concurrent runs of the main scenario, default 64).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

#[path = "support/mod.rs"]
mod support;

use keel_types::RunLog;
use std::path::Path;
use std::time::{Duration, Instant};

use keel_store::SqliteStore;
use keel_types::{Event, RequestId, RunRecord};
use support::{bench_dir, delta, env_number};

fn main() {
    let secs = env_number("KEEL_BENCH_SECS", 5);
    let runs = env_number("KEEL_BENCH_RUNS", 64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = bench_dir();
    std::fs::create_dir_all(&base).unwrap();
    let base = base.canonicalize().unwrap();
    let sample = serde_json::to_string(&delta(&RequestId::generate(), 2)).unwrap();
    println!(
        "event_append: durable appends (WAL, synchronous=FULL, group commit); {} bytes/event; {secs}s per scenario; in {}",
        sample.len(),
        base.display()
    );
    let duration = Duration::from_secs(secs as u64);
    // (concurrent runs, events per `append` call): one at a time, as a run emits them; and
    // batched, as the runtime's per-run flusher sends what queued while the last append was
    // being committed (pipelined emission under load).
    for (writers, per_call) in [(runs, 1), (runs, 16), (1, 1)] {
        runtime.block_on(scenario(&base, writers, per_call, duration));
    }
}

async fn scenario(base: &Path, runs: usize, per_call: u64, duration: Duration) {
    let name = format!("{runs} runs x {per_call}/append");
    let dir = base.join(format!("event_append-{runs}-{per_call}"));
    let _ = std::fs::remove_dir_all(&dir);
    let store = SqliteStore::open(&dir).unwrap();
    let before = store.write_stats();
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..runs)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let id = RequestId::generate();
                store
                    .create_run(&RunRecord::new(id.clone(), None, "assistant", "bench"))
                    .await
                    .unwrap();
                let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
                let mut seq = 1;
                while Instant::now() < deadline {
                    let events: Vec<Event> = (seq..seq + per_call).map(|s| delta(&id, s)).collect();
                    let sent = Instant::now();
                    store.append(&events).await.unwrap();
                    latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                    seq += per_call;
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = start.elapsed();
    let after = store.write_stats();
    latencies.sort_unstable();
    let percentile = |p: f64| {
        let index = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(index).copied().unwrap_or(0)
    };
    let events = after.events - before.events;
    let commits = after.commits - before.commits;
    println!(
        "{name:>22}: {:>7.0} events/s  p50 {:>6} µs  p99 {:>6} µs  {events} events in {commits} commits ({:.1} events/commit) over {:.1}s",
        events as f64 / elapsed.as_secs_f64(),
        percentile(0.50),
        percentile(0.99),
        events as f64 / commits.max(1) as f64,
        elapsed.as_secs_f64(),
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
