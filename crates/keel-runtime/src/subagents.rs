//! Delegation to subagents (`docs/workflows.md#subagents`): the `task` tool an agent with
//! `subagents` gets, and the seam through which the agent loop starts child runs.
//!
//! A `task {agent, prompt}` call passes the gateway like any call (schema, the semantic
//! check that `agent` is one of the caller's subagents, policy, hooks); the agent loop then
//! asks the kernel, through `Delegate`, for a child run linked to its parent
//! (`links.parentId`, `links.rootId`, `links.parentCall`), limited in depth, and governed by the
//! parent's effective policy as a narrowing layer (so it has no more permission than its
//! parent). The parent's log records `agent.handoff` with the child's id; the call's result
//! is the child's answer (its structured output when it has one). Dropping the call cancels
//! the child, so cancelling the parent stops its children and their tools.

use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{
    Issue, PermissionMode, RequestId, RunFilter, RunRecord, RunStore, StoreError, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec,
};
use keel_workspace::{PolicySpec, TASK_TOOL, Workspace};
use serde_json::Value;

use crate::RuntimeError;
use crate::handle::RunHandle;

/// A child run to start for a parent's call.
#[derive(Debug, Clone)]
pub(crate) struct ChildRequest {
    /// The parent's record (its id, links and owner).
    pub parent: RunRecord,
    /// The parent's call (a `task` call id, or a workflow node's key).
    pub call: String,
    pub agent: String,
    pub prompt: String,
    /// The narrowing layers the child runs under: the parent's own and the parent's
    /// effective policy.
    pub narrowing: Vec<PolicySpec>,
    /// The child's depth (the request's own run has depth 0).
    pub depth: u32,
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The parent continues after an interruption: it may have started this child before
    /// (looked up by `call` then; otherwise no lookup is made).
    pub resumed: bool,
}

/// How the agent loop starts child runs: implemented by the kernel.
#[async_trait]
pub(crate) trait Delegate: Send + Sync {
    /// Starts a child run (or picks up the one an interrupted parent had started for the
    /// same call: resumed when interrupted, its record when it ended).
    async fn delegate(&self, child: ChildRequest) -> Result<Child, RuntimeError>;
}

/// A child run: live, or already ended (found again after the parent resumed).
pub(crate) enum Child {
    Live(RunHandle),
    Ended(Box<RunRecord>),
}

/// Cancels a child run when its parent's wait for it is dropped before the child ended,
/// unless the runtime is shutting down (then the child is interrupted like its parent, and
/// resumed with it).
pub(crate) struct CancelChild {
    child: Option<tokio_util::sync::CancellationToken>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl CancelChild {
    pub(crate) fn new(child: &RunHandle, shutdown: &tokio_util::sync::CancellationToken) -> Self {
        Self {
            child: Some(child.cancel_token()),
            shutdown: shutdown.clone(),
        }
    }

    /// The child ended: nothing to cancel.
    pub(crate) fn disarm(mut self) {
        self.child = None;
    }
}

impl Drop for CancelChild {
    fn drop(&mut self) {
        if let Some(child) = self.child.take()
            && !self.shutdown.is_cancelled()
        {
            child.cancel();
        }
    }
}

/// The narrowing layers a run of `agent` under permission `mode` passes to its children:
/// every `Policy` that applies to it, for any agent, and its mode.
pub(crate) fn layers_of(
    workspace: &Workspace,
    agent: &str,
    mode: Option<PermissionMode>,
) -> Vec<PolicySpec> {
    let mut layers: Vec<PolicySpec> = workspace
        .policies
        .values()
        .filter(|p| p.agents.is_empty() || p.agents.iter().any(|a| a == agent))
        .map(|p| PolicySpec {
            agents: Vec::new(),
            mode: p.mode,
            rules: p.rules.clone(),
        })
        .collect();
    if let Some(mode) = mode {
        layers.push(PolicySpec {
            agents: Vec::new(),
            mode: Some(mode),
            rules: Vec::new(),
        });
    }
    layers
}

/// What a child's record gives its parent's call: the structured output when there is one,
/// else the answer; an error naming the child otherwise.
pub(crate) fn child_result(agent: &str, record: &RunRecord) -> Result<String, String> {
    match (&record.value, &record.output, &record.error) {
        (Some(value), _, _) if record.status == keel_types::RunStatus::Completed => {
            Ok(value.to_string())
        }
        (None, Some(output), _) if record.status == keel_types::RunStatus::Completed => {
            Ok(output.clone())
        }
        (_, _, Some(error)) => Err(format!(
            "subagent `{agent}` (run {}) {}: {}",
            record.request_id,
            record.status.as_str(),
            error.message
        )),
        _ => Err(format!(
            "subagent `{agent}` (run {}) ended {}",
            record.request_id,
            record.status.as_str()
        )),
    }
}

/// `task`'s arguments, parsed by the agent loop when it runs the call.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskInput {
    /// The subagent's name.
    #[schemars(length(min = 1))]
    pub agent: String,
    /// The task, complete in itself.
    #[schemars(length(min = 1))]
    pub prompt: String,
}

