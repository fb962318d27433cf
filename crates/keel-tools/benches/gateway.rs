//! Gateway overhead per tool call: `guard` on a typical schema (7 properties: strings, an
//! integer with a minimum, an enum, an array of strings, a nested object).
//!
//! Run: `cargo bench -p keel-tools --bench gateway`
//!
//! Three calls are measured — (a) valid, no repair needed (target < 20 µs), (b) needing three
//! repairs (`coerce_number`, `enum_case`, `wrap_array`), (c) blocked — plus (d) a misspelled
//! tool name. Each is run in batches on a current-thread runtime; the median ns/call over the
//! batches is printed. Plain `std::time::Instant`, no harness.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use keel_tools::gateway::Gateway;
use keel_types::{
    GuardDecision, RequestId, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use keel_workspace::GatewayMode;
use serde_json::{Value, json};

const BATCHES: usize = 15;
const CALLS_PER_BATCH: usize = 2_000;

struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, _: &ToolContext, _: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(String::new()))
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "minLength": 1 },
            "city": { "type": "string" },
            "limit": { "type": "integer", "minimum": 1 },
            "unit": { "enum": ["celsius", "fahrenheit"] },
            "tags": { "type": "array", "items": { "type": "string" } },
            "options": {
                "type": "object",
                "properties": {
                    "lang": { "type": "string", "enum": ["en", "fr", "de"] },
                    "verbose": { "type": "boolean" }
                },
                "additionalProperties": false
            },
            "note": { "type": "string", "maxLength": 200 }
        },
        "required": ["query", "limit"],
        "additionalProperties": false
    })
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn main() {
    let spec = ToolSpec {
        name: "search_weather".into(),
        description: "bench".into(),
        parameters: schema(),
    };
    let gateway = Gateway::new([Arc::new(Noop(spec)) as Arc<dyn Tool>]).unwrap();
    let inventory = vec!["read_file".to_owned(), "search_weather".to_owned()];
    let ctx = ToolContext {
        workspace_root: ".".into(),
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let cases = [
        (
            "(a) valid, no repair",
            call(
                "search_weather",
                r#"{"query":"rain","city":"Paris","limit":5,"unit":"celsius","tags":["a","b"],"options":{"lang":"en","verbose":true}}"#,
            ),
            GuardDecision::Accepted,
        ),
        (
            "(b) three repairs",
            call(
                "search_weather",
                r#"{"query":"rain","city":"Paris","limit":"5","unit":"Celsius","tags":"a","options":{"lang":"en","verbose":true}}"#,
            ),
            GuardDecision::Repaired,
        ),
        (
            "(c) blocked",
            call(
                "search_weather",
                r#"{"city":"Paris","limit":"many","unit":"kelvin","tags":["a"],"options":{"lang":"en"}}"#,
            ),
            GuardDecision::Blocked,
        ),
        (
            "(d) tool name repair",
            call(
                "search_wether",
                r#"{"query":"rain","city":"Paris","limit":5,"unit":"celsius","tags":["a","b"],"options":{"lang":"en","verbose":true}}"#,
            ),
            GuardDecision::Repaired,
        ),
    ];
    let mode_of = |_: &str| GatewayMode::Repair;
    println!("gateway guard, median of {BATCHES} batches × {CALLS_PER_BATCH} calls");
    for (label, call, expected) in &cases {
        let first = runtime.block_on(gateway.guard(&ctx, &inventory, call, &mode_of));
        assert_eq!(first.decision(), *expected, "{label}: {first:?}");
        let mut per_call: Vec<f64> = (0..BATCHES)
            .map(|_| {
                let started = Instant::now();
                runtime.block_on(async {
                    for _ in 0..CALLS_PER_BATCH {
                        black_box(
                            gateway
                                .guard(&ctx, black_box(&inventory), black_box(call), &mode_of)
                                .await,
                        );
                    }
                });
                started.elapsed().as_nanos() as f64 / CALLS_PER_BATCH as f64
            })
            .collect();
        per_call.sort_by(f64::total_cmp);
        let median = per_call[per_call.len() / 2];
        println!(
            "{label:<24} {median:>9.0} ns/call  (min {:.0}, max {:.0})",
            per_call[0],
            per_call[per_call.len() - 1]
        );
    }
}
