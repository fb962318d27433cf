//! What a request to run says.

use std::collections::BTreeMap;
use std::time::Duration;

use keel_types::{Message, ModelParams, PermissionMode, SessionId};
use keel_workspace::AgentSpec;

use crate::RuntimeError;

/// One request to run.
#[derive(Debug, Clone, Default)]
pub struct RequestOptions {
    pub input: String,
    /// The agent; the workspace default when `None`.
    pub agent: Option<String>,
    pub session_id: Option<SessionId>,
    /// The run's permission mode (`plan`, `dontAsk`, …); `None`: the policies' own mode.
    pub mode: Option<PermissionMode>,
    /// An earlier conversation supplied by the caller, sent after the session's history and
    /// before the input (recorded in `runtime.request.started`). Checked against what the
    /// model wire accepts; a bad message is [`RuntimeError::InvalidInput`] naming its index.
    pub history: Vec<Message>,
    /// A time budget for this run; the smaller of it and `limits.runTimeout` applies.
    pub timeout: Option<Duration>,
    /// The principal creating the run (recorded as [`keel_types::RunRecord::owner`]).
    pub owner: Option<String>,
    /// The request's metadata (e.g. `user`), recorded in `runtime.request.started`; memory
    /// namespaces are rendered from it (`users/{metadata.user}`).
    pub metadata: BTreeMap<String, String>,
    /// Model parameters for this run's rounds, over the agent's Model document field by field
    /// (the facade's `temperature`, `max_tokens`, …; recorded in `runtime.request.started`).
    pub params: ModelParams,
    /// A JSON Schema the final answer must match, as if the agent declared it as
    /// `output.schema` (the facade's `response_format`); the agent must declare none.
    pub output_schema: Option<serde_json::Value>,
    /// Continue the session even when another principal created it (an operator's choice;
    /// the owner overridden is recorded in `runtime.request.started`). Without it such a
    /// request is [`RuntimeError::SessionForbidden`].
    pub override_session_owner: bool,
    /// The trace the run joins (a caller's `traceparent`, `RunTrace::remote`); `None`: a new
    /// trace, sampled at `observability.otlp.sampling` (`docs/observability.md`).
    pub trace: Option<keel_types::RunTrace>,
    /// The `Model` document this run uses instead of its agent's (an eval's `--model`); an
    /// agent run only. Resuming the run later uses the agent's own model.
    pub model: Option<String>,
    /// The caller's own view of the workspace's text files, which this run's file tools read
    /// and write through instead of the disk (an editor's buffers, `keel acp`); not recorded,
    /// so a resumed, forked or replayed run, and a subagent's, uses the disk.
    pub files: Option<std::sync::Arc<dyn keel_types::TextFiles>>,
}

/// A request's output schema must be a usable JSON Schema, for an agent that declares none.
pub(super) fn check_output_schema(
    agent_name: &str,
    agent: &AgentSpec,
    schema: &serde_json::Value,
) -> Result<(), RuntimeError> {
    if agent.output.is_some() {
        return Err(RuntimeError::InvalidInput(format!(
            "agent `{agent_name}` declares its own output.schema; a request cannot ask for another"
        )));
    }
    match keel_tools::gateway::schema_problem(schema) {
        Some(problem) => Err(RuntimeError::InvalidInput(format!(
            "the requested output schema is not a usable JSON Schema: {problem}"
        ))),
        None => Ok(()),
    }
}
