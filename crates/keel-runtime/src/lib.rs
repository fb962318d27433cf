//! The runtime kernel: turns a request into a recorded run.
//!
//! [`Kernel::request`] starts a run and returns a [`RunHandle`] (live events, cancel, final
//! response). The native agent loop lives in `agent_loop`; every event goes through the
//! [`emitter`] pipeline (redact → durable append → subscribers → narration). The kernel knows
//! the ports of `keel-types`, the workspace model and the tool gateway — nothing about HTTP,
//! the CLI or a concrete store.

pub mod adapter;
mod agent_loop;
mod approval_wait;
pub mod context;
pub mod emitter;
mod error;
pub mod governance;
mod handle;
pub mod history;
mod kernel;
pub mod memory;
pub mod narrator;
pub mod output;
mod rate_limit;
pub mod rebuild;
pub mod redact;
pub mod redacting_store;
pub mod replay;
pub mod retry;
pub mod skills;
pub mod subagents;
pub mod trace;
pub mod usage;

pub use error::RuntimeError;
pub use governance::Governance;
pub use handle::{RunHandle, RunResponse};
pub use kernel::{
    Approvals, Kernel, KernelParts, Memory, RELOAD_AGENT, ReloadParts, Replica, RequestOptions,
    Runs, Sessions, ShutdownReport, Skills, TaskRequest, Tasks, Tools, workspace_changes,
    workspace_digest,
};
pub use replay::Divergence;

/// A duration in whole milliseconds (saturating), as events record them.
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
