//! Shared fakes for the tests of every Keel crate:
//!
//! - [`MockLlm`] — an OpenAI-compatible Chat Completions server on loopback, answering from a
//!   queue of [`MockResponse`]s (streamed text, tool calls split into pieces, usage, HTTP
//!   errors, malformed or cut streams, delays) and recording every request.
//! - [`TempWorkspace`] — a temporary folder with `write`/`read` helpers, the one temp
//!   workspace of every crate's tests; [`WorkspaceBuilder`] fills one with the common
//!   documents (a scripted agent, an `openai` model at a mock's URL, tools, policies, hooks).
//! - [`Cli`] — runs the built `keel` binary in a workspace with a clean environment.
//! - [`fixtures`] — records (approvals, …) tests put straight into a store.
//!
//! The `keel-mock-llm` binary (in `src/bin`) is a separate, stateless and fast mock for
//! benchmarks; it shares no code with [`MockLlm`] on purpose, so its hot path stays tiny.

// Test support panics on failed *set-up* (a port that cannot be bound, a temp file that cannot
// be written): the test cannot continue and the panic points at its line. Request handling
// never panics.
#![allow(clippy::panic)]

pub mod a2a_server;
mod cli;
pub mod cpu;
pub mod fixtures;
mod mock_anthropic;
mod mock_llm;
mod mock_response;
pub mod otlp;
pub mod process;
mod temp_workspace;
pub mod test_clients;
pub mod workflows;
mod workspace_builder;

pub use cli::{Cli, CliOutput, Serving};
pub use mock_anthropic::AnthropicSse;
pub use mock_llm::{MockLlm, RecordedRequest, Responder};
pub use mock_response::{MOCK_COMPLETION_ID, MOCK_MODEL, MockResponse, MockSse, MockToolCall};
pub use temp_workspace::TempWorkspace;
pub use workspace_builder::{CONFIG_FILE, OPENAI_MOCK_MODEL, WorkspaceBuilder};

/// The local PostgreSQL the store's tests and benchmarks use: `KEEL_TEST_DATABASE_URL`, or
/// the server every development machine and CI run on loopback (trust auth, database `test`).
/// Each test works in a schema of its own and drops it.
pub fn database_url() -> String {
    std::env::var("KEEL_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The lines of a workspace's JSONL event log (`.keel/log/*.jsonl`, segments in order) that
/// belong to run `request_id`, as written. Panics when the log cannot be read or a line (other
/// than a segment's torn end) does not parse.
pub fn logged_lines(workspace: &std::path::Path, request_id: &str) -> Vec<String> {
    let dir = workspace.join(".keel/log");
    let mut segments: Vec<std::path::PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect(),
        Err(e) => panic!("cannot read {}: {e}", dir.display()),
    };
    segments.sort();
    let mut lines = Vec::new();
    for segment in segments {
        let text = match std::fs::read_to_string(&segment) {
            Ok(text) => text,
            Err(e) => panic!("cannot read {}: {e}", segment.display()),
        };
        for line in text.lines() {
            let event: serde_json::Value = match serde_json::from_str(line) {
                Ok(event) => event,
                Err(e) => panic!("{}: a line does not parse: {e}", segment.display()),
            };
            if event["requestId"] == request_id {
                lines.push(line.to_owned());
            }
        }
    }
    lines
}

/// Where benchmarks put their workspaces: `KEEL_BENCH_DIR`, or `target/keel-bench` (not
/// `/tmp`, which is slow and noisy on small machines).
pub fn bench_dir() -> std::path::PathBuf {
    if let Ok(dir) = std::env::var("KEEL_BENCH_DIR") {
        return std::path::PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"))
        });
    target.join("keel-bench")
}
