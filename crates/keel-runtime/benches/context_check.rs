//! What knowing a prompt's size costs each round: `cargo bench -p keel-runtime --bench
//! context_check` (`KEEL_BENCH_ROUNDS=N` rounds of history, default 100).
//!
//! Builds a run's conversation of N rounds (an answer calling `read_file` and its 1 KB
//! result) after instructions and an input, then times what the loop does before each round
//! when the model declares a `contextWindow`: the prompt's estimate (the last round's counted
//! tokens plus the estimate of what was added, never less than the whole's estimate, the tool
//! definitions' size measured once per tool list) and the comparison with `compactAt` of the
//! window. Prints the median of many tries.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_runtime::context::{estimate_tools, prompt_estimate};
use keel_types::{Message, ToolCall, ToolSpec};

fn main() {
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut messages = vec![
        Message::system("Read every file in order and report what they say."),
        Message::user("Read the files."),
    ];
    for n in 0..rounds {
        let call = ToolCall {
            id: format!("call_{n}"),
            name: "read_file".into(),
            arguments: format!(r#"{{"path":"f{n}.txt"}}"#),
        };
        messages.push(Message::assistant("", vec![call]));
        messages.push(Message::tool_result(format!("call_{n}"), "x".repeat(1024)));
    }
    let tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Reads a file of the workspace.".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    // Measured once per tool list, as the loop does with the tools' prompt section.
    let tools_tokens = estimate_tools(&tools);
    // The provider counted the prompt before the last round's answer and result.
    let measured = Some((messages.len() - 2, 70_000));
    let threshold = (200_000f64 * 0.8) as u64;
    let mut times: Vec<Duration> = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let started = Instant::now();
        let tokens = prompt_estimate(black_box(&messages), black_box(tools_tokens), measured);
        black_box(tokens > threshold);
        times.push(started.elapsed());
    }
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "context_check: {} messages ({rounds} rounds of history): estimate and compaction check, median {:.2} µs (target < 50 µs); {} tokens estimated",
        messages.len(),
        median.as_secs_f64() * 1e6,
        prompt_estimate(&messages, tools_tokens, measured)
    );
}
