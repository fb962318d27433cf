//! Keel as an MCP server, over the runtime: [`McpBackend`] implements keel-mcp's `Backend`
//! with the SDK, for `keel mcp` (stdio, [`serve_mcp_stdio`]) and for `/mcp` of `keel serve`
//! (streamable HTTP, [`handle`]).
//!
//! What it serves: the tools of one agent (`keel mcp --agent`, default the workspace's
//! default agent), because a direct call is governed by that agent's inventory and policies;
//! every agent as `agent__<name>`; tasks under that same agent; runs, their events and the
//! pending approvals. Each call that runs something starts an ordinary recorded run and
//! waits for its end — an `ask` waits for a decision from `keel approvals` or the HTTP API
//! within `limits.approvalTimeout`, and is also put to the client's user when the client
//! declared `elicitation` (whoever decides first wins) — and a client's cancellation cancels
//! the run. Over HTTP
//! the runs also take a place in the server's admission queue, its `requestTimeout` and the
//! caller as their owner, as runs started under `/api` do.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Extension;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use keel::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, Event, EventPayload, RequestId, RequestOptions,
    RunFilter, RunHandle, RunRecord, Runtime, RuntimeError, SessionId, TaskRecord, TaskRequest,
};
use keel_mcp::server::{
    AgentRequest, Backend, BackendError, CallContext, Caller, ExposedTool, HttpOptions,
    HttpService, NewTask, RunOutcome, ServeError,
};
use keel_types::StoreError;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::state::{Admission, AppState, Principal};

/// The limits of runs started over HTTP.
#[derive(Clone)]
struct HttpLimits {
    admission: Arc<Admission>,
    request_timeout: Duration,
}

/// The runtime as an MCP backend.
#[derive(Clone)]
pub struct McpBackend {
    runtime: Runtime,
    /// Whose inventory and policies direct calls and tasks use; `None` when the workspace has
    /// no default agent (then only agents and the `keel__` tools are served).
    agent: Option<String>,
    http: Option<HttpLimits>,
}

impl McpBackend {
    /// Serves `agent`'s tools (default: the workspace's default agent). Fails when the agent
    /// is unknown, or none is given and the workspace has no default.
    pub fn new(runtime: Runtime, agent: Option<&str>) -> Result<Self, keel::Error> {
        runtime.tools().specs(agent)?;
        let agent = agent
            .or(runtime.workspace().default_agent())
            .map(str::to_owned);
        Ok(Self {
            runtime,
            agent,
            http: None,
        })
    }

    /// The backend of `/mcp`: the default agent's tools, under the server's limits.
    fn for_http(runtime: Runtime, admission: Arc<Admission>, request_timeout: Duration) -> Self {
        Self {
            agent: runtime.workspace().default_agent().map(str::to_owned),
            runtime,
            http: Some(HttpLimits {
                admission,
                request_timeout,
            }),
        }
    }

    /// The agent direct calls and tasks use, or why there is none.
    fn agent(&self) -> Result<&str, BackendError> {
        self.agent
            .as_deref()
            .ok_or_else(|| BackendError::Failed(RuntimeError::NoDefaultAgent.to_string()))
    }

    /// Follows a started run to its end; the client's cancellation cancels it.
    async fn finish(
        &self,
        mut handle: RunHandle,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        let run = handle.cancel_token();
        // Questions put to the client's user, dropped (aborted) with the call.
        let mut asking = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                event = handle.next_event() => match event {
                    Some(event) => {
                        if let (Some(ask), EventPayload::ApprovalRequested { approval }) =
                            (&cx.ask, &event.payload)
                        {
                            asking.spawn(ask_user(self.runtime.clone(), ask.clone(), (**approval).clone()));
                        }
                    }
                    None => break,
                },
                () = cx.cancel.cancelled() => {
                    run.cancel();
                    break;
                }
            }
        }
        asking.abort_all();
        let response = handle
            .wait()
            .await
            .map_err(|e| BackendError::Internal(e.to_string()))?;
        Ok(RunOutcome {
            request_id: response.request_id,
            status: response.status,
            output: response.output,
            error: response.error,
        })
    }

    /// Runs `start` under the server's admission (over HTTP) and follows the run to its end.
    async fn run<F, E>(&self, cx: &CallContext, start: F) -> Result<RunOutcome, BackendError>
    where
        F: Future<Output = Result<RunHandle, E>>,
        E: Into<keel::Error>,
    {
        let ticket = match &self.http {
            Some(limits) => Some(limits.admission.admit().map_err(|_| {
                BackendError::Failed(
                    "the server is running as many requests as it takes; retry in a moment".into(),
                )
            })?),
            None => None,
        };
        let handle = start.await.map_err(refusal)?;
        let outcome = self.finish(handle, cx).await;
        drop(ticket);
        outcome
    }
}

