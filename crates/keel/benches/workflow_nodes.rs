//! Overhead of workflows and subagents, with the durable store on (SQLite, group commit, the
//! JSONL mirror):
//!
//! - **per workflow node**: a workflow of 100 no-op tool nodes in a chain, and one `map` of
//!   100 no-op tool items (at most 16 at a time). Each node is a governed direct call in the
//!   workflow's log (node started, direct started, guard, tool start and result, direct
//!   completed, node completed: 7 events). The tool is in-process and does nothing, so what
//!   is measured is Keel. A read-only tool's events are group-committed; a tool with side
//!   effects (`noop_write`, a third workflow) waits for its start to be on disk before it
//!   runs, one commit per node.
//! - **per subagent call**: an agent on a scripted model that calls `task` 16 times in one
//!   answer (4 such runs a round); each child is an agent run on the same scripted model
//!   answering at once. The delegation's own cost is that per-call CPU minus the CPU of
//!   running the same child agent runs without a parent, 16 at a time (measured alongside).
//!
//! Reports the median over rounds of CPU time (user + system, this process) per node / call.
//!
//! ```sh
//! cargo bench -p keel --bench workflow_nodes      # KEEL_BENCH_ROUNDS=9 to change rounds
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel::ToolSpec;
use keel::{RequestOptions, RunStatus, Runtime, Tool, ToolContext, ToolError, ToolOutput};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

mod support;
use support::cpu_time;

const NODES: usize = 100;
const CALLS: usize = 16;
/// Lead runs per round (each makes `CALLS` task calls).
const LEADS: usize = 4;

/// A tool that does nothing, in-process; `read_only: false` makes it one with side effects
/// (its start is written ahead, durably, before it runs).
struct Noop(ToolSpec, bool);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn read_only(&self) -> bool {
        self.1
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("{}"))
    }
}

