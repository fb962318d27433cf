//! `keel usage` over a large store: `cargo bench -p keel --bench usage_query`
//! (`KEEL_BENCH_RUNS=N` runs, default 100,000, of 10 priced rounds each: a million rounds;
//! `KEEL_BENCH_DIR` for where the store goes, default the temp dir).
//!
//! Fills a SQLite store with N completed runs over 20 agents and 1,000 sessions, each run's
//! record holding the usage and cost of its 10 rounds, then times the sums `keel usage` and
//! `GET /api/usage` compute (by agent, by day), and prints the medians of 5 tries.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::{
    Amount, Cost, Currency, RequestId, RunFilter, RunRecord, RunStatus, RunStore, SessionId, Usage,
    UsageBy, usage_by,
};
use keel_store::SqliteStore;

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let base = std::env::var_os("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("keel-usage-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open(&dir).unwrap());
    let round = Usage {
        cost: Some(Cost {
            amount: "0.00307425".parse::<Amount>().unwrap(),
            currency: Currency::USD,
        }),
        cache_read_tokens: 700,
        ..Usage::new(1_237, 83)
    };
    let filled = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for n in (worker..runs).step_by(64) {
                let session = SessionId::parse(&format!("s{}", n % 1_000)).unwrap();
                let mut record = RunRecord::new(
                    RequestId::generate(),
                    Some(session),
                    format!("agent{}", n % 20),
                    "input",
                );
                let mut usage = Usage::default();
                for _ in 0..10 {
                    usage.add(&round);
                }
                record.usage = usage;
                record.status = RunStatus::Completed;
                store.create_run(&record).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "usage_query: {runs} runs ({} rounds) stored in {:.1}s",
        runs * 10,
        filled.elapsed().as_secs_f64()
    );
    for by in [UsageBy::Agent, UsageBy::Day] {
        let mut times: Vec<Duration> = Vec::new();
        let mut groups = 0;
        for _ in 0..5 {
            let started = Instant::now();
            let rows = usage_by(store.as_ref(), by, &RunFilter::default())
                .await
                .unwrap();
            times.push(started.elapsed());
            groups = rows.len();
        }
        times.sort();
        println!(
            "usage_query: by {by:?}: {groups} groups, median {:.0} ms (target < 200 ms over a million rounds)",
            times[2].as_secs_f64() * 1e3
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
