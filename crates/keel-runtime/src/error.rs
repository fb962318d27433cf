//! Errors of the kernel's own operations (starting and inspecting runs). Failures *inside* a
//! run are not errors of this kind: they end the run and are recorded on it.

use keel_types::StoreError;

/// Why the kernel refused an operation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    /// The request names an agent the workspace does not define.
    #[error("unknown agent `{name}` (agents: {available})")]
    UnknownAgent { name: String, available: String },
    /// The request names no agent and the workspace has no default.
    #[error(
        "no agent given and the workspace has no default agent (set Runtime.spec.defaultAgent or pass --agent)"
    )]
    NoDefaultAgent,
    /// The agent's model could not be set up (missing key, unreadable script…).
    #[error("model `{model}` of agent `{agent}` is unavailable: {message}")]
    ModelUnavailable {
        agent: String,
        model: String,
        message: String,
    },
    /// The request itself is invalid.
    #[error("invalid request: {0}")]
    InvalidInput(String),
    /// A `$mention` in the input names a skill that does not exist or that the agent may not
    /// use, or a skill the run needs cannot be read (HTTP 400, CLI exit 2).
    #[error("{0}")]
    Skill(String),
    /// A memory operation or a run's memory is invalid: a namespace that cannot be rendered
    /// (missing request metadata) or is unknown, a text too long, a bad tag (HTTP 400, CLI
    /// exit 2). Nothing is stored.
    #[error("{0}")]
    Memory(String),
    /// What the operation names does not exist, e.g. ``no run `run_…` `` (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The run is not in a state that allows the operation, e.g. retrying a run that is still
    /// running (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The request continues a session another principal created (another API key, or
    /// another `metadata.user`) (HTTP 403 `session_forbidden`, CLI exit 2). The message names
    /// neither the owner nor anything the session holds.
    #[error(
        "session `{0}` cannot be continued by this caller: it belongs to another principal (API key and metadata.user); use another session id"
    )]
    SessionForbidden(String),
    /// The runtime is shutting down and starts no new work (HTTP 503).
    #[error("the runtime is shutting down")]
    ShuttingDown,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's task ended abnormally.
    #[error("the run ended abnormally: {0}")]
    Internal(String),
}