fn bench_parent() -> PathBuf {
    let target = support::target_dir();
    let dir = std::env::var("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| target.join("bench-workspaces"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn workspace() -> TempWorkspace {
    let chain = |tool: &str| -> String {
        (0..NODES)
            .map(|i| format!("    - {{ id: n{i}, kind: tool, tool: {tool} }}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let edges: Vec<String> = (1..NODES)
        .map(|i| format!("    - {{ from: n{}, to: n{i} }}", i - 1))
        .collect();
    let tasks: Vec<Value> = (0..CALLS)
        .map(|i| json!({"name": "task", "arguments": {"agent": "helper", "prompt": format!("sub task {i}")}}))
        .collect();
    let script = json!({"conversations": [
        {"match": "(?i)delegate", "steps": [{"toolCalls": tasks}, {"text": "all done"}]},
        {"steps": [{"text": "ok"}]}
    ]});
    WorkspaceBuilder::new()
        .runtime("{ limits: { maxParallelTools: 16, maxSteps: 4 } }")
        .scripted_model("m", &script)
        .agent("lead", "{ model: m, subagents: [helper] }")
        .agent("helper", "{ model: m }")
        .policy("effects", "rules: [{ tool: noop_write, decision: allow }]")
        .yaml(&format!(
            "apiVersion: keel/v1\nkind: Workflow\nmetadata: {{ name: chain }}\nspec:\n  nodes:\n{}\n  edges:\n{edges}\n---\napiVersion: keel/v1\nkind: Workflow\nmetadata: {{ name: chain_write }}\nspec:\n  nodes:\n{}\n  edges:\n{edges}\n---\napiVersion: keel/v1\nkind: Workflow\nmetadata: {{ name: fan }}\nspec:\n  input: {{ schema: {{ type: array }} }}\n  nodes:\n    - {{ id: each, kind: map, items: input, concurrency: 16, node: {{ kind: tool, tool: noop }} }}\n",
            chain("noop"),
            chain("noop_write"),
            edges = edges.join("\n")
        ))
        .build_in(bench_parent())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

async fn timed<F: std::future::Future<Output = RunStatus>>(run: F) -> (Duration, Duration) {
    let (cpu, wall) = (cpu_time(), Instant::now());
    let status = run.await;
    assert_eq!(status, RunStatus::Completed);
    (cpu_time() - cpu, wall.elapsed())
}

fn main() {
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let ws = workspace();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let noop = |name: &str, read_only: bool| {
            Arc::new(Noop(
                ToolSpec {
                    name: name.into(),
                    description: "Does nothing.".into(),
                    parameters: json!({"type": "object"}),
                },
                read_only,
            ))
        };
        let runtime = Runtime::builder()
            .workspace(ws.path())
            .tool(noop("noop", true))
            .tool(noop("noop_write", false))
            .build()
            .unwrap();
        let items = serde_json::to_string(&(0..NODES).collect::<Vec<_>>()).unwrap();
        let workflow = |name: &'static str, input: String| {
            let runtime = runtime.clone();
            async move {
                let handle = runtime.run_workflow(name, input, None).await.unwrap();
                handle.wait().await.unwrap().status
            }
        };
        let agent = |agent: &'static str, input: &'static str| {
            let runtime = runtime.clone();
            async move {
                let handle = runtime
                    .request(RequestOptions {
                        input: input.into(),
                        agent: Some(agent.into()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                handle.wait().await.unwrap().status
            }
        };
        // Warm up: the store, the scripted model, the allocator.
        timed(workflow("chain", String::new())).await;
        timed(agent("lead", "delegate")).await;

        let (mut chain_cpu, mut chain_wall, mut fan_cpu, mut fan_wall) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut write_cpu, mut write_wall) = (Vec::new(), Vec::new());
        let (mut task_cpu, mut child_cpu, mut task_wall) = (Vec::new(), Vec::new(), Vec::new());
        let per = |d: Duration, n: usize| d.as_secs_f64() * 1e3 / n as f64;
        for _ in 0..rounds {
            let (cpu, wall) = timed(workflow("chain", String::new())).await;
            chain_cpu.push(per(cpu, NODES));
            chain_wall.push(per(wall, NODES));
            let (cpu, wall) = timed(workflow("chain_write", String::new())).await;
            write_cpu.push(per(cpu, NODES));
            write_wall.push(per(wall, NODES));
            let (cpu, wall) = timed(workflow("fan", items.clone())).await;
            fan_cpu.push(per(cpu, NODES));
            fan_wall.push(per(wall, NODES));
            let (cpu, wall) = timed(async {
                for _ in 0..LEADS {
                    assert_eq!(agent("lead", "delegate").await, RunStatus::Completed);
                }
                RunStatus::Completed
            })
            .await;
            task_cpu.push(per(cpu, CALLS * LEADS));
            task_wall.push(per(wall, CALLS * LEADS));
            // The same child runs without delegation, as many at a time as the task calls.
            let (cpu, _) = timed(async {
                for _ in 0..LEADS {
                    let children = (0..CALLS).map(|_| agent("helper", "sub task"));
                    for status in futures_util::future::join_all(children).await {
                        assert_eq!(status, RunStatus::Completed);
                    }
                }
                RunStatus::Completed
            })
            .await;
            child_cpu.push(per(cpu, CALLS * LEADS));
        }
        println!("workflow_nodes: {rounds} rounds, median per node / call (ms)");
        println!(
            "  chain of {NODES} no-op tool nodes: {:.3} ms CPU/node, {:.3} ms wall/node",
            median(chain_cpu),
            median(chain_wall)
        );
        println!(
            "  chain of {NODES} no-op tool nodes with side effects (start written ahead, fsync each): {:.3} ms CPU/node, {:.3} ms wall/node",
            median(write_cpu),
            median(write_wall)
        );
        println!(
            "  map over {NODES} no-op tool items (16 at a time): {:.3} ms CPU/item, {:.3} ms wall/item",
            median(fan_cpu),
            median(fan_wall)
        );
        let (task, child) = (median(task_cpu), median(child_cpu));
        println!(
            "  {CALLS} parallel task calls (x{LEADS}): {task:.3} ms CPU/call ({:.3} ms wall/call); the same child runs without a parent: {child:.3} ms CPU/run; delegation overhead: {:.3} ms CPU/call",
            median(task_wall),
            task - child
        );
    });
}
