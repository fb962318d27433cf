//! Governed MCP tool calls over stdio: calls per second and latency per call against a minimal
//! server (`benches/mcp/echo_server.py`: the official Python SDK, one read-only tool
//! `echo(text)`), compared with calling the same server from Python in the same run.
//!
//! ```sh
//! cargo bench -p keel --bench mcp_calls       # KEEL_BENCH_CALLS=N (1000), KEEL_BENCH_ROUNDS=R (5)
//! KEEL_BENCH_WAYS="keel run" cargo bench -p keel --bench mcp_calls   # some ways only (to profile)
//! ```
//!
//! Each round measures N sequential calls (after a warm-up) five ways, each client with a
//! server process of its own (Keel's calls are made from a task on a Tokio worker, as a run's
//! are):
//!
//! - `python sdk`: `benches/mcp/direct_client.py` with the official client (`ClientSession`
//!   over `stdio_client`), the baseline the requirement names. Its own per-call cost (asyncio,
//!   pydantic) is in the figure.
//! - `python raw`: the same script writing and reading newline-delimited JSON-RPC by hand with
//!   blocking pipes: close to the server's own round trip, the fairer floor.
//! - `keel tool`: the `mcp__bench__echo` tool Keel's MCP client publishes, called directly
//!   (rmcp, the request, the result mapped to what the model reads).
//! - `keel gateway+policy`: the gateway's guard (inventory, the server's `inputSchema`), the
//!   policy engine's decision (read-only: allowed), then the call: the governed path without
//!   the run machinery. No hooks are declared.
//! - `keel run`: `Runtime::call_tool`, a direct call as a run of its own: the run record, the
//!   guard, policy, the `PreToolUse` hook round, the call and its events in the durable store
//!   (SQLite, fsync per commit) and the JSONL mirror.
//!
//! Each way reports calls/s, p50/p90/p99 and the CPU time per call of the calling process
//! (Python's, or this one's; never the server's). "added p50" is a Keel p50 minus a Python
//! p50 of the same round; the medians over the rounds are printed last. The Python interpreter and the `mcp` package (pinned below) are installed
//! once into `target/test-clients/mcp-python`. The workspace goes under `target/` (or
//! `KEEL_BENCH_DIR`, e.g. a tmpfs, for the `keel run` store).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::PolicyDecision;
use keel::{McpHub, RequestId, RunStatus, Runtime, Tool, ToolCall, ToolContext, Workspace};
use keel_test_support::test_clients::{MCP_PYTHON_SDK, mcp_python};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use keel_tools::gateway::Gateway;
use keel_tools::policy::{PolicyEngine, PolicyQuery};
use serde_json::{Value, json};

mod support;
use support::target_dir;

const TOOL: &str = "mcp__bench__echo";
const TEXT: &str = "hello from the benchmark";

/// N sequential calls: the wall time, the client process's CPU time and each call's latency.
struct Sample {
    wall: Duration,
    cpu: Duration,
    latencies: Vec<Duration>,
}

/// One way of calling, summarised.
#[derive(Clone, Copy)]
struct Stats {
    per_second: f64,
    /// CPU time of the calling process (not the server's) per call.
    cpu: Duration,
    p50: Duration,
    p90: Duration,
    p99: Duration,
}

impl Sample {
    fn stats(mut self) -> Stats {
        self.latencies.sort();
        let at =
            |p: f64| self.latencies[((self.latencies.len() as f64 - 1.0) * p).round() as usize];
        let calls = self.latencies.len();
        Stats {
            per_second: calls as f64 / self.wall.as_secs_f64(),
            cpu: self.cpu / calls as u32,
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
        }
    }
}

