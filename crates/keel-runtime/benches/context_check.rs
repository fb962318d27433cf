//! What knowing a prompt's size costs each round: `cargo bench -p keel-runtime --bench
//! context_check` (`KEEL_BENCH_ROUNDS=N` rounds of history, default 100).
//!
//! Builds a run's conversation of N rounds (an answer calling `read_file` and its 1 KB
//! result of varied text) after instructions and an input, then times what the loop does
//! before each round when the model declares a `contextWindow`: the prompt's estimate (the
//! last round's counted tokens plus the count of the round just added, never less than the
//! count of the whole, each message counted once and remembered) and the comparison with
//! `compactAt` of the window — with the character heuristic and with OpenAI's `o200k_base`.
//! Prints the median of many tries, and what loading the encoding's tables costs once per
//! process (time, resident memory).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_runtime::context::{TokenCounter, Tokenizer};
use keel_types::{Message, ToolCall};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut messages = vec![
        Message::system("Read every file in order and report what they say."),
        Message::user("Read the files."),
    ];
    let words = [
        "alpha",
        "route",
        "42",
        "config.yaml",
        "the",
        "tokens",
        "fn",
        "{ }",
        "é",
    ];
    for n in 0..rounds {
        let call = ToolCall {
            id: format!("call_{n}"),
            name: "read_file".into(),
            arguments: format!(r#"{{"path":"f{n}.txt"}}"#),
        };
        let mut text = String::new();
        let mut i = n;
        while text.len() < 1024 {
            text.push_str(words[i % words.len()]);
            text.push(' ');
            i = i * 7 + 3;
        }
        messages.push(Message::assistant("", vec![call]));
        messages.push(Message::tool_result(format!("call_{n}"), text));
    }
    let tools_json = r#"[{"name":"read_file","description":"Reads a file of the workspace.","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]"#;
    // The provider counted the prompt before the last round's answer and result.
    let measured = Some((messages.len() - 2, 70_000));
    let threshold = (200_000f64 * 0.8) as u64;

    let before = rss_kib();
    let loading = Instant::now();
    Tokenizer::O200kBase.count("load the tables");
    let load = loading.elapsed();
    let loaded = rss_kib().saturating_sub(before);

    for tokenizer in [Tokenizer::Heuristic, Tokenizer::O200kBase] {
        let tools_tokens = tokenizer.count(tools_json);
        // Everything but the last round was counted in earlier rounds.
        let mut warmed = TokenCounter::new(tokenizer);
        warmed.span(&messages, 0, messages.len() - 2);
        let mut times: Vec<Duration> = Vec::with_capacity(10_000);
        let mut tokens = 0;
        for _ in 0..10_000 {
            let mut counter = warmed.clone();
            let started = Instant::now();
            tokens = counter.prompt_estimate(black_box(&messages), tools_tokens, measured);
            black_box(tokens > threshold);
            times.push(started.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "context_check {tokenizer:?}: {} messages ({rounds} rounds of history): estimate and compaction check, median {:.2} µs (target < 50 µs); whole prompt {} tokens",
            messages.len(),
            median.as_secs_f64() * 1e6,
            TokenCounter::new(tokenizer).span(&messages, 0, messages.len()) + tools_tokens,
        );
        black_box(tokens);
    }
    println!(
        "context_check: loading o200k_base once per process: {:.1} ms, {:.1} MiB resident",
        load.as_secs_f64() * 1e3,
        loaded as f64 / 1024.0
    );
}
