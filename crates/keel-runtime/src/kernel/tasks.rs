//! Tool calls made directly by clients — operators, CI, external AIs — without a model
//! (`docs/tool-gateway.md#tasks-and-direct-calls`). A *task* stages a call: `create` runs the
//! whole guard — the gateway's checks (inventory, validation with repair, semantic checks),
//! policy and the `PreToolUse` hooks — and records the decision (`allow | deny |
//! needs_approval`) with its reasons and each hook's answer; `update` patches the arguments and
//! checks again; `run` executes it as a run of its own whose log holds the
//! `runtime.tool.direct.*` events, re-checking policy but running the `PreToolUse` hooks again
//! only when the task says `doubleCheckOnRun` (their answers at create stand otherwise);
//! `delete` forgets it. A direct call (`Tools::call`, `tools.rs`) is create + run in one: its
//! hooks run once, in the run.

use std::collections::BTreeMap;

use keel_tools::gateway::Guarded;
use keel_tools::hooks::HookInput;
use keel_types::{
    HookEvent, Issue, PermissionMode, PolicyDecision, RequestId, TaskDecision, TaskHook,
    TaskRecord, TaskStatus, ToolCall, ToolContext,
};
use serde_json::Value;

use crate::governance::{Governance, HookAnswer, HookCall, HookResult, HookRound, Refusal, Ruling};

use super::Kernel;
use crate::RuntimeError;
use crate::handle::RunHandle;

/// A call to stage as a task.
#[derive(Debug, Clone, Default)]
pub struct TaskRequest {
    /// The agent whose inventory and settings apply (default: the workspace's default agent).
    pub agent: Option<String>,
    pub tool: String,
    /// The arguments, as JSON text.
    pub arguments: String,
    /// Run the `PreToolUse` hooks again when the task runs (also when the Tool document says
    /// `doubleCheckOnRun: true`).
    pub double_check_on_run: bool,
    /// The permission mode to check the call under, at create and when it runs, as a run's
    /// request may set one (`plan` refuses a tool with side effects); default: the agent's.
    pub mode: Option<PermissionMode>,
}

/// Tasks: staged tool calls (`Runtime::tasks()` in the SDK). Cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    kernel: Kernel,
}

impl Kernel {
    /// The tasks of this runtime.
    pub fn tasks(&self) -> Tasks {
        Tasks {
            kernel: self.clone(),
        }
    }
}

impl Tasks {
    /// Stages a call: checks it (gateway, policy, `PreToolUse` hooks) and records the task with
    /// the decision.
    pub async fn create(&self, request: TaskRequest) -> Result<TaskRecord, RuntimeError> {
        let agent = self.kernel.agent_name(request.agent.as_deref())?;
        let task_id = keel_types::new_id("task");
        let now = keel_types::now_rfc3339();
        let mut task = TaskRecord {
            task_id,
            agent,
            requested_tool: request.tool.clone(),
            tool: request.tool,
            arguments: Value::Null,
            decision: TaskDecision::Deny,
            issues: Vec::new(),
            repairs: Vec::new(),
            reason: None,
            hooks: Vec::new(),
            hook_decision: None,
            double_check_on_run: request.double_check_on_run,
            mode: request.mode,
            status: TaskStatus::Created,
            request_id: None,
            output: None,
            created_at: now.clone(),
            updated_at: now,
        };
        self.check_task(&mut task, &request.arguments).await?;
        self.kernel.store().put_task(&task).await?;
        Ok(task)
    }

    /// One task.
    pub async fn get(&self, id: &str) -> Result<Option<TaskRecord>, RuntimeError> {
        Ok(self.kernel.store().get_task(id).await?)
    }

    /// Tasks, newest first.
    pub async fn list(&self, limit: Option<usize>) -> Result<Vec<TaskRecord>, RuntimeError> {
        Ok(self.kernel.store().list_tasks(limit).await?)
    }

    /// Merges `patch` into a created task's arguments (JSON merge patch: `null` removes a
    /// field) and checks the call again.
    pub async fn update(&self, id: &str, patch: &Value) -> Result<TaskRecord, RuntimeError> {
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
        self.kernel.store().put_task(&task).await?;
        Ok(task)
    }

