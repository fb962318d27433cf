//! What a process-backed agent (`backend: {kind: process}`, docs/adapters.md) costs Keel over
//! a native agent doing the same task: 8 model rounds and 7 tool calls (a scripted model asks
//! for an in-process no-op tool seven times, then answers), with the durable store on.
//!
//! - **native**: Keel's own loop.
//! - **process**: a program (Python, standard library only, so nothing else is measured)
//!   that makes the same 8 rounds through the run's model endpoint and the same 7 calls
//!   through its MCP tools endpoint (one `initialize` first).
//! - **start**: a program that answers at once — the cost of starting a program and its
//!   endpoints per run.
//!
//! Reports medians over rounds of Keel's CPU per run (user + system of this process; the
//! program's own CPU is its children's and shown apart), wall time per run, and the added
//! CPU per request through the endpoints: (process − start − native) / 15.
//!
//! ```sh
//! cargo bench -p keel --bench adapter_rounds    # KEEL_BENCH_RUNS=N (20) runs a round, KEEL_BENCH_ROUNDS=R (5)
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel::ToolSpec;
use keel::{RequestOptions, RunStatus, Runtime, Tool, ToolContext, ToolError, ToolOutput};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

/// Tool calls per run; rounds are one more.
const CALLS: usize = 7;

/// The program of the `process` agent: the model's tool calls made through MCP until it
/// answers.
const PROGRAM: &str = r#"
import json, os, sys, urllib.request

run = json.load(sys.stdin)
key = os.environ["OPENAI_API_KEY"]
tools_url = os.environ["KEEL_TOOLS_URL"]
session = None
ids = iter(range(1, 1000))

def post(url, body, headers):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request) as response:
        text = response.read().decode()
        return response.headers, text

def mcp(method, params, notify=False):
    global session
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notify:
        body["id"] = next(ids)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    response, text = post(tools_url, body, headers)
    session = response.get("Mcp-Session-Id") or session
    if notify:
        return None
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if message.get("id") == body["id"]:
                return message["result"]
    return json.loads(text)["result"]

mcp("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}})
mcp("notifications/initialized", {}, notify=True)
messages = [{"role": "user", "content": run["input"]}]
tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
          "parameters": t["parameters"]}} for t in run["tools"]]
while True:
    _, text = post(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                   {"model": os.environ["KEEL_MODEL"], "messages": messages, "tools": tools},
                   {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    message = json.loads(text)["choices"][0]["message"]
    messages.append(message)
    if not message.get("tool_calls"):
        break
    for call in message["tool_calls"]:
        result = mcp("tools/call", {"name": call["function"]["name"],
                                    "arguments": json.loads(call["function"]["arguments"])})
        messages.append({"role": "tool", "tool_call_id": call["id"],
                         "content": result["content"][0]["text"]})
print(json.dumps({"type": "final", "output": message["content"]}))
"#;

/// The `start` agent's program: answers at once.
const AT_ONCE: &str =
    "import sys; sys.stdin.read(); print('{\"type\": \"final\", \"output\": \"done\"}')";

/// A tool that does nothing, in-process and read-only.
struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("{}"))
    }
}

/// CPU time (user + system) of this process, or of its waited-for children.
#[allow(unsafe_code)]
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a zeroed rusage.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    assert_eq!(rc, 0);
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

fn workspace() -> TempWorkspace {
    let calls: Vec<Value> = (0..CALLS)
        .map(|i| json!({"toolCalls": [{"name": "noop", "arguments": {"i": i}}]}))
        .chain([json!({"text": "done"})])
        .collect();
    WorkspaceBuilder::new()
        .runtime("{ limits: { maxSteps: 16 } }")
        .scripted_model("m", &json!({"conversations": [{"steps": calls}]}))
        .agent("native", "{ model: m, tools: [noop] }")
        .agent(
            "process",
            "{ model: m, tools: [noop], backend: { kind: process, command: [python3, agent.py] } }",
        )
        .agent(
            "start",
            "{ model: m, backend: { kind: process, command: [python3, at_once.py] } }",
        )
        .file("agent.py", PROGRAM)
        .file("at_once.py", AT_ONCE)
        .build_in({
            let dir = keel_test_support::bench_dir();
            std::fs::create_dir_all(&dir).unwrap();
            dir
        })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Per run: Keel's CPU, the program's CPU, wall time (µs), over `runs` runs of `agent`.
async fn measure(runtime: &Runtime, agent: &str, runs: usize) -> (f64, f64, f64) {
    let (cpu, children) = (cpu_time(libc::RUSAGE_SELF), cpu_time(libc::RUSAGE_CHILDREN));
    let mut walls = Vec::with_capacity(runs);
    for i in 0..runs {
        let wall = Instant::now();
        let handle = runtime
            .request(RequestOptions {
                agent: Some(agent.into()),
                input: format!("task {i}"),
                ..Default::default()
            })
            .await
            .unwrap();
        let response = handle.wait().await.unwrap();
        assert_eq!(
            response.status,
            RunStatus::Completed,
            "{:?}",
            response.error
        );
        walls.push(wall.elapsed().as_secs_f64() * 1e6);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / runs as f64;
    (
        per(cpu_time(libc::RUSAGE_SELF) - cpu),
        per(cpu_time(libc::RUSAGE_CHILDREN) - children),
        median(walls),
    )
}

fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (runs, rounds) = (env("KEEL_BENCH_RUNS", 20), env("KEEL_BENCH_ROUNDS", 5));
    let ws = workspace();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let noop = Noop(ToolSpec {
            name: "noop".into(),
            description: "Does nothing.".into(),
            parameters: json!({"type": "object"}),
        });
        let runtime = Runtime::builder()
            .workspace(ws.path())
            .tool(Arc::new(noop))
            .build()
            .unwrap();
        // Warm up: the store, the program's imports in the page cache.
        for agent in ["native", "process", "start"] {
            measure(&runtime, agent, 2).await;
        }
        let mut seen: Vec<[(f64, f64, f64); 3]> = Vec::new();
        for _ in 0..rounds {
            seen.push([
                measure(&runtime, "native", runs).await,
                measure(&runtime, "process", runs).await,
                measure(&runtime, "start", runs).await,
            ]);
        }
        let pick = |i: usize, f: fn(&(f64, f64, f64)) -> f64| {
            median(seen.iter().map(|r| f(&r[i])).collect())
        };
        println!(
            "adapter_rounds: {runs} runs x {rounds} rounds, {} model rounds + {CALLS} tool calls a run (medians)",
            CALLS + 1
        );
        println!("{:<10} {:>14} {:>16} {:>14}", "agent", "keel cpu/run", "program cpu/run", "wall/run");
        for (i, name) in ["native", "process", "start"].iter().enumerate() {
            println!(
                "{name:<10} {:>11.0} µs {:>13.0} µs {:>11.0} µs",
                pick(i, |m| m.0),
                pick(i, |m| m.1),
                pick(i, |m| m.2)
            );
        }
        let requests = (2 * CALLS + 1) as f64;
        let added = pick(1, |m| m.0) - pick(2, |m| m.0) - pick(0, |m| m.0);
        println!(
            "added keel cpu per endpoint request: {:.0} µs ((process - start - native) / {requests})",
            added / requests
        );
        println!(
            "program start per run: keel {:.0} µs cpu, {:.0} µs wall",
            pick(2, |m| m.0),
            pick(2, |m| m.2)
        );
    });
}