/// CPU time of this process's live threads so far, from `/proc/self/task/*/schedstat` (ns;
/// the tick-granular `/proc/self/stat` is too coarse for a few tens of µs per call). A thread
/// that exits during a round takes its time with it; Tokio's threads stay up while calls run.
fn process_cpu() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    let nanos = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/mcp")
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A workspace whose agent lists the echo tool of one stdio server. Its model is never asked:
/// a direct call makes no model round.
fn workspace(python: &Path, server: &Path) -> TempWorkspace {
    let parent = std::env::var("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| target_dir());
    WorkspaceBuilder::new()
        .openai_model_at("unused", "http://127.0.0.1:9/v1")
        .agent("bench", &format!("{{ model: unused, tools: [{TOOL}] }}"))
        .document(
            "McpServer",
            "bench",
            &format!(
                "{{ transport: stdio, command: [\"{}\", \"{}\"] }}",
                python.display(),
                server.display()
            ),
        )
        .build_in(parent)
}

/// One round of the Python client (`sdk` or `raw`), with a server of its own.
fn python_round(python: &Path, client: &str, calls: usize, warmup: usize) -> Sample {
    let output = Command::new(python)
        .arg(scripts_dir().join("direct_client.py"))
        .arg(scripts_dir().join("echo_server.py"))
        .args(["--client", client])
        .args([
            "--calls",
            &calls.to_string(),
            "--warmup",
            &warmup.to_string(),
        ])
        .output()
        .expect("the Python client starts");
    assert!(
        output.status.success(),
        "direct_client.py --client {client} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    let nanos = |v: &Value| Duration::from_nanos(v.as_u64().unwrap());
    Sample {
        wall: nanos(&report["wall_ns"]),
        cpu: nanos(&report["cpu_ns"]),
        latencies: report["latencies_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(nanos)
            .collect(),
    }
}

/// Times `calls` sequential calls of `call` after `warmup` untimed ones.
async fn timed<F, Fut>(calls: usize, warmup: usize, mut call: F) -> Sample
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..warmup {
        call().await;
    }
    let mut latencies = Vec::with_capacity(calls);
    let cpu = process_cpu();
    let started = Instant::now();
    for _ in 0..calls {
        let before = Instant::now();
        call().await;
        latencies.push(before.elapsed());
    }
    let wall = started.elapsed();
    Sample {
        wall,
        cpu: process_cpu().saturating_sub(cpu),
        latencies,
    }
}

/// Keel's MCP client and gateway on their own, outside a runtime: the same workspace's
/// server, published into a gateway of its own.
struct Standalone {
    workspace: Workspace,
    gateway: Gateway,
    hub: McpHub,
    policy: PolicyEngine,
    ctx: ToolContext,
}

impl Standalone {
    async fn start(root: &Path) -> Self {
        let workspace = Workspace::load(root).unwrap();
        let mut gateway = Gateway::new(Vec::new()).unwrap();
        let hub = McpHub::new(&workspace, gateway.catalog());
        for source in hub.sources() {
            gateway = gateway.with_source(source);
        }
        hub.settle().await;
        assert!(gateway.contains(TOOL), "{:?}", hub.status());
        let policy = PolicyEngine::from_workspace(&workspace);
        let ctx = ToolContext {
            workspace_root: root.to_path_buf(),
            request_id: RequestId::from("run_bench"),
            session_id: None,
            agent: "bench".into(),
            max_output_bytes: 64 * 1024,
            seen_files: None,
            progress: None,
            metadata: Default::default(),
            call_id: None,
            call_seq: None,
            traceparent: None,
            files: None,
        };
        Self {
            workspace,
            gateway,
            hub,
            policy,
            ctx,
        }
    }

    async fn tool_round(&self, calls: usize, warmup: usize) -> Sample {
        let tool: Arc<dyn Tool> = self.gateway.tool(TOOL).unwrap();
        timed(calls, warmup, || async {
            let output = tool.call(&self.ctx, json!({ "text": TEXT })).await.unwrap();
            assert!(output.content.starts_with(TEXT), "{}", output.content);
        })
        .await
    }

    async fn governed_round(&self, calls: usize, warmup: usize) -> Sample {
        let inventory = vec![TOOL.to_owned()];
        let arguments = json!({ "text": TEXT }).to_string();
        let mode_of = |tool: &str| self.workspace.gateway_mode("bench", tool);
        timed(calls, warmup, || async {
            let call = ToolCall {
                id: "call_bench".into(),
                name: TOOL.into(),
                arguments: arguments.clone(),
            };
            let guarded = self
                .gateway
                .guard(&self.ctx, &inventory, &call, &mode_of)
                .await;
            let verdict = self.policy.decide(
                &PolicyQuery {
                    agent: "bench",
                    tool: guarded.tool(),
                    args: guarded.arguments().unwrap(),
                    read_only: self.gateway.is_read_only(guarded.tool()),
                    mode: None,
                },
                &[],
            );
            assert_eq!(verdict.decision, PolicyDecision::Allow, "{verdict:?}");
            let output = self.gateway.execute(&self.ctx, &guarded).await.unwrap();
            assert!(output.content.starts_with(TEXT), "{}", output.content);
        })
        .await
    }
}

async fn run_round(runtime: &Runtime, calls: usize, warmup: usize) -> Sample {
    let arguments = json!({ "text": TEXT }).to_string();
    timed(calls, warmup, || async {
        let handle = runtime
            .tools()
            .call(Some("bench"), TOOL, &arguments)
            .await
            .unwrap();
        let response = handle.wait().await.unwrap();
        assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    })
    .await
}

/// The ways of calling, in the order each round measures them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    PythonSdk,
    PythonRaw,
    KeelTool,
    KeelGateway,
    KeelRun,
}

const WAYS: [(Way, &str); 5] = [
    (Way::PythonSdk, "python sdk"),
    (Way::PythonRaw, "python raw"),
    (Way::KeelTool, "keel tool"),
    (Way::KeelGateway, "keel gateway+policy"),
    (Way::KeelRun, "keel run"),
];

/// The ways `KEEL_BENCH_WAYS` names (comma-separated labels, e.g. `keel run` to profile one
/// way alone), or all.
fn selected_ways() -> Vec<(Way, &'static str)> {
    let Ok(names) = std::env::var("KEEL_BENCH_WAYS") else {
        return WAYS.to_vec();
    };
    let wanted: Vec<&str> = names.split(',').map(str::trim).collect();
    let ways: Vec<_> = WAYS
        .into_iter()
        .filter(|(_, label)| wanted.contains(label))
        .collect();
    assert!(
        !ways.is_empty(),
        "KEEL_BENCH_WAYS names none of {:?}",
        WAYS.map(|(_, label)| label)
    );
    ways
}

fn print_stats(label: &str, stats: &Stats) {
    println!(
        "  {label:<20} {:>7.0} calls/s  p50 {:>8.1} µs  p90 {:>8.1} µs  p99 {:>8.1} µs  client CPU {:>6.1} µs/call",
        stats.per_second,
        micros(stats.p50),
        micros(stats.p90),
        micros(stats.p99),
        micros(stats.cpu),
    );
}

fn on_worker(
    rt: &tokio::runtime::Runtime,
    round: impl std::future::Future<Output = Sample> + Send + 'static,
) -> Sample {
    rt.block_on(rt.spawn(round)).unwrap()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n % 2 {
        1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is ignored too.
    let calls = env_number("KEEL_BENCH_CALLS", 1000).max(1);
    let rounds = env_number("KEEL_BENCH_ROUNDS", 5).max(1);
    let warmup = (calls / 10).clamp(20, 200);
    let python = mcp_python();
    let server = scripts_dir().join("echo_server.py");
    let ws = workspace(&python, &server);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (runtime, standalone, events_per_run) = rt.block_on(async {
        let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
        runtime.settle_mcp().await;
        let standalone = Arc::new(Standalone::start(ws.path()).await);
        let arguments = json!({ "text": TEXT }).to_string();
        let handle = runtime.tools().call(Some("bench"), TOOL, &arguments).await;
        let response = handle.unwrap().wait().await.unwrap();
        let events = runtime
            .runs()
            .events(&response.request_id, 0)
            .await
            .unwrap();
        (runtime, standalone, events.len())
    });
    println!(
        "mcp_calls: {calls} sequential echo calls per way and round (+{warmup} warm-up), {rounds} rounds, {MCP_PYTHON_SDK} server over stdio; a `keel run` call stores {events_per_run} events; workspace in {}",
        ws.path().display()
    );
    let ways = selected_ways();
    let mut table: Vec<(Way, &str, Vec<Stats>)> = ways
        .iter()
        .map(|&(way, label)| (way, label, Vec::new()))
        .collect();
    for round in 1..=rounds {
        println!("round {round}:");
        for (way, label, column) in &mut table {
            let sample = match way {
                Way::PythonSdk => python_round(&python, "sdk", calls, warmup),
                Way::PythonRaw => python_round(&python, "raw", calls, warmup),
                // On a worker thread, as a run's calls are made, not on `block_on`'s.
                Way::KeelTool => {
                    let standalone = standalone.clone();
                    on_worker(
                        &rt,
                        async move { standalone.tool_round(calls, warmup).await },
                    )
                }
                Way::KeelGateway => {
                    let standalone = standalone.clone();
                    on_worker(&rt, async move {
                        standalone.governed_round(calls, warmup).await
                    })
                }
                Way::KeelRun => {
                    let runtime = runtime.clone();
                    on_worker(&rt, async move { run_round(&runtime, calls, warmup).await })
                }
            };
            let stats = sample.stats();
            print_stats(label, &stats);
            column.push(stats);
        }
    }
    println!("median over {rounds} rounds:");
    for (_, label, column) in &table {
        let of = |f: fn(&Stats) -> f64| median(column.iter().map(f).collect());
        println!(
            "  {label:<20} {:>7.0} calls/s  p50 {:>8.1} µs  p90 {:>8.1} µs  p99 {:>8.1} µs  client CPU {:>6.1} µs/call",
            of(|s| s.per_second),
            of(|s| micros(s.p50)),
            of(|s| micros(s.p90)),
            of(|s| micros(s.p99)),
            of(|s| micros(s.cpu)),
        );
    }
    let column = |wanted: Way| {
        table
            .iter()
            .find(|(way, _, _)| *way == wanted)
            .map(|(_, label, column)| (*label, column))
    };
    let baselines: Vec<_> = [Way::PythonSdk, Way::PythonRaw]
        .into_iter()
        .filter_map(column)
        .collect();
    let keel: Vec<_> = [Way::KeelTool, Way::KeelGateway, Way::KeelRun]
        .into_iter()
        .filter_map(column)
        .collect();
    if !baselines.is_empty() && !keel.is_empty() {
        println!("Keel added p50 (Keel p50 − Python p50 of the same round, median over rounds):");
    }
    for (keel_label, keel_column) in keel.iter().filter(|_| !baselines.is_empty()) {
        let added: Vec<String> = baselines
            .iter()
            .map(|(label, baseline)| {
                let added = median(
                    keel_column
                        .iter()
                        .zip(baseline.iter())
                        .map(|(k, p)| micros(k.p50) - micros(p.p50))
                        .collect(),
                );
                format!("vs {label} {added:>+8.1} µs")
            })
            .collect();
        println!("  {keel_label:<20} {}", added.join("   "));
    }
    rt.block_on(async {
        runtime.stop_mcp().await;
        standalone.hub.shutdown().await;
    });
}