    /// Runs a task the gateway allowed, as a run of its own.
    pub async fn run(&self, id: &str) -> Result<RunHandle, RuntimeError> {
        self.kernel.accepting()?;
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
        if crate::redacting_store::was_redacted(&task) {
            return Err(RuntimeError::InvalidInput(format!(
                "task `{id}` cannot run: redaction took secrets out of its stored arguments; \
                 call the tool directly instead"
            )));
        }
        task.status = TaskStatus::Running;
        task.updated_at = keel_types::now_rfc3339();
        self.kernel.store().put_task(&task).await?;
        let call = ToolCall {
            id: task_call_id(&task.task_id),
            name: task.tool.clone(),
            arguments: task.arguments.to_string(),
        };
        self.kernel
            .start_direct(&task.agent.clone(), call, Some(task))
            .await
    }

    /// Deletes a task; whether it existed.
    pub async fn delete(&self, id: &str) -> Result<bool, RuntimeError> {
        Ok(self.kernel.store().delete_task(id).await?)
    }

    /// The whole guard on a task's call — gateway, policy, `PreToolUse` hooks — with the
    /// outcome recorded on it, as [`Governance::rule`] rules (the task's permission mode
    /// applies; a task has no ancestors, so no narrowing layers).
    async fn check_task(&self, task: &mut TaskRecord, arguments: &str) -> Result<(), RuntimeError> {
        task.reason = None;
        task.hooks.clear();
        task.hook_decision = None;
        let verdict = self.guard_task(task, arguments).await?;
        self.adopt_verdict(task, &verdict, arguments);
        if task.decision == TaskDecision::Deny {
            return Ok(());
        }
        let policy = self.kernel.services().governance.decide_call(
            &self.kernel.gateway(),
            &task.agent,
            &task.tool,
            &task.arguments,
            task.mode,
            &[],
        );
        // What policy decided, in words, when it did not simply allow.
        let policy_says = (policy.decision != PolicyDecision::Allow).then(|| {
            policy
                .reason
                .clone()
                .unwrap_or_else(|| format!("{} by {}", policy.decision.as_str(), policy.source))
        });
        let mut ruling = Governance::rule(&policy, HookAnswer::NotAsked);
        if ruling == Ruling::AskHooks {
            let round = self.task_hooks(task).await;
            ruling = Governance::rule(&policy, HookAnswer::Round(&round));
            task.hook_decision = round.combined.decision;
        }
        let rewrite = match ruling {
            // The hooks were asked above, so this cannot be; were it, the task does not run.
            Ruling::AskHooks => {
                task.decision = TaskDecision::Deny;
                task.reason = Some("the call was not governed".to_owned());
                return Ok(());
            }
            Ruling::Refuse {
                refusal: Refusal::Policy { source },
                ..
            } => {
                let reason = policy_says.unwrap_or_default();
                task.decision = TaskDecision::Deny;
                task.issues.push(Issue {
                    path: String::new(),
                    expected: "a call the workspace's policies allow".into(),
                    found: source,
                    message: reason.clone(),
                });
                task.reason = Some(reason);
                return Ok(());
            }
            Ruling::Refuse { refusal, reason } => {
                task.decision = TaskDecision::Deny;
                task.hook_decision = None;
                task.reason = Some(reason.unwrap_or_else(|| refusal.what()));
                return Ok(());
            }
            // No run to stop: the task is refused.
            Ruling::Stop { reason } => {
                task.decision = TaskDecision::Deny;
                task.hook_decision = None;
                task.reason = Some(reason);
                return Ok(());
            }
            Ruling::Ask {
                reason, rewrite, ..
            } => {
                task.decision = TaskDecision::NeedsApproval;
                task.reason = reason.or(policy_says);
                rewrite
            }
            Ruling::Proceed { rewrite } => {
                task.decision = TaskDecision::Allow;
                task.reason = None;
                rewrite
            }
        };
        match rewrite {
            Some(updated) => self.guard_rewrite(task, updated).await,
            None => Ok(()),
        }
    }

