//! Agent-run throughput: N runs of an agent against the `keel-mock-llm` server on loopback,
//! each with two streamed model rounds and one tool call (`read_file`). Reports runs/s,
//! p50/p99 latency, CPU time of this process per run and peak RSS, at concurrency 1 and 64,
//! for three lines measured in turn in each round (3 rounds by default):
//!
//! - **floor**: the same run as a minimal hand-written loop (hyper client, SSE parsed by hand,
//!   no Keel: `agent_runs/floor.rs`), the cost any agent loop has;
//! - **keel, store off**: Keel on a store that keeps nothing (`agent_runs/null_store.rs`);
//! - **keel, SQLite store**: Keel as it runs by default, the durable store and its log mirror;
//! - **keel, PostgreSQL** (with `KEEL_BENCH_PG=1`): Keel on the local PostgreSQL
//!   (`KEEL_TEST_DATABASE_URL`, a fresh schema dropped at the end), with the database's own
//!   CPU per run beside Keel's.
//!
//! and then each line's median CPU per run over the rounds, as a ratio to the floor's. The
//! mock runs in its own process, so its CPU is not counted.
//!
//! ```sh
//! cargo build --release -p keel-test-support --bin keel-mock-llm
//! cargo bench -p keel --bench agent_runs              # KEEL_BENCH_RUNS=20000 to change N
//! KEEL_BENCH_ROUNDS=5 cargo bench -p keel --bench agent_runs         # rounds per concurrency
//! KEEL_BENCH_LINES=sqlite cargo bench -p keel --bench agent_runs     # some lines (floor,off,sqlite,postgres)
//! KEEL_BENCH_PG=1 cargo bench -p keel --bench agent_runs   # and Keel on the local PostgreSQL
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
use support::{cpu_time, start_mock, target_dir};

#[path = "agent_runs/floor.rs"]
mod floor;
#[path = "agent_runs/null_store.rs"]
mod null_store;
use floor::Floor;
use null_store::NullStore;

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

/// What a line runs: Keel on a store, or the hand-written floor.
#[derive(Clone)]
enum Subject {
    Keel(Runtime),
    Floor(Arc<Floor>),
}

impl Subject {
    async fn run(&self) -> Duration {
        match self {
            Subject::Keel(runtime) => one_run(runtime).await,
            Subject::Floor(floor) => {
                let started = Instant::now();
                let text = floor.run("Read the README.").await;
                assert_eq!(text, "Done: I read the file.");
                started.elapsed()
            }
        }
    }
}

/// One line's figures.
struct Figures {
    /// The local PostgreSQL server's CPU per run meanwhile (its processes, from `/proc`).
    database_ms_per_run: f64,
    runs_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_ms_per_run: f64,
}

