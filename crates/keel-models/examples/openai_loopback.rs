//! Drives the `openai` provider against a running `keel-mock-llm` and reports rounds/s.
//!
//! ```text
//! cargo run --release -p keel-test-support --bin keel-mock-llm &   # prints its URL
//! cargo run --release -p keel-models --example openai_loopback -- URL [ROUNDS] [CONCURRENCY]
//! ```

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use keel_models::{OpenAiConfig, OpenAiProvider};
use keel_types::{Message, ModelParams, ModelProvider, ModelRequest};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .expect("usage: openai_loopback URL [ROUNDS] [CONCURRENCY]");
    let rounds: usize = args.next().map_or(20_000, |a| a.parse().expect("ROUNDS"));
    let concurrency: usize = args.next().map_or(64, |a| a.parse().expect("CONCURRENCY"));
    let mut config = OpenAiConfig::new("mock");
    config.base_url = url;
    let provider = Arc::new(OpenAiProvider::new(config).expect("provider"));
    let request = ModelRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("read the readme"),
        ],
        tools: Arc::from([]),
        params: ModelParams::default(),
        stream: true,
        sections: Vec::new(),
        traceparent: None,
    };

    let start = Instant::now();
    let per_task = rounds / concurrency;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let provider = Arc::clone(&provider);
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut events = 0;
            for _ in 0..per_task {
                let mut stream = provider.stream(request.clone()).await.expect("round");
                while let Some(event) = stream.next().await {
                    event.expect("event");
                    events += 1;
                }
            }
            events
        }));
    }
    let mut events = 0;
    for task in tasks {
        events += task.await.expect("task");
    }
    let elapsed = start.elapsed();
    let done = per_task * concurrency;
    println!(
        "{done} rounds ({events} events) in {elapsed:.2?}: {:.0} rounds/s",
        done as f64 / elapsed.as_secs_f64()
    );
}
