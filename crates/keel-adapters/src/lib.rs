//! Backend adapters: agents written with other frameworks — LangGraph, DeepAgents, the
//! OpenAI Agents SDK, or any program in any language — run as Keel agents
//! (`backend: {kind: process}`), their model calls and tool calls passing through Keel.
//!
//! [`ProcessAdapter`] implements keel-runtime's [`Adapter`] with the process adapter
//! protocol, version [`PROTOCOL`] (`docs/adapters.md`). For each run it:
//! 1. starts the run's endpoints on loopback (`endpoints.rs`): a model endpoint speaking
//!    OpenAI Chat Completions (`chat.rs`), each round one of the run's model rounds, and a
//!    tools endpoint speaking MCP (`tools.rs`), each call one of the run's governed calls;
//! 2. starts the program in a process group of its own, with a clean environment, the
//!    endpoints' addresses and secret in `KEEL_*` and `OPENAI_*` variables and the run's
//!    input as one JSON document on stdin (`process.rs`);
//! 3. reads its stdout as JSON lines (progress, the final answer or an error) and keeps other
//!    lines, and stderr, as bounded logs;
//! 4. ends with its final answer, or fails with why (it could not start, exited without an
//!    answer, crashed — with the tail of its stderr — or outran its `timeout`), and stops the
//!    whole process group, also when the run is cancelled.

mod a2a;
mod chat;
mod endpoints;
mod process;
mod tools;

use std::time::Duration;

use async_trait::async_trait;
use keel_runtime::adapter::{Adapter, AdapterAnswer, AdapterFailure, AdapterRun};

pub use a2a::A2aClient;

/// The version of the process adapter protocol this crate speaks (stdin's `protocol`,
/// `KEEL_PROTOCOL`).
pub const PROTOCOL: u32 = 1;

/// Runs process-backed agents' programs.
#[derive(Debug, Clone)]
pub struct ProcessAdapter {
    /// How long a program has to exit after SIGTERM before SIGKILL.
    pub grace: Duration,
}

impl Default for ProcessAdapter {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(3),
        }
    }
}

#[async_trait]
impl Adapter for ProcessAdapter {
    async fn run(&self, run: AdapterRun) -> Result<AdapterAnswer, AdapterFailure> {
        let endpoints = endpoints::start(
            run.request_id.clone(),
            run.tools.clone(),
            run.calls.clone(),
            &run.model,
        )
        .await
        .map_err(|e| AdapterFailure::Start(format!("no loopback port for its endpoints: {e}")))?;
        process::run(&run, &endpoints, self.grace).await
    }
}
