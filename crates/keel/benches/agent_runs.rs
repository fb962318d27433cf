//! Agent-run throughput: N runs of an agent against the `keel-mock-llm` server on loopback,
//! each with two streamed model rounds and one tool call (`read_file`), the event log on.
//! Reports runs/s, p50/p99 latency, CPU time of this process per run and peak RSS, at
//! concurrency 1 and 64. The mock runs in its own process, so its CPU is not counted.
//!
//! ```sh
//! cargo build --release -p keel-test-support --bin keel-mock-llm
//! cargo bench -p keel --bench agent_runs              # KEEL_BENCH_RUNS=20000 to change N
//! KEEL_BENCH_CONCURRENCY=1 cargo bench -p keel --bench agent_runs   # one concurrency only
//! KEEL_BENCH_PROVIDER=anthropic cargo bench -p keel --bench agent_runs   # the Messages API
//! KEEL_BENCH_OTLP=sink cargo bench -p keel --bench agent_runs   # spans and metrics exported
//! ```
//!
//! `KEEL_BENCH_OTLP=sink` exports every run's spans and the GenAI metrics over OTLP/HTTP to the
//! mock's OTLP sink (which accepts without decoding); `KEEL_BENCH_OTLP=1` to the tests'
//! receiver (`otlp_receiver.py`, decoding with the official protobuf definitions, in Python:
//! on a 2-core machine it competes with Keel for the CPU). Both report what was exported and
//! dropped; `KEEL_BENCH_OTLP_METRICS=0` exports spans only.
//!
//! Each concurrency also reports the store's writes per run: commits (each one WAL sync),
//! write calls, events.
//!
//! The run log goes to a temporary workspace under `target/` (or `KEEL_BENCH_DIR`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel::{RequestOptions, RunStatus, Runtime};
use keel_store::SqliteStore;
use keel_test_support::{TempWorkspace, WorkspaceBuilder};

mod support;
use support::{start_mock, target_dir};

/// A temporary workspace under `KEEL_BENCH_DIR`, or under the target directory: a project
/// folder on the ordinary disk, as users have (on some machines `/tmp` is far slower).
fn workspace(base_url: &str, otlp: Option<&str>) -> TempWorkspace {
    let parent = std::env::var("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| target_dir());
    // `KEEL_BENCH_OTLP_METRICS=0`: spans only.
    let metrics = std::env::var("KEEL_BENCH_OTLP_METRICS").is_ok_and(|v| v == "0");
    let observability = otlp
        .map(|endpoint| {
            format!(
                ", observability: {{ otlp: {{ endpoint: \"{endpoint}\", metrics: {} }} }}",
                !metrics
            )
        })
        .unwrap_or_default();
    // `KEEL_BENCH_PROVIDER=anthropic`: the same runs through the Messages API.
    let builder = WorkspaceBuilder::new().runtime(&format!(
        "{{ limits: {{ maxConcurrentRuns: 256 }}{observability} }}"
    ));
    let builder = match std::env::var("KEEL_BENCH_PROVIDER").as_deref() {
        Ok("anthropic") => builder.model(
            "mock",
            &format!(
                "{{ provider: anthropic, baseUrl: \"{}\", model: mock-model }}",
                base_url.trim_end_matches("/v1")
            ),
        ),
        _ => builder.openai_model_at("mock", base_url),
    };
    builder
        .agent(
            "bench",
            "
            model: mock
            instructions: You are a benchmark agent.
            tools: [read_file]
            ",
        )
        .file("README.md", "# Bench\nA small file the agent reads.\n")
        .build_in(parent)
}

/// User + system CPU time of this process, from /proc (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based in proc(5)).
    let utime: u64 = fields[11].parse().unwrap();
    let stime: u64 = fields[12].parse().unwrap();
    Duration::from_millis((utime + stime) * 10)
}

/// Peak resident set size in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

async fn one_run(runtime: &Runtime) -> Duration {
    let started = Instant::now();
    let mut handle = runtime
        .request(RequestOptions {
            input: "Read the README.".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.steps, 2);
    started.elapsed()
}

async fn measure(runtime: &Runtime, store: &SqliteStore, concurrency: usize, runs: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let writes_before = store.write_stats();
    let cpu_before = cpu_time();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let runtime = runtime.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                latencies.push(one_run(&runtime).await);
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(runs);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let wall = started.elapsed();
    let cpu = cpu_time() - cpu_before;
    let writes = store.write_stats();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "concurrency {concurrency:>3}: {runs} runs in {:.2}s  {:>7.0} runs/s  p50 {:>7.2} ms  p99 {:>7.2} ms  CPU {:.3} ms/run  peak RSS {:.1} MiB",
        wall.as_secs_f64(),
        runs as f64 / wall.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        cpu.as_secs_f64() * 1000.0 / runs as f64,
        peak_rss_mib(),
    );
    let per_run = |n: u64| n as f64 / runs as f64;
    println!(
        "                 store per run: {:.2} commits, {:.2} writes, {:.2} events",
        per_run(writes.commits - writes_before.commits),
        per_run(writes.commands - writes_before.commands),
        per_run(writes.events - writes_before.events),
    );
}

/// The concurrencies to measure: `KEEL_BENCH_CONCURRENCY` (say `1` or `1,64`), 1 and 64 by
/// default.
fn concurrencies() -> Vec<usize> {
    std::env::var("KEEL_BENCH_CONCURRENCY")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .filter(|c: &Vec<usize>| !c.is_empty())
        .unwrap_or_else(|| vec![1, 64])
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is ignored too.
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let mock = start_mock();
    let otlp = std::env::var("KEEL_BENCH_OTLP").unwrap_or_default();
    let receiver =
        (otlp == "1").then(|| keel_test_support::otlp::OtlpReceiver::start_with(&["--quiet"]));
    let endpoint = match (&receiver, otlp.as_str()) {
        (Some(receiver), _) => Some(receiver.http_endpoint()),
        (None, "sink") => Some(mock.base_url.trim_end_matches("/v1").to_owned()),
        _ => None,
    };
    let ws = workspace(&mock.base_url, endpoint.as_deref());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The store the runtime would open by default, kept here to read its write totals.
        let store = Arc::new(SqliteStore::open(ws.path()).unwrap());
        let runtime = Runtime::builder()
            .workspace(ws.path())
            .store(store.clone())
            .build()
            .unwrap();
        println!(
            "agent_runs: 2 streamed model rounds + 1 read_file call per run, JSONL event log on, mock at {}",
            mock.base_url
        );
        for _ in 0..200 {
            one_run(&runtime).await;
        }
        for concurrency in concurrencies() {
            // One run at a time is slower: a fifth of the runs.
            let n = if concurrency == 1 { (runs / 5).max(1) } else { runs };
            measure(&runtime, &store, concurrency, n).await;
        }
        if let Some(stats) = runtime.telemetry() {
            println!(
                "otlp: {} spans exported, {} dropped, {} exports failed",
                stats.spans_exported.load(Ordering::Relaxed),
                stats.spans_dropped(),
                stats.exports_failed.load(Ordering::Relaxed)
            );
        }
    });
}
