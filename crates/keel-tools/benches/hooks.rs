//! Hook overhead per tool call: a no-op command hook (a process that reads its input and
//! exits 0: what every command hook costs at least), and an in-process hook (the SDK's
//! `InProcessHook`), each with the protocol's JSON encoding and outcome combination.
//!
//! ```sh
//! cargo bench -p keel-tools --bench hooks
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel_tools::hooks::{self, CompiledHook, HookError, HookInput, HookOutcome, InProcessHook};
use keel_workspace::{HookEvent, HookHandler, HookOnError, HookSpec};
use serde_json::json;

struct NoOp;

#[async_trait]
impl InProcessHook for NoOp {
    fn name(&self) -> &str {
        "noop"
    }

    fn event(&self) -> HookEvent {
        HookEvent::PreToolUse
    }

    async fn call(&self, input: &HookInput) -> Result<HookOutcome, HookError> {
        // What a real in-process hook does at least: look at the call.
        let _ = serde_json::to_vec(input).map_err(|e| HookError::Invalid(e.to_string()))?;
        Ok(HookOutcome::default())
    }
}

fn input(dir: &std::path::Path) -> HookInput {
    let mut input = HookInput::new(HookEvent::PreToolUse, dir);
    input.tool_name = Some("read_file".into());
    input.tool_input = Some(json!({ "path": "README.md" }));
    input.tool_use_id = Some("call_1".into());
    input
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let spec = HookSpec {
        sandbox: Default::default(),
        event: HookEvent::PreToolUse,
        matcher: None,
        handler: HookHandler::Command {
            command: vec!["sh".into(), "-c".into(), "cat > /dev/null".into()],
            timeout: None,
        },
        on_error: HookOnError::Warn,
        enabled: true,
    };
    let hook = CompiledHook::new("noop", &spec).unwrap();
    let env = BTreeMap::new();
    let input = input(dir.path());
    println!("hooks: overhead per tool call, medians");
    rt.block_on(async {
        for _ in 0..20 {
            hook.run(&input, dir.path(), &env).await.unwrap();
        }
        let samples: Vec<Duration> = {
            let mut samples = Vec::new();
            for _ in 0..300 {
                let started = Instant::now();
                let outcome = hook.run(&input, dir.path(), &env).await.unwrap();
                let _ = hooks::combine([outcome]);
                samples.push(started.elapsed());
            }
            samples
        };
        println!(
            "no-op command hook (sh -c 'cat > /dev/null'):  {:>9.1} µs/call",
            median(samples).as_secs_f64() * 1e6
        );

        let in_process = NoOp;
        let mut batches = Vec::new();
        for _ in 0..15 {
            let started = Instant::now();
            for _ in 0..10_000 {
                let outcome = in_process.call(&input).await.unwrap();
                let _ = hooks::combine([outcome]);
            }
            batches.push(started.elapsed() / 10_000);
        }
        println!(
            "in-process hook:                              {:>9.2} µs/call",
            median(batches).as_secs_f64() * 1e6
        );
    });
}
