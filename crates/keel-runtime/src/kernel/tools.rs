//! The tools of a runtime as its callers see them (`Runtime::tools()` in the SDK): what an
//! agent may call and how each tool behaves, policy's decision on a call without making it,
//! usage statistics, and the *direct call* — a tool called without a model and without
//! staging (`keel tools call`, `POST /api/tools/{name}/call`): a run of its own, whose call
//! takes the gateway's whole path like a model's (`docs/tool-gateway.md`).

use keel_tools::policy::PolicyVerdict;
use keel_types::{PermissionMode, RequestId, RunRecord, TaskRecord, ToolCall, ToolSpec, ToolStats};
use serde_json::Value;

use super::Kernel;
use crate::RuntimeError;
use crate::agent_loop::{DirectCall, Launch, Start};
use crate::handle::RunHandle;

/// The tools of a runtime. Cheap to clone.
#[derive(Clone)]
pub struct Tools {
    kernel: Kernel,
}

impl Kernel {
    /// The tools of this runtime.
    pub fn tools(&self) -> Tools {
        Tools {
            kernel: self.clone(),
        }
    }

    /// Starts a direct call — `task` when it is a task's run — as a run of its own.
    pub(crate) async fn start_direct(
        &self,
        agent: &str,
        call: ToolCall,
        task: Option<TaskRecord>,
    ) -> Result<RunHandle, RuntimeError> {
        let spec = self.agent(agent)?;
        let provider = self.provider(agent, &spec)?;
        // The run's input names the call; a file it writes is recorded by its digest.
        let input = format!("{} {}", call.name, crate::redact::recorded_arguments(&call));
        let mut record = RunRecord::new(RequestId::generate(), None, agent, input);
        record.trace = Some(self.trace_for(None));
        self.store().create_run(&record).await?;
        Ok(self.launch(Launch {
            // A task's run is checked under the mode it was created under.
            mode: task.as_ref().and_then(|task| task.mode),
            direct: Some(DirectCall { call, task }),
            ..Launch::new(record, spec, provider, Start::Fresh)
        }))
    }
}

impl Tools {
    /// The tools an agent (default: the workspace's default agent) may call, as the model
    /// sees them. MCP tools are there once their server has listed them.
    pub fn specs(&self, agent: Option<&str>) -> Result<Vec<ToolSpec>, RuntimeError> {
        Ok(self.kernel.gateway().specs(&self.listed(agent)?).to_vec())
    }

    /// The agent's `tools:` entries as written (names and `mcp__<server>__*` globs).
    pub fn listed(&self, agent: Option<&str>) -> Result<Vec<String>, RuntimeError> {
        let name = self.kernel.agent_name(agent)?;
        Ok(self.kernel.agent(&name)?.tools)
    }

    /// The spec of a registered tool, by name (MCP tools once their server has listed them).
    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        self.kernel.gateway().tool(name).map(|t| t.spec().clone())
    }

    /// Whether a tool only reads (it changes nothing); `false` for a tool the runtime lacks.
    pub fn read_only(&self, name: &str) -> bool {
        self.kernel.gateway().is_read_only(name)
    }

    /// Whether calling a tool twice with the same arguments does no more than calling it
    /// once; `false` for a tool the runtime lacks.
    pub fn idempotent(&self, name: &str) -> bool {
        self.kernel.gateway().is_idempotent(name)
    }

    /// Whether a tool may destroy or overwrite what exists, when its author says (an MCP
    /// server's `destructiveHint`); `None` otherwise and for a tool the runtime lacks.
    pub fn destructive(&self, name: &str) -> Option<bool> {
        self.kernel
            .gateway()
            .tool(name)
            .and_then(|t| t.destructive())
    }

    /// Usage statistics per tool (calls, errors, repairs, blocks, latency), from the log.
    pub async fn stats(&self) -> Result<Vec<ToolStats>, RuntimeError> {
        Ok(self.kernel.store().tool_stats().await?)
    }

    /// What policy decides for a call of `tool` with `args` by `agent` (default: the
    /// workspace's default agent; none: only the policies for every agent apply) under
    /// `mode`, by the path a run's call takes — an MCP tool's server is asked for its tools
    /// first, so its `readOnlyHint` counts (`keel policy check`).
    pub async fn check_policy(
        &self,
        agent: Option<&str>,
        tool: &str,
        args: &Value,
        mode: Option<PermissionMode>,
    ) -> Result<PolicyVerdict, RuntimeError> {
        let kernel = &self.kernel;
        let agent = match agent {
            Some(agent) => kernel.agent(agent).map(|_| agent.to_owned())?,
            None => kernel
                .workspace()
                .default_agent()
                .map(str::to_owned)
                .unwrap_or_default(),
        };
        let gateway = kernel.gateway();
        gateway.settle(&[tool.to_owned()]).await;
        Ok(kernel
            .services()
            .governance
            .decide_call(&gateway, &agent, tool, args, mode, &[]))
    }

    /// Calls a tool directly — the gateway's checks, policy, hooks, a human when asked,
    /// execution, events — as a run of its own, without staging a task.
    pub async fn call(
        &self,
        agent: Option<&str>,
        tool: &str,
        arguments: &str,
    ) -> Result<RunHandle, RuntimeError> {
        self.kernel.accepting()?;
        let agent = self.kernel.agent_name(agent)?;
        let call = ToolCall {
            id: keel_types::new_id("call"),
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        };
        self.kernel.start_direct(&agent, call, None).await
    }
}
