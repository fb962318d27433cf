//! The seam between the MCP server and Keel: [`Backend`], in Keel's own types. The server
//! (`handler.rs`) turns MCP requests into calls of this trait and its answers into MCP
//! results; an implementation over a Keel runtime (keel-server's) does the work.

use async_trait::async_trait;
use keel_types::{ApprovalRecord, ErrorInfo, Event, RequestId, RunFilter, RunRecord, RunStatus};
use keel_types::{TaskRecord, ToolSpec};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A workspace tool as MCP clients see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedTool {
    /// Its name, description and argument schema, as the model sees them.
    pub spec: ToolSpec,
    /// The tool changes nothing (MCP `readOnlyHint`).
    pub read_only: bool,
    /// Calling it twice with the same arguments does no more than once (`idempotentHint`).
    pub idempotent: bool,
    /// It may destroy or overwrite what exists (`destructiveHint`), when its author says (an
    /// MCP server's own hint, passed through); only for a tool that is not read-only.
    pub destructive: Option<bool>,
}

/// What every call that may start a run gets besides its arguments.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The principal to record as the owner of the runs the call starts (over HTTP, the
    /// [`Caller`] the mounting server put on the request); `None` over stdio.
    pub owner: Option<String>,
    /// Cancelled when the client cancels the request or goes away: a run the call started
    /// should then be cancelled.
    pub cancel: CancellationToken,
    /// Asks the client's user, when the client can be asked (it declared `elicitation`): a
    /// run the call started that waits for an approval may put the question to them.
    pub ask: Option<super::Asker>,
    /// The caller's W3C trace context: the request's `_meta.traceparent` (SEP-414), else its
    /// HTTP `traceparent` header; the runs the call starts join that trace.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

/// Who calls over HTTP. The server that mounts [`super::HttpService`] puts it into each
/// request's extensions after its own authentication; runs the request starts are recorded
/// as this principal's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The principal's name (e.g. an API key's), or `None` when nobody is named.
    pub owner: Option<String>,
}

/// A question for an agent: `agent__<name>`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRequest {
    pub agent: String,
    pub input: String,
    /// A session id to make the run a turn of.
    pub session: Option<String>,
}

/// A call to stage as a task: `keel__task_create`'s arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub tool: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// Run the `PreToolUse` hooks again when the task runs.
    pub double_check_on_run: bool,
}

/// How a run the server started ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub request_id: RequestId,
    pub status: RunStatus,
    /// The final answer (an agent) or the tool's output (a direct call).
    pub output: Option<String>,
    /// Why it did not complete.
    pub error: Option<ErrorInfo>,
}

/// Why a backend call did not answer. Each variant maps to one kind of MCP answer (see
/// `handler.rs`).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The arguments do not fit (a bad session id, an unknown agent): a JSON-RPC
    /// invalid-params error.
    #[error("{0}")]
    InvalidParams(String),
    /// The operation was understood and refused or found nothing (no such task, a task that
    /// cannot run, the server is full): a tool result with `isError: true` and this text.
    #[error("{0}")]
    Failed(String),
    /// The server cannot serve the request (the store failed): a JSON-RPC internal error.
    #[error("{0}")]
    Internal(String),
}

/// What the MCP server serves, in Keel's types. Tool calls, agent runs and task runs are
/// ordinary recorded runs, governed as in any run; the server waits for each to end.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Waits until the tools are known (the workspace's own MCP servers have listed theirs
    /// or failed); called before each listing. The default has nothing to wait for.
    async fn settle(&self) {}

    /// The workspace tools clients may call, by their own names (`mcp__…` ones included).
    fn tools(&self) -> Result<Vec<ExposedTool>, BackendError>;

    /// Whether the server's own `keel__` tools (tasks, runs, approvals) are offered. The
    /// default offers them; a server that is only a run's tools (a process-backed agent's
    /// tools endpoint) does not.
    fn offers_control(&self) -> bool {
        true
    }

    /// The agents clients may ask, by name.
    fn agents(&self) -> Vec<String>;

    /// Calls a workspace tool as a direct call, recorded as a run of its own and governed as
    /// in a run (gateway, policy, hooks, a human's approval); returns when the run has ended.
    async fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError>;

    /// Runs an agent on an input; returns when the run has ended.
    async fn run_agent(
        &self,
        request: AgentRequest,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError>;

    /// Stages a call: checked (gateway, policy, `PreToolUse` hooks) and recorded with the
    /// decision.
    async fn create_task(&self, task: NewTask) -> Result<TaskRecord, BackendError>;

    /// One task, if it exists.
    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, BackendError>;

    /// Patches a task's arguments (JSON merge patch) and checks the call again.
    async fn update_task(&self, id: &str, patch: &Value) -> Result<TaskRecord, BackendError>;

    /// Runs a task as a run of its own; returns when the run has ended.
    async fn run_task(&self, id: &str, cx: &CallContext) -> Result<RunOutcome, BackendError>;

    /// Deletes a task; whether it existed.
    async fn delete_task(&self, id: &str) -> Result<bool, BackendError>;

    /// Runs, newest first.
    async fn list_runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, BackendError>;

    /// A run's stored events with `seq > after`, or `None` when there is no such run.
    async fn run_events(
        &self,
        id: &RequestId,
        after: u64,
    ) -> Result<Option<Vec<Event>>, BackendError>;

    /// The approvals waiting for a decision, newest first.
    async fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>, BackendError>;
}
