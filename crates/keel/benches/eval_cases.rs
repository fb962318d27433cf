//! Evals at scale: a 1,000-case eval (six deterministic graders per case) against the
//! `keel-mock-llm` server on loopback at concurrency 32, beside the same 1,000 runs made as
//! plain requests. Each case is what `agent_runs` measures (two streamed model rounds, one
//! `read_file` call, the durable store on); the difference of CPU per case is what an eval
//! adds: tagging, reading the run's events back, grading, storing the result. Medians of
//! `KEEL_BENCH_ROUNDS` rounds (default 3). The mock runs in its own process.
//!
//! ```sh
//! cargo build --release -p keel-test-support --bin keel-mock-llm
//! cargo bench -p keel --bench eval_cases          # KEEL_BENCH_CASES=1000, KEEL_BENCH_ROUNDS=3
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel::eval::EvalRun;
use keel::{RequestOptions, RunStatus, Runtime};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::json;

mod support;
use support::{cpu_time, start_mock, target_dir};

const CONCURRENCY: usize = 32;

/// The bench workspace: the agent of `agent_runs` and an eval of `cases` cases of it.
fn workspace(base_url: &str, cases: usize) -> TempWorkspace {
    let lines: Vec<String> = (0..cases)
        .map(|i| {
            json!({"name": format!("case-{i}"), "input": format!("Read the README ({i}).")})
                .to_string()
        })
        .collect();
    WorkspaceBuilder::new()
        .runtime("{ limits: { maxConcurrentRuns: 256 } }")
        .openai_model_at("mock", base_url)
        .agent(
            "bench",
            "{ model: mock, instructions: You are a benchmark agent., tools: [read_file] }",
        )
        .file("README.md", "# Bench\nA small file the agent reads.\n")
        .file("cases.jsonl", lines.join("\n"))
        .yaml(
            r#"
apiVersion: keel/v1
kind: Eval
metadata: { name: bench }
spec:
  target: { agent: bench }
  casesFile: cases.jsonl
  graders:
    - { kind: toolCalled, tool: read_file, args: { path: README.md } }
    - { kind: noToolCalled, tool: write_file }
    - { kind: contains, value: "the file" }
    - { kind: regex, pattern: "^Done: I read" }
    - { kind: finishReason, value: completed }
    - { kind: maxSteps, value: 3 }
"#,
        )
        .build_in(target_dir())
}

/// `cases` plain runs of the agent at [`CONCURRENCY`]: (wall, CPU).
async fn plain_runs(runtime: &Runtime, cases: usize) -> (Duration, Duration) {
    let (cpu, started) = (cpu_time(), Instant::now());
    futures_util::stream::iter(0..cases)
        .map(|i| async move {
            let handle = runtime
                .request(RequestOptions {
                    input: format!("Read the README ({i})."),
                    agent: Some("bench".into()),
                    ..Default::default()
                })
                .await
                .unwrap();
            let response = handle.wait().await.unwrap();
            assert_eq!(response.status, RunStatus::Completed);
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
    (started.elapsed(), cpu_time() - cpu)
}

/// The eval at [`CONCURRENCY`]: (wall, CPU).
async fn eval_run(runtime: &Runtime, cases: usize) -> (Duration, Duration) {
    let (cpu, started) = (cpu_time(), Instant::now());
    let result = runtime
        .run_eval(
            "bench",
            &EvalRun {
                concurrency: Some(CONCURRENCY as u32),
                ..EvalRun::default()
            },
        )
        .await
        .unwrap();
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu);
    let summary = result.summary.unwrap();
    assert_eq!(summary.runs, cases);
    assert_eq!(
        summary.passed,
        cases,
        "{:?}",
        result.cases.iter().find(|c| !c.passed)
    );
    (wall, cpu)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let cases: usize = std::env::var("KEEL_BENCH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mock = start_mock();
    let ws = workspace(&mock.base_url, cases);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
        // Warm up: connections, the schema validators, the store's statements.
        plain_runs(&runtime, 64).await;
        let (mut plain_cpu, mut eval_cpu, mut eval_wall) = (Vec::new(), Vec::new(), Vec::new());
        for round in 1..=rounds {
            let (pw, pc) = plain_runs(&runtime, cases).await;
            let (ew, ec) = eval_run(&runtime, cases).await;
            let per = |d: Duration| d.as_secs_f64() * 1000.0 / cases as f64;
            println!(
                "round {round}: plain {cases} runs {:.2} s, {:.3} ms CPU/run · eval {cases} cases {:.2} s, {:.3} ms CPU/case",
                pw.as_secs_f64(),
                per(pc),
                ew.as_secs_f64(),
                per(ec)
            );
            plain_cpu.push(per(pc));
            eval_cpu.push(per(ec));
            eval_wall.push(ew.as_secs_f64());
        }
        let overheads: Vec<f64> = eval_cpu.iter().zip(&plain_cpu).map(|(e, p)| e - p).collect();
        println!(
            "eval_cases ({cases} cases, concurrency {CONCURRENCY}, 6 deterministic graders), medians of {rounds}: \
             eval wall {:.2} s ({:.0} cases/s), Keel CPU {:.3} ms/case; the same runs as plain requests {:.3} ms/run; \
             what the eval adds (tags, reading events back, grading, storing): {:.3} ms/case",
            median(eval_wall.clone()),
            cases as f64 / median(eval_wall),
            median(eval_cpu),
            median(plain_cpu),
            median(overheads)
        );
        runtime.shutdown(Duration::from_secs(5)).await;
    });
}
