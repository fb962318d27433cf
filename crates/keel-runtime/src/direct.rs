//! Tool calls made directly by clients — operators, CI, external AIs — without a model
//! (`docs/tool-gateway.md#tasks-and-direct-calls`). A *task* stages a call: `create` runs the
//! gateway's checks (inventory, validation with repair, semantic checks) and records the
//! decision; `update` patches the arguments and checks again; `run` executes it as a run of
//! its own whose log holds the `runtime.tool.direct.*` events; `delete` forgets it.
//! `direct_run` is create + run in one.

use keel_types::{
    RequestId, RunRecord, TaskDecision, TaskRecord, TaskStatus, ToolCall, ToolContext,
};
use serde_json::Value;

use crate::RuntimeError;
use crate::agent_loop::{DirectCall, Launch, Start};
use crate::handle::RunHandle;
use crate::kernel::Kernel;

impl Kernel {
    /// Stages a call of `tool` with `arguments` (JSON text) for `agent` (default: the
    /// workspace's default agent): checks it and records the task with the decision.
    pub async fn create_task(
        &self,
        agent: Option<&str>,
        tool: &str,
        arguments: &str,
    ) -> Result<TaskRecord, RuntimeError> {
        let agent = self.agent_name(agent)?;
        let task_id = keel_types::new_id("task");
        let now = keel_types::now_rfc3339();
        let mut task = TaskRecord {
            task_id,
            agent,
            requested_tool: tool.to_owned(),
            tool: tool.to_owned(),
            arguments: Value::Null,
            decision: TaskDecision::Deny,
            issues: Vec::new(),
            repairs: Vec::new(),
            status: TaskStatus::Created,
            request_id: None,
            output: None,
            created_at: now.clone(),
            updated_at: now,
        };
        self.check_task(&mut task, arguments).await?;
        self.store().put_task(&task).await?;
        Ok(task)
    }

    /// One task.
    pub async fn get_task(&self, id: &str) -> Result<Option<TaskRecord>, RuntimeError> {
        Ok(self.store().get_task(id).await?)
    }

    /// Tasks, newest first.
    pub async fn list_tasks(&self, limit: Option<usize>) -> Result<Vec<TaskRecord>, RuntimeError> {
        Ok(self.store().list_tasks(limit).await?)
    }

    /// Merges `patch` into a created task's arguments (JSON merge patch: `null` removes a
    /// field) and checks the call again.
    pub async fn update_task(&self, id: &str, patch: &Value) -> Result<TaskRecord, RuntimeError> {
        let mut task = self.existing_task(id).await?;
        if task.status != TaskStatus::Created {
            return Err(RuntimeError::InvalidInput(format!(
                "task `{id}` is {}; only created tasks can be updated",
                task.status.as_str()
            )));
        }
        let mut arguments = task.arguments.clone();
        merge_patch(&mut arguments, patch);
        task.tool = task.requested_tool.clone();
        self.check_task(&mut task, &arguments.to_string()).await?;
        task.updated_at = keel_types::now_rfc3339();
        self.store().put_task(&task).await?;
        Ok(task)
    }