/// Puts a pending approval to the MCP client's user and decides it with their answer, unless
/// someone decided first (an operator's decision wins; the client's is then refused quietly).
/// A user who cancels, or a client that cannot ask, leaves the approval to operators.
async fn ask_user(runtime: Runtime, ask: keel_mcp::server::Asker, approval: ApprovalRecord) {
    let mut message = format!(
        "Keel asks to run `{}` with {}.",
        approval.tool, approval.arguments
    );
    if let Some(reason) = approval.ask_reason.as_deref().filter(|r| !r.is_empty()) {
        message.push_str(&format!(" Why it asks: {reason}."));
    }
    let Some(approve) = ask.confirm(message).await else {
        return;
    };
    let reason = match approve {
        true => "approved by the MCP client's user",
        false => "denied by the MCP client's user",
    };
    if let Err(error) = runtime
        .approvals()
        .decide(
            &approval.approval_id,
            approve,
            ApprovalScope::Once,
            "mcp-client",
            Some(reason),
        )
        .await
    {
        tracing::debug!(%error, approval = %approval.approval_id, "The MCP client's answer came too late.");
    }
}

/// An SDK error as the MCP client should see it: what the caller can act on is a refusal
/// with the message; a store or internal failure is the server's.
fn refusal(error: impl Into<keel::Error>) -> BackendError {
    match error.into() {
        keel::Error::Runtime(RuntimeError::Store(e)) | keel::Error::Store(e) => {
            BackendError::Internal(e.to_string())
        }
        keel::Error::Runtime(RuntimeError::Internal(message)) => BackendError::Internal(message),
        other => BackendError::Failed(other.to_string()),
    }
}

fn internal(error: impl Into<keel::Error>) -> BackendError {
    BackendError::Internal(error.into().to_string())
}

#[async_trait]
impl Backend for McpBackend {
    async fn settle(&self) {
        self.runtime.settle_mcp().await;
    }

    fn tools(&self) -> Result<Vec<ExposedTool>, BackendError> {
        let Some(agent) = &self.agent else {
            return Ok(Vec::new());
        };
        let specs = self.runtime.tools().specs(Some(agent)).map_err(internal)?;
        Ok(specs
            .into_iter()
            .map(|spec| ExposedTool {
                read_only: self.runtime.tools().read_only(&spec.name),
                idempotent: self.runtime.tools().idempotent(&spec.name),
                destructive: self.runtime.tools().destructive(&spec.name),
                spec,
            })
            .collect())
    }

    fn agents(&self) -> Vec<String> {
        self.runtime.workspace().agents.keys().cloned().collect()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        let agent = self.agent()?;
        let arguments = arguments.to_string();
        self.run(cx, self.runtime.tools().call(Some(agent), name, &arguments))
            .await
    }

    async fn run_agent(
        &self,
        request: AgentRequest,
        cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        let session_id = request
            .session
            .as_deref()
            .map(SessionId::parse)
            .transpose()
            .map_err(|e| BackendError::InvalidParams(format!("invalid `session`: {e}")))?;
        let options = RequestOptions {
            input: request.input,
            agent: Some(request.agent),
            session_id,
            owner: cx.owner.clone(),
            timeout: self.http.as_ref().map(|limits| limits.request_timeout),
            trace: cx
                .traceparent
                .as_deref()
                .and_then(|header| keel_types::TraceParent::parse(header).ok())
                .map(|parent| keel_types::RunTrace::remote(parent, cx.tracestate.clone())),
            ..Default::default()
        };
        self.run(cx, self.runtime.request(options)).await
    }

