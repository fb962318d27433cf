//! What a request to run says.

use std::collections::BTreeMap;
use std::time::Duration;

use keel_types::{Message, PermissionMode, SessionId};

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
    /// The principal creating the run (recorded as [`RunRecord::owner`]).
    pub owner: Option<String>,
    /// The request's metadata (e.g. `user`), recorded in `runtime.request.started`; memory
    /// namespaces are rendered from it (`users/{metadata.user}`).
    pub metadata: BTreeMap<String, String>,
}