    /// Runs a task the gateway allowed, as a run of its own.
    pub async fn run_task(&self, id: &str) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let mut task = self.existing_task(id).await?;
        match (task.decision, task.status) {
            // A task that needs approval runs and waits for the human in its run.
            (TaskDecision::Allow | TaskDecision::NeedsApproval, TaskStatus::Created) => {}
            (TaskDecision::Allow | TaskDecision::NeedsApproval, status) => {
                return Err(RuntimeError::InvalidInput(format!(
                    "task `{id}` is {} already",
                    status.as_str()
                )));
            }
            (decision, _) => {
                return Err(RuntimeError::InvalidInput(format!(
                    "task `{id}` cannot run: the gateway's decision is {decision:?}"
                )));
            }
        }
        task.status = TaskStatus::Running;
        task.updated_at = keel_types::now_rfc3339();
        self.store().put_task(&task).await?;
        let call = ToolCall {
            id: format!("call_{}", task.task_id),
            name: task.tool.clone(),
            arguments: task.arguments.to_string(),
        };
        self.start_direct(&task.agent.clone(), call, Some(task))
            .await
    }

    /// Deletes a task; whether it existed.
    pub async fn delete_task(&self, id: &str) -> Result<bool, RuntimeError> {
        Ok(self.store().delete_task(id).await?)
    }

    /// Calls a tool directly (checks, execution, events), without staging a task.
    pub async fn direct_run(
        &self,
        agent: Option<&str>,
        tool: &str,
        arguments: &str,
    ) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let agent = self.agent_name(agent)?;
        let call = ToolCall {
            id: keel_types::new_id("call"),
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        };
        self.start_direct(&agent, call, None).await
    }

    async fn start_direct(
        &self,
        agent: &str,
        call: ToolCall,
        task: Option<TaskRecord>,
    ) -> Result<RunHandle, RuntimeError> {
        let spec = self.agent(agent)?;
        let provider = self.provider(agent, &spec)?;
        let input = format!("{} {}", call.name, call.arguments);
        let record = RunRecord::new(RequestId::generate(), None, agent, input);
        self.store().create_run(&record).await?;
        Ok(self.launch(Launch {
            direct: Some(DirectCall { call, task }),
            ..Launch::new(record, spec, provider, Start::Fresh)
        }))
    }

    /// Runs the gateway's checks on a task's call and records the outcome on it.
    async fn check_task(&self, task: &mut TaskRecord, arguments: &str) -> Result<(), RuntimeError> {
        let spec = self.agent(&task.agent)?;
        let ctx = ToolContext {
            workspace_root: self.workspace().root.clone(),
            request_id: RequestId::from(task.task_id.as_str()),
            session_id: None,
            agent: task.agent.clone(),
            max_output_bytes: usize::try_from(
                self.workspace().runtime.limits.max_tool_output_bytes,
            )
            .unwrap_or(usize::MAX),
            // An operator's call: no read-before-edit check.
            seen_files: None,
        };
        let call = ToolCall {
            id: task.task_id.clone(),
            name: task.requested_tool.clone(),
            arguments: arguments.to_owned(),
        };
        let workspace = self.workspace().clone();
        let agent = task.agent.clone();
        let mode_of = move |tool: &str| workspace.gateway_mode(&agent, tool);
        let verdict = self
            .gateway()
            .guard(&ctx, &spec.tools, &call, &mode_of)
            .await;
        task.decision = match verdict.is_allowed() {
            true => TaskDecision::Allow,
            false => TaskDecision::Deny,
        };
        task.tool = verdict.tool().to_owned();
        task.arguments = verdict.arguments().cloned().unwrap_or_else(|| {
            serde_json::from_str(arguments).unwrap_or(Value::String(arguments.to_owned()))
        });
        task.issues = verdict.issues().to_vec();
        task.repairs = verdict.repairs().to_vec();
        // Policy is part of the decision (hooks and the human run when the task runs).
        if task.decision == TaskDecision::Allow {
            let policy = self.governance().policy().decide(
                &keel_tools::policy::PolicyQuery {
                    agent: &task.agent,
                    tool: &task.tool,
                    args: &task.arguments,
                    read_only: self.gateway().is_read_only(&task.tool),
                    mode: None,
                },
                &[],
            );
            match policy.decision {
                keel_types::PolicyDecision::Allow => {}
                keel_types::PolicyDecision::Ask => task.decision = TaskDecision::NeedsApproval,
                keel_types::PolicyDecision::Deny => {
                    task.decision = TaskDecision::Deny;
                    task.issues.push(keel_types::Issue {
                        path: String::new(),
                        expected: "a call the workspace's policies allow".into(),
                        found: policy.source.clone(),
                        message: policy
                            .reason
                            .clone()
                            .unwrap_or_else(|| format!("denied by {}", policy.source)),
                    });
                }
            }
        }
        Ok(())
    }

    async fn existing_task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        self.store()
            .get_task(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no task `{id}`")))
    }
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merge_patch;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
        let mut doc = json!({"a": [1]});
        merge_patch(&mut doc, &json!({"a": [2, 3], "n": 1}));
        assert_eq!(doc, json!({"a": [2, 3], "n": 1}));
    }
}
