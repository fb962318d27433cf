//! Memory recall and writes at scale, through the SDK on the workspace's SQLite store.
//!
//! ```sh
//! cargo bench -p keel --bench memory_recall      # KEEL_BENCH_RECORDS=100000 (default)
//! ```
//!
//! Fills the store with N generated records (imported in batches; 12 words each, drawn from
//! 20,000 with Zipf–Mandelbrot frequencies, so the most common word is in about 4% of the
//! records), in two layouts: every record in one namespace, and the same N spread over 100
//! users' namespaces. Then times the
//! recall a run's start does (`MemoryService::recall`: the namespace from request metadata,
//! full-text bm25 search, the prompt text) for 1,000 varied inputs, reporting p50/p99; and
//! writes: `MemoryService::add` one at a time (one commit each) and from 64 concurrent tasks
//! (group-committed). The workspace goes under `KEEL_BENCH_DIR` (default: the temp dir).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_precision_loss
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::{MemoryDraft, MemoryService, Runtime};
use keel::{MemoryKind, MemoryRecord, MemorySource, MemoryStatus, Provenance};
use keel_test_support::WorkspaceBuilder;

/// 20,000 content words (stop words are left out of recall queries anyway).
fn vocabulary() -> Vec<String> {
    let stems = [
        "tea", "coffee", "deploy", "review", "budget", "travel", "invoice", "garden", "meeting",
        "report", "python", "rust", "music", "dog", "cat", "lisbon", "porto", "berlin", "paris",
        "sugar", "morning", "evening", "weekend", "project", "release", "customer", "ticket",
        "printer", "laptop", "phone", "email", "calendar", "doctor", "school", "train", "bike",
    ];
    (0..20_000)
        .map(|i| match i < stems.len() {
            true => stems[i].to_owned(),
            false => format!("{}{}", stems[i % stems.len()], i / stems.len()),
        })
        .collect()
}

/// Zipf–Mandelbrot word frequencies, `p(i) ∝ 1/(i + 50)`: like content words in English
/// text, the most common appears in a few percent of the records, most in very few.
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new() -> Self {
        let words = vocabulary();
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|i| {
                total += 1.0 / (i as f64 + 50.0);
                total
            })
            .collect();
        Self { words, cumulative }
    }

    fn pick(&self, rng: &mut fastrand::Rng) -> &str {
        let target = rng.f64() * self.cumulative[self.cumulative.len() - 1];
        let i = self.cumulative.partition_point(|c| *c < target);
        &self.words[i.min(self.words.len() - 1)]
    }
}

fn sentence(words: &Words, rng: &mut fastrand::Rng, n: usize) -> String {
    let mut out = String::from("The user");
    for _ in 0..n {
        out.push(' ');
        out.push_str(words.pick(rng));
    }
    out.push('.');
    out
}

fn record(i: usize, namespace: &str, text: String) -> MemoryRecord {
    let now = keel_types::now_rfc3339();
    MemoryRecord {
        id: format!("mem_bench_{i:08}"),
        version: 1,
        namespace: namespace.to_owned(),
        memory: "notes".to_owned(),
        kind: MemoryKind::Fact,
        text,
        tags: Vec::new(),
        status: MemoryStatus::Active,
        provenance: vec![Provenance {
            source: MemorySource::Import,
            request_id: None,
            agent: None,
            seq: None,
            call_id: None,
            at: now.clone(),
            approved_by: Some("bench".to_owned()),
        }],
        merged_from: Vec::new(),
        valid_from: now,
        valid_to: None,
        expires_at: None,
        closed_by: None,
        close_reason: None,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn runtime(base: &std::path::Path) -> (keel_test_support::TempWorkspace, Runtime) {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model("m", &serde_json::json!({"conversations": [{"steps": [{"text": "ok"}]}]}))
        .agent("assistant", "{ model: m }")
        .document(
            "Memory",
            "notes",
            "  namespace: \"users/{metadata.user}\"\n  readers: [assistant]\n  writers: [assistant]\n  write: auto\n",
        )
        .build_in(base);
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    (ws, runtime)
}

async fn fill(memory: &MemoryService, count: usize, users: usize, words: &Words) {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut batch = String::new();
    for i in 0..count {
        let namespace = format!("users/u{}", i % users);
        let text = sentence(words, &mut rng, 12);
        batch.push_str(&serde_json::to_string(&record(i, &namespace, text)).unwrap());
        batch.push('\n');
        if (i + 1) % 5_000 == 0 || i + 1 == count {
            memory.import(&batch).await.unwrap();
            batch.clear();
        }
    }
}

async fn recall(memory: &MemoryService, users: usize, words: &Words) -> (f64, f64, f64) {
    let mut rng = fastrand::Rng::with_seed(11);
    let mut times = Vec::with_capacity(1_000);
    let mut recalled = 0usize;
    for i in 0..1_000 {
        let input = format!(
            "What about {} and {}?",
            words.pick(&mut rng),
            words.pick(&mut rng)
        );
        let metadata = BTreeMap::from([("user".to_owned(), format!("u{}", i % users))]);
        let started = Instant::now();
        let prompt = memory
            .recall("assistant", None, &metadata, &input)
            .await
            .unwrap();
        times.push(started.elapsed());
        recalled += prompt.messages.len();
    }
    times.sort();
    (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        recalled as f64 / 1_000.0,
    )
}

async fn writes(memory: &Arc<MemoryService>, words: &Words) -> (f64, f64) {
    let mut rng = fastrand::Rng::with_seed(13);
    let n = 500;
    let started = Instant::now();
    for _ in 0..n {
        let draft = MemoryDraft {
            kind: MemoryKind::Fact,
            text: sentence(words, &mut rng, 10),
            tags: Vec::new(),
        };
        memory.add("users/writer", draft, "bench").await.unwrap();
    }
    let sequential = n as f64 / started.elapsed().as_secs_f64();
    let tasks = 64;
    let per_task = 40;
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let memory = memory.clone();
        let texts: Vec<String> = (0..per_task)
            .map(|_| sentence(words, &mut rng, 10))
            .collect();
        handles.push(tokio::spawn(async move {
            for text in texts {
                let draft = MemoryDraft {
                    kind: MemoryKind::Fact,
                    text,
                    tags: Vec::new(),
                };
                memory
                    .add(&format!("users/w{t}"), draft, "bench")
                    .await
                    .unwrap();
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let concurrent = (tasks * per_task) as f64 / started.elapsed().as_secs_f64();
    (sequential, concurrent)
}

#[tokio::main]
async fn main() {
    let count: usize = std::env::var("KEEL_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let base = std::env::var_os("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let words = Words::new();
    for users in [1, 100] {
        let (_dir, runtime) = runtime(&base);
        let memory = runtime.memory().service().unwrap().clone();
        let started = Instant::now();
        fill(&memory, count, users, &words).await;
        let filled = started.elapsed();
        let (p50, p99, hits) = recall(&memory, users, &words).await;
        println!(
            "recall, {count} records in {users} namespace(s): p50 {p50:.3} ms, p99 {p99:.3} ms \
             ({hits:.2} prompts with records per recall; import {:.0} records/s)",
            count as f64 / filled.as_secs_f64()
        );
        if users == 100 {
            let (sequential, concurrent) = writes(&memory, &words).await;
            println!("writes: {sequential:.0}/s one at a time, {concurrent:.0}/s from 64 tasks");
        }
    }
}