/// `task {agent, prompt}`: delegates to one of the calling agent's subagents. The agent loop
/// runs it (a child run); called any other way it refuses.
#[derive(Debug)]
pub struct TaskTool {
    spec: ToolSpec,
    workspace: Arc<Workspace>,
}

impl TaskTool {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Self {
            spec: ToolSpec {
                name: TASK_TOOL.to_owned(),
                description: "Delegate a self-contained task to one of your subagents and get \
                              its answer. Several calls run in parallel. Give the subagent \
                              everything it needs in `prompt`: it does not see this \
                              conversation."
                    .to_owned(),
                parameters: keel_tools::input::schema_of::<TaskInput>(),
            },
            workspace,
        }
    }

    /// The subagents `agent` may delegate to.
    fn subagents(&self, agent: &str) -> &[String] {
        self.workspace
            .agents
            .get(agent)
            .map(|a| a.subagents.as_slice())
            .unwrap_or_default()
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Delegating changes nothing by itself: the child's own calls are governed.
    fn read_only(&self) -> bool {
        true
    }

    /// Running it again after an interruption picks up the same child run.
    fn idempotent(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let Some(wanted) = args.get("agent").and_then(Value::as_str) else {
            return Vec::new();
        };
        let allowed = self.subagents(&ctx.agent);
        if allowed.iter().any(|a| a == wanted) {
            return Vec::new();
        }
        let yours = match allowed.is_empty() {
            true => "none".to_owned(),
            false => allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        vec![Issue {
            path: "/agent".into(),
            expected: "one of your subagents".into(),
            found: keel_tools::gateway::quote(wanted).into_owned(),
            message: format!("`{wanted}` is not one of your subagents; yours are {yours}"),
        }]
    }

    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed(
            "`task` delegates from inside an agent's run; it cannot be called directly".into(),
        ))
    }
}

/// A run and the runs it started (subagents, workflow nodes), recursively.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTree {
    #[serde(flatten)]
    pub run: RunRecord,
    pub children: Vec<RunTree>,
}

/// Run `id` and every run it started, recursively, children oldest first; `None` when
/// there is no run `id`.
pub async fn run_tree(store: &dyn RunStore, id: &RequestId) -> Result<Option<RunTree>, StoreError> {
    let Some(run) = store.get_run(id).await? else {
        return Ok(None);
    };
    Ok(Some(subtree(store, run).await?))
}

fn subtree(
    store: &dyn RunStore,
    run: RunRecord,
) -> futures_util::future::BoxFuture<'_, Result<RunTree, StoreError>> {
    Box::pin(async move {
        let mut children = store
            .list_runs(&RunFilter {
                parent: Some(run.request_id.clone()),
                ..RunFilter::default()
            })
            .await?;
        children.reverse();
        let mut nodes = Vec::with_capacity(children.len());
        for child in children {
            nodes.push(subtree(store, child).await?);
        }
        Ok(RunTree {
            run,
            children: nodes,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model-facing contract of `task`, reviewed when it changes.
    #[test]
    fn task_input_schema() {
        insta::assert_json_snapshot!("task_input", keel_tools::input::schema_of::<TaskInput>());
    }
}