    /// A hook's rewrite passes the gateway again: it becomes the task's arguments, and the
    /// gateway's refusal refuses the task; otherwise the ruling's decision stands.
    async fn guard_rewrite(
        &self,
        task: &mut TaskRecord,
        updated: serde_json::Map<String, Value>,
    ) -> Result<(), RuntimeError> {
        let mut rewritten = task.arguments.clone();
        if let Value::Object(map) = &mut rewritten {
            map.extend(updated);
        }
        let decided = task.decision;
        task.tool = task.requested_tool.clone();
        let rewritten = rewritten.to_string();
        let verdict = self.guard_task(task, &rewritten).await?;
        self.adopt_verdict(task, &verdict, &rewritten);
        if task.decision == TaskDecision::Allow {
            task.decision = decided;
        }
        Ok(())
    }

    /// The gateway's verdict on a task's call.
    async fn guard_task(
        &self,
        task: &TaskRecord,
        arguments: &str,
    ) -> Result<Guarded, RuntimeError> {
        let spec = self.kernel.agent(&task.agent)?;
        self.kernel.gateway().settle(&spec.tools).await;
        let ctx = ToolContext {
            workspace_root: self.kernel.workspace().root.clone(),
            request_id: RequestId::from(task.task_id.as_str()),
            session_id: None,
            agent: task.agent.clone(),
            max_output_bytes: usize::try_from(
                self.kernel.workspace().runtime.limits.max_tool_output_bytes,
            )
            .unwrap_or(usize::MAX),
            // An operator's call: no read-before-edit check.
            seen_files: None,
            progress: None,
            metadata: Default::default(),
            call_id: None,
            call_seq: None,
            traceparent: None,
            files: None,
        };
        let call = ToolCall {
            id: task.task_id.clone(),
            name: task.requested_tool.clone(),
            arguments: arguments.to_owned(),
        };
        let workspace = self.kernel.workspace().clone();
        let agent = task.agent.clone();
        let mode_of = move |tool: &str| workspace.gateway_mode(&agent, tool);
        Ok(self
            .kernel
            .gateway()
            .guard(&ctx, &spec.tools, &call, &mode_of)
            .await)
    }

    /// Records the gateway's verdict on the task: its decision, tool, arguments, issues and
    /// repairs, and whether the tool asks for its hooks at run.
    fn adopt_verdict(&self, task: &mut TaskRecord, verdict: &Guarded, arguments: &str) {
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
        if self
            .kernel
            .workspace()
            .tools
            .get(&task.tool)
            .is_some_and(|tool| tool.double_check_on_run)
        {
            task.double_check_on_run = true;
        }
    }

    /// The `PreToolUse` hooks on a task's call, each one's answer kept on the task.
    async fn task_hooks(&self, task: &mut TaskRecord) -> HookRound {
        let mut input = HookInput::new(HookEvent::PreToolUse, &self.kernel.workspace().root);
        input.session_id = Some(task.task_id.clone());
        input.permission_mode = Some(
            self.kernel
                .services()
                .governance
                .policy()
                .mode(&task.agent, task.mode)
                .as_str()
                .to_owned(),
        );
        input.tool_name = Some(task.tool.clone());
        input.tool_input = Some(task.arguments.clone());
        input.tool_use_id = Some(task_call_id(&task.task_id));
        input.agent = Some(task.agent.clone());
        let env = BTreeMap::from([("KEEL_TASK_ID".to_owned(), task.task_id.clone())]);
        let (round, calls) = self
            .kernel
            .services()
            .governance
            .hook_round(
                HookEvent::PreToolUse,
                Some(&task.tool),
                &input,
                &self.kernel.workspace().root,
                &env,
            )
            .await;
        task.hooks = calls.into_iter().map(task_hook).collect();
        round
    }

    async fn existing_task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        self.kernel
            .store()
            .get_task(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no task `{id}`")))
    }
}

/// The id of a task's call: what its hooks see as `tool_use_id` at create and at run.
fn task_call_id(task_id: &str) -> String {
    format!("call_{task_id}")
}

/// One hook's answer at a task's create, as kept on the task.
fn task_hook(call: HookCall) -> TaskHook {
    match call.result {
        HookResult::Answered(outcome) => TaskHook {
            hook: call.hook,
            outcome: HookResult::describe(&outcome),
            reason: HookResult::reason(&outcome),
            error: None,
        },
        HookResult::Failed { error, on_error } => TaskHook {
            hook: call.hook,
            outcome: "failed".to_owned(),
            reason: None,
            error: Some(format!("{error} (onError: {on_error})")),
        },
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