/// Measures `runs` runs of `subject`, `concurrency` at a time; with `database`, also the local
/// PostgreSQL server's CPU (read from `/proc` outside this process's measured CPU).
async fn measure(subject: &Subject, concurrency: usize, runs: usize, database: bool) -> Figures {
    let next = Arc::new(AtomicUsize::new(0));
    let database_cpu = || match database {
        true => keel_test_support::cpu::postgres_cpu_ms(),
        false => 0.0,
    };
    let database_before = database_cpu();
    let cpu_before = cpu_time();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let subject = subject.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                latencies.push(subject.run().await);
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
    let database_ms = database_cpu() - database_before;
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    Figures {
        database_ms_per_run: database_ms / runs as f64,
        runs_per_s: runs as f64 / wall.as_secs_f64(),
        p50_ms: pct(0.50).as_secs_f64() * 1000.0,
        p99_ms: pct(0.99).as_secs_f64() * 1000.0,
        cpu_ms_per_run: cpu.as_secs_f64() * 1000.0 / runs as f64,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
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

/// One line of the bench: what it measures, its name in `KEEL_BENCH_LINES`, and its runs.
struct Line {
    name: &'static str,
    key: &'static str,
    subject: Subject,
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is ignored too.
    let runs: usize = env_number("KEEL_BENCH_RUNS").unwrap_or(10_000);
    let rounds: usize = env_number("KEEL_BENCH_ROUNDS").unwrap_or(3).max(1);
    // `KEEL_BENCH_PG=1`: a fourth line, Keel on the local PostgreSQL (a fresh schema).
    let postgres = std::env::var("KEEL_BENCH_PG").is_ok_and(|v| v == "1");
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
        let keel_on = |store: Arc<dyn keel::RunStore>| {
            Runtime::builder()
                .workspace(ws.path())
                .store(store)
                .build()
                .unwrap()
        };
        let durable = keel_on(store.clone());
        let mut lines = vec![
            Line {
                name: "floor",
                key: "floor",
                subject: Subject::Floor(Arc::new(Floor::new(
                    &mock.base_url,
                    ws.path().to_owned(),
                ))),
            },
            Line {
                name: "keel, store off",
                key: "off",
                subject: Subject::Keel(keel_on(Arc::new(NullStore))),
            },
            Line {
                name: "keel, SQLite store",
                key: "sqlite",
                subject: Subject::Keel(durable.clone()),
            },
        ];
        let pg = match postgres {
            true => Some(pg_store().await),
            false => None,
        };
        if let Some(pg) = &pg {
            lines.push(Line {
                name: "keel, PostgreSQL",
                key: "postgres",
                subject: Subject::Keel(keel_on(Arc::new(pg.clone()))),
            });
        }
        // `KEEL_BENCH_LINES=sqlite` (or `floor,off`): only those lines, to profile one of them.
        if let Ok(keys) = std::env::var("KEEL_BENCH_LINES") {
            let keys: Vec<&str> = keys.split(',').map(str::trim).collect();
            lines.retain(|line| keys.contains(&line.key));
        }
        println!(
            "agent_runs: 2 streamed model rounds + 1 read_file call per run, mock at {}; \
             {rounds} rounds of: {}",
            mock.base_url,
            lines.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
        );
        for line in &lines {
            for _ in 0..200 {
                line.subject.run().await;
            }
        }
        for concurrency in concurrencies() {
            // One run at a time is slower: a fifth of the runs.
            let n = if concurrency == 1 { (runs / 5).max(1) } else { runs };
            let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); lines.len()];
            for round in 1..=rounds {
                let writes_before = store.write_stats();
                for (i, line) in lines.iter().enumerate() {
                    let postgres = line.key == "postgres";
                    let f = measure(&line.subject, concurrency, n, postgres).await;
                    let database = match postgres {
                        true => format!("  PostgreSQL CPU {:.3} ms/run", f.database_ms_per_run),
                        false => String::new(),
                    };
                    println!(
                        "concurrency {concurrency:>3} round {round} {:<19} {n} runs {:>7.0} runs/s  p50 {:>6.2} ms  p99 {:>6.2} ms  CPU {:.3} ms/run  peak RSS {:.1} MiB{database}",
                        line.name,
                        f.runs_per_s,
                        f.p50_ms,
                        f.p99_ms,
                        f.cpu_ms_per_run,
                        peak_rss_mib(),
                    );
                    cpu[i].push(f.cpu_ms_per_run);
                }
                let writes = store.write_stats();
                let per_run = |n_: u64| n_ as f64 / n as f64;
                println!(
                    "                 SQLite store per run: {:.2} commits, {:.2} writes, {:.2} events",
                    per_run(writes.commits - writes_before.commits),
                    per_run(writes.commands - writes_before.commands),
                    per_run(writes.events - writes_before.events),
                );
            }
            let medians: Vec<f64> = cpu.into_iter().map(median).collect();
            let floor = lines.iter().position(|l| l.key == "floor").map(|i| medians[i]);
            let summary: Vec<String> = lines
                .iter()
                .zip(&medians)
                .map(|(line, cpu)| match floor {
                    Some(floor) if line.key != "floor" => {
                        format!("{} {cpu:.3} ms ({:.2}x the floor)", line.name, cpu / floor)
                    }
                    _ => format!("{} {cpu:.3} ms", line.name),
                })
                .collect();
            println!(
                "concurrency {concurrency:>3}, medians of {rounds}: CPU/run {}",
                summary.join(", ")
            );
        }
        if let Some(stats) = durable.telemetry() {
            println!(
                "otlp: {} spans exported, {} dropped, {} exports failed",
                stats.spans_exported.load(Ordering::Relaxed),
                stats.spans_dropped(),
                stats.exports_failed.load(Ordering::Relaxed)
            );
        }
        drop(lines);
        if let Some(pg) = pg {
            pg.drop_schema().await.unwrap();
        }
    });
}

/// A `PgStore` on the local database (`KEEL_TEST_DATABASE_URL`), in a fresh schema.
async fn pg_store() -> keel_store::PgStore {
    let options = keel_store::PgOptions {
        schema: Some(format!("bench_agent_runs_{}", std::process::id())),
        ..keel_store::PgOptions::new(keel_test_support::database_url())
    };
    keel_store::PgStore::connect(options).await.unwrap()
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