    async fn create_task(&self, task: NewTask) -> Result<TaskRecord, BackendError> {
        let request = TaskRequest {
            agent: Some(self.agent()?.to_owned()),
            tool: task.tool,
            arguments: task.arguments.to_string(),
            double_check_on_run: task.double_check_on_run,
            // The served agent's own permission mode applies.
            mode: None,
        };
        self.runtime.tasks().create(request).await.map_err(refusal)
    }

    async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, BackendError> {
        self.runtime.tasks().get(id).await.map_err(internal)
    }

    async fn update_task(&self, id: &str, patch: &Value) -> Result<TaskRecord, BackendError> {
        self.runtime
            .tasks()
            .update(id, patch)
            .await
            .map_err(refusal)
    }

    async fn run_task(&self, id: &str, cx: &CallContext) -> Result<RunOutcome, BackendError> {
        self.run(cx, self.runtime.tasks().run(id)).await
    }

    async fn delete_task(&self, id: &str) -> Result<bool, BackendError> {
        self.runtime.tasks().delete(id).await.map_err(internal)
    }

    async fn list_runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, BackendError> {
        self.runtime.runs().list(&filter).await.map_err(internal)
    }

    async fn run_events(
        &self,
        id: &RequestId,
        after: u64,
    ) -> Result<Option<Vec<Event>>, BackendError> {
        if self
            .runtime
            .runs()
            .get(id)
            .await
            .map_err(internal)?
            .is_none()
        {
            return Ok(None);
        }
        match self.runtime.runs().events(id, after).await {
            Ok(events) => Ok(Some(events)),
            Err(RuntimeError::Store(StoreError::NotFound(_))) => Ok(None),
            Err(error) => Err(internal(error)),
        }
    }

    async fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>, BackendError> {
        self.runtime
            .approvals()
            .list(Some(ApprovalStatus::Pending))
            .await
            .map_err(internal)
    }
}

/// Serves `backend` over this process's stdin and stdout until the client closes them or
/// `shutdown` is cancelled (`keel mcp`).
pub async fn serve_mcp_stdio(
    backend: McpBackend,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    keel_mcp::server::serve_stdio(Arc::new(backend), shutdown).await
}

/// How `/mcp` is served: over `runtime`, its runs under the server's `admission` and
/// `request_timeout`, until `stop`.
pub(crate) struct HttpMount {
    pub runtime: Runtime,
    pub admission: Arc<Admission>,
    pub request_timeout: Duration,
    /// Whether API keys are configured: then every request is authenticated before it gets
    /// here; without keys the server is on loopback, and only loopback `Host`s are accepted
    /// (against DNS rebinding).
    pub keys_configured: bool,
    pub stop: CancellationToken,
}

/// The streamable-HTTP service of `/mcp`.
pub(crate) fn http_service(mount: HttpMount) -> HttpService {
    let server = &mount.runtime.workspace().runtime.server;
    let options = HttpOptions {
        allowed_hosts: (!mount.keys_configured)
            .then(|| vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
        max_body_bytes: usize::try_from(server.max_body_bytes).unwrap_or(usize::MAX),
        stop: mount.stop,
    };
    let backend = McpBackend::for_http(mount.runtime, mount.admission, mount.request_timeout);
    keel_mcp::server::http_service(Arc::new(backend), options)
}

/// `POST|GET|DELETE /mcp`: MCP's streamable HTTP (operator keys). The caller's name goes
/// with the request, so the runs it starts are recorded as its own.
pub(crate) async fn handle(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(Caller {
        owner: principal.owner(),
    });
    state.mcp.handle(request).await.map(Body::new)
}
