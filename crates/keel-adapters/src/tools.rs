//! The tools endpoint: MCP over streamable HTTP (keel-mcp's server), offering exactly the
//! run's tools. Each call is one of the run's tool calls — guarded, governed, recorded in
//! the run's log — and a refused or failed call is an MCP tool error (`isError: true`) with
//! the reason, which every MCP client hands its framework as the tool's error.

use async_trait::async_trait;
use keel_mcp::server::{
    AgentRequest, Backend, BackendError, CallContext, ExposedTool, NewTask, RunOutcome,
};
use keel_runtime::adapter::RunCalls;
use keel_types::{
    ApprovalRecord, ErrorCode, ErrorInfo, Event, RequestId, RunFilter, RunRecord, RunStatus,
    TaskRecord, ToolSpec,
};
use serde_json::Value;

/// One run's tools, as an MCP server's backend.
pub(crate) struct RunTools {
    pub request_id: RequestId,
    pub tools: Vec<ToolSpec>,
    pub calls: RunCalls,
}

fn not_here() -> BackendError {
    BackendError::Failed("a run's tools endpoint offers the run's tools only".into())
}

#[async_trait]
impl Backend for RunTools {
    fn tools(&self) -> Result<Vec<ExposedTool>, BackendError> {
        Ok(self
            .tools
            .iter()
            .map(|spec| ExposedTool {
                spec: spec.clone(),
                read_only: false,
                idempotent: false,
                destructive: None,
            })
            .collect())
    }

    fn agents(&self) -> Vec<String> {
        Vec::new()
    }

    fn offers_control(&self) -> bool {
        false
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        _cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        let reply = self
            .calls
            .tool(name, arguments.clone())
            .await
            .map_err(|refused| BackendError::Failed(refused.message))?;
        Ok(RunOutcome {
            request_id: self.request_id.clone(),
            status: match reply.is_error {
                true => RunStatus::Failed,
                false => RunStatus::Completed,
            },
            error: reply
                .is_error
                .then(|| ErrorInfo::new(ErrorCode::ToolFailed, reply.output.clone())),
            output: Some(reply.output),
        })
    }

    async fn run_agent(
        &self,
        _request: AgentRequest,
        _cx: &CallContext,
    ) -> Result<RunOutcome, BackendError> {
        Err(not_here())
    }

    async fn create_task(&self, _task: NewTask) -> Result<TaskRecord, BackendError> {
        Err(not_here())
    }

    async fn get_task(&self, _id: &str) -> Result<Option<TaskRecord>, BackendError> {
        Err(not_here())
    }

    async fn update_task(&self, _id: &str, _patch: &Value) -> Result<TaskRecord, BackendError> {
        Err(not_here())
    }

    async fn run_task(&self, _id: &str, _cx: &CallContext) -> Result<RunOutcome, BackendError> {
        Err(not_here())
    }

    async fn delete_task(&self, _id: &str) -> Result<bool, BackendError> {
        Err(not_here())
    }

    async fn list_runs(&self, _filter: RunFilter) -> Result<Vec<RunRecord>, BackendError> {
        Err(not_here())
    }

    async fn run_events(
        &self,
        _id: &RequestId,
        _after: u64,
    ) -> Result<Option<Vec<Event>>, BackendError> {
        Err(not_here())
    }

    async fn pending_approvals(&self) -> Result<Vec<ApprovalRecord>, BackendError> {
        Err(not_here())
    }
}
