//! Governance in the run loop (SPEC §5 steps 4–6, §6): after the gateway accepted a call,
//! policy decides (allow | ask | deny), `PreToolUse` hooks may allow, deny, ask or rewrite the
//! input (re-checked by the gateway), and an `ask` waits for a human — a persisted approval
//! decided from any process, or denied at the timeout. `PostToolUse` hooks run after a call
//! (their AI-facing answers are ignored); `PromptSubmit` hooks may add context or block the
//! prompt; `RunStart`, `RunEnd` and `SessionStop` hooks run at those points. Every hook call is
//! recorded as `runtime.hook.completed` or `runtime.hook.failed`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::gateway::Guarded;
use keel_tools::hooks::{
    self, Combined, CompiledHook, HookInput, InProcessHook, PermissionDecision, Settled,
};
use keel_tools::policy::{PolicyEngine, PolicyQuery};
use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, EventPayload, GuardDecision, RunStatus,
    StoreError, ToolCall,
};
use keel_workspace::{HookEvent, HookOnError, PolicyDecision, Workspace};
use serde_json::Value;

use crate::agent_loop::AgentRun;

/// How often the store is asked for an approval's decision.
const APPROVAL_POLL: Duration = Duration::from_millis(200);

/// Policies and hooks of a workspace, compiled once per runtime.
pub struct Governance {
    policy: PolicyEngine,
    /// Hooks that apply by event and matcher, in declaration order.
    session_hooks: Vec<(CompiledHook, HookOnError)>,
    /// Hooks bound on tools by name (`hooks.preCall` / `hooks.postCall`).
    bound_hooks: BTreeMap<String, (CompiledHook, HookOnError)>,
    /// Hooks written in Rust and given to the SDK; they run after the declared ones.
    in_process: Vec<Arc<dyn InProcessHook>>,
}

impl std::fmt::Debug for Governance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governance")
            .field("session_hooks", &self.session_hooks.len())
            .field("bound_hooks", &self.bound_hooks.len())
            .finish()
    }
}

impl Governance {
    /// Compiles the workspace's policies and hooks. Hooks bound on a tool run only for that
    /// tool; the others run for every matching call.
    pub fn from_workspace(workspace: &Workspace) -> Self {
        Self::new(workspace, Vec::new())
    }

    /// Compiles the workspace's policies and hooks, plus hooks written in Rust (they run
    /// after the declared hooks of the same event; a failing one is recorded as a warning).
    pub fn new(workspace: &Workspace, in_process: Vec<Arc<dyn InProcessHook>>) -> Self {
        let bound: HashSet<&String> = workspace
            .tools
            .values()
            .flat_map(|t| t.hooks.pre_call.iter().chain(&t.hooks.post_call))
            .collect();
        let mut session_hooks = Vec::new();
        let mut bound_hooks = BTreeMap::new();
        for (name, spec) in &workspace.hooks {
            let compiled = match CompiledHook::new(name, spec) {
                Ok(compiled) => compiled,
                Err(error) => {
                    tracing::warn!(hook = %name, %error, "Hook skipped: it does not compile.");
                    continue;
                }
            };
            match bound.contains(name) {
                true => {
                    bound_hooks.insert(name.clone(), (compiled, spec.on_error));
                }
                false => session_hooks.push((compiled, spec.on_error)),
            }
        }
        Self {
            policy: PolicyEngine::from_workspace(workspace),
            session_hooks,
            bound_hooks,
            in_process,
        }
    }
}

impl Governance {
    /// The policy engine.
    pub fn policy(&self) -> &PolicyEngine {
        &self.policy
    }

    /// Whether any hook runs for `event` (on `tool`, with the tool's `bound` hooks), so the
    /// loop builds no hook input when none does.
    fn wants(&self, event: HookEvent, tool: Option<&str>, bound: &[String]) -> bool {
        !bound.is_empty()
            || self
                .session_hooks
                .iter()
                .any(|(hook, _)| hook.event() == event && hook.matches(tool))
            || self
                .in_process
                .iter()
                .any(|hook| hook.event() == event && hook.matches(tool))
    }
}

/// What the governance step says about one call.
pub(crate) enum Gate {
    /// Run it (with these arguments).
    Run,
    /// Do not run it; the model receives this message.
    Refuse(String),
    /// End the run (a hook said stop, or failed with `onError: fail-run`).
    Stop(String),
}

/// The combined answer of an event's hooks.
pub(crate) struct HookRound {
    pub combined: Combined,
    /// A hook failed with `onError: deny`.
    pub denied: Option<String>,
    /// A hook failed with `onError: fail-run`.
    pub fail: Option<String>,
}

impl AgentRun {
    /// Runs the hooks of `event` (for `tool`, if a tool event) in declaration order, records
    /// each, and combines their answers.
    pub(crate) async fn run_hooks(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        bound: &[String],
        mut input: HookInput,
    ) -> Result<HookRound, StoreError> {
        let governance = self.governance();
        let mut round = HookRound {
            combined: hooks::combine(Vec::new()),
            denied: None,
            fail: None,
        };
        if !governance.wants(event, tool, bound) {
            return Ok(round);
        }
        input.session_id = self.record_ref().session_id.as_ref().map(|s| s.to_string());
        input.request_id = Some(self.record_ref().request_id.to_string());
        input.agent = Some(self.record_ref().agent.clone());
        let selected: Vec<&(CompiledHook, HookOnError)> = governance
            .session_hooks
            .iter()
            .filter(|(hook, _)| hook.event() == event && hook.matches(tool))
            .chain(
                bound
                    .iter()
                    .filter_map(|name| governance.bound_hooks.get(name)),
            )
            .collect();
        let mut outcomes = Vec::new();
        let env = BTreeMap::from([(
            "KEEL_REQUEST_ID".to_owned(),
            self.record_ref().request_id.to_string(),
        )]);
        for (hook, on_error) in selected {
            let started = Instant::now();
            let result = hook.run(&input, self.workspace_root(), &env).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let event_name = hooks::event_name(event).to_owned();
            let (error, settled_as) = match hooks::settle(result, *on_error) {
                Settled::Outcome(outcome) => {
                    self.emitter().emit(EventPayload::HookCompleted {
                        hook: hook.name().to_owned(),
                        event: event_name,
                        outcome: describe(&outcome),
                        duration_ms,
                    })?;
                    outcomes.push(outcome);
                    continue;
                }
                Settled::Skip(error) => (error, "skip"),
                Settled::Warn(error) => (error, "warn"),
                Settled::Deny(error) => {
                    round
                        .denied
                        .get_or_insert(format!("hook {} failed: {error}", hook.name()));
                    (error, "deny")
                }
                Settled::FailRun(error) => {
                    round
                        .fail
                        .get_or_insert(format!("hook {} failed: {error}", hook.name()));
                    (error, "fail-run")
                }
            };
            self.emitter().emit(EventPayload::HookFailed {
                hook: hook.name().to_owned(),
                event: event_name,
                error: error.to_string(),
                on_error: settled_as.to_owned(),
                duration_ms,
            })?;
        }
        for hook in governance
            .in_process
            .iter()
            .filter(|h| h.event() == event && h.matches(tool))
        {
            let started = Instant::now();
            let result = hook.call(&input).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            match result {
                Ok(outcome) => {
                    self.emitter().emit(EventPayload::HookCompleted {
                        hook: hook.name().to_owned(),
                        event: hooks::event_name(event).to_owned(),
                        outcome: describe(&outcome),
                        duration_ms,
                    })?;
                    outcomes.push(outcome);
                }
                Err(error) => {
                    self.emitter().emit(EventPayload::HookFailed {
                        hook: hook.name().to_owned(),
                        event: hooks::event_name(event).to_owned(),
                        error: error.to_string(),
                        on_error: "warn".to_owned(),
                        duration_ms,
                    })?;
                }
            }
        }
        round.combined = hooks::combine(outcomes).for_event(event);
        Ok(round)
    }

    /// Policy, `PreToolUse` hooks and approval for one accepted call. May rewrite the
    /// verdict's arguments (re-checked by the gateway).
    pub(crate) async fn govern(&mut self, verdict: &mut Guarded) -> Result<Gate, StoreError> {
        let Some(arguments) = verdict.arguments.clone() else {
            return Ok(Gate::Run);
        };
        let tool = verdict.tool.clone();
        let policy = self.governance().policy.decide(
            &PolicyQuery {
                agent: &self.record_ref().agent,
                tool: &tool,
                args: &arguments,
                read_only: self.gateway_ref().is_read_only(&tool),
                mode: self.mode(),
            },
            &[],
        );
        let mut ask: Option<(String, Option<String>)> = None;
        match policy.decision {
            PolicyDecision::Allow => {}
            decision => {
                self.emitter().emit(EventPayload::PolicyDecided {
                    call_id: verdict.call_id.clone(),
                    tool: tool.clone(),
                    decision,
                    source: policy.source.clone(),
                    reason: policy.reason.clone(),
                })?;
                if decision == PolicyDecision::Deny {
                    return Ok(Gate::Refuse(refusal(
                        &format!("denied by policy ({})", policy.source),
                        policy.reason.as_deref(),
                    )));
                }
                ask = Some((policy.source.clone(), policy.reason.clone()));
            }
        }

        let mut input = HookInput::new(HookEvent::PreToolUse, self.workspace_root());
        input.tool_name = Some(tool.clone());
        input.tool_input = Some(arguments.clone());
        input.tool_use_id = Some(verdict.call_id.clone());
        let bound = self.pre_call_hooks(&tool);
        let round = self
            .run_hooks(HookEvent::PreToolUse, Some(&tool), &bound, input)
            .await?;
        if let Some(reason) = round.fail {
            return Ok(Gate::Stop(reason));
        }
        if let Some(reason) = round.denied {
            return Ok(Gate::Refuse(refusal(
                "denied because a hook failed",
                Some(&reason),
            )));
        }
        let combined = round.combined;
        if let Some(reason) = combined.stop {
            return Ok(Gate::Stop(reason));
        }
        if let Some(reason) = combined.block {
            return Ok(Gate::Refuse(refusal("blocked by a hook", Some(&reason))));
        }
        match combined.decision {
            Some(PermissionDecision::Deny) => {
                return Ok(Gate::Refuse(refusal(
                    "denied by a hook",
                    combined.decision_reason.as_deref(),
                )));
            }
            Some(PermissionDecision::Ask) => {
                ask = Some(("hook".to_owned(), combined.decision_reason.clone()));
            }
            // A hook's allow settles a policy `ask`, as in Claude Code.
            Some(PermissionDecision::Allow) => ask = None,
            None => {}
        }
        if let Some(updated) = combined.updated_input {
            let mut rewritten = arguments.clone();
            if let Value::Object(map) = &mut rewritten {
                map.extend(updated);
            }
            // A rewrite passes the gateway again.
            let call = ToolCall {
                id: verdict.call_id.clone(),
                name: tool.clone(),
                arguments: rewritten.to_string(),
            };
            let recheck = self.recheck(&call).await?;
            if recheck.decision == GuardDecision::Blocked {
                return Ok(Gate::Refuse(recheck.blocked_message()));
            }
            verdict.arguments = recheck.arguments;
        }
        if let Some((asked_by, reason)) = ask {
            let arguments = verdict.arguments.clone().unwrap_or(Value::Null);
            let (approved, why) = self
                .ask_human(&verdict.call_id, &tool, &arguments, &asked_by, reason)
                .await?;
            if !approved {
                return Ok(Gate::Refuse(refusal(
                    "denied by the human reviewer",
                    why.as_deref(),
                )));
            }
        }
        Ok(Gate::Run)
    }

    /// `PostToolUse` hooks after a call (non-blocking: their AI-facing answers are ignored).
    pub(crate) async fn post_tool_hooks(
        &self,
        call_id: &str,
        tool: &str,
        arguments: &Value,
        output: &str,
    ) -> Result<Option<String>, StoreError> {
        let bound = self.post_call_hooks(tool);
        if !self
            .governance()
            .wants(HookEvent::PostToolUse, Some(tool), &bound)
        {
            return Ok(None);
        }
        let mut input = HookInput::new(HookEvent::PostToolUse, self.workspace_root());
        input.tool_name = Some(tool.to_owned());
        input.tool_input = Some(arguments.clone());
        input.tool_use_id = Some(call_id.to_owned());
        input.tool_response =
            Some(serde_json::from_str(output).unwrap_or_else(|_| Value::String(output.to_owned())));
        let round = self
            .run_hooks(HookEvent::PostToolUse, Some(tool), &bound, input)
            .await?;
        Ok(round.fail.or(round.combined.stop))
    }

    /// Asks a human and waits for the decision (or the timeout, which denies).
    async fn ask_human(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &Value,
        asked_by: &str,
        ask_reason: Option<String>,
    ) -> Result<(bool, Option<String>), StoreError> {
        if self.session_allows(tool).await? {
            return Ok((true, None));
        }
        let record = self.record_ref().clone();
        let store = self.store_ref().clone();
        // A resumed run goes back to waiting on the approval its dead process had asked for.
        let existing = store
            .list_approvals(Some(ApprovalStatus::Pending))
            .await?
            .into_iter()
            .find(|a| a.request_id == record.request_id && a.call_id.as_deref() == Some(call_id));
        let approval = match existing {
            Some(existing) => existing,
            None => {
                self.new_approval(call_id, tool, arguments, asked_by, ask_reason)
                    .await?
            }
        };
        self.wait_for_decision(approval).await
    }

    async fn new_approval(
        &self,
        call_id: &str,
        tool: &str,
        arguments: &Value,
        asked_by: &str,
        ask_reason: Option<String>,
    ) -> Result<ApprovalRecord, StoreError> {
        let record = self.record_ref();
        let approval = ApprovalRecord {
            approval_id: keel_types::new_id("apr"),
            request_id: record.request_id.clone(),
            session_id: record.session_id.clone(),
            agent: record.agent.clone(),
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            call_id: Some(call_id.to_owned()),
            asked_by: asked_by.to_owned(),
            ask_reason,
            status: ApprovalStatus::Pending,
            scope: ApprovalScope::Once,
            decided_by: None,
            decided_at: None,
            decision_reason: None,
            created_at: keel_types::now_rfc3339(),
        };
        self.store_ref().create_approval(&approval).await?;
        Ok(approval)
    }

    /// Marks the run waiting, records the request, and polls until a decision or the timeout.
    async fn wait_for_decision(
        &mut self,
        approval: ApprovalRecord,
    ) -> Result<(bool, Option<String>), StoreError> {
        let store = self.store_ref().clone();
        self.set_status(RunStatus::WaitingApproval).await?;
        self.emitter()
            .emit_durable(EventPayload::ApprovalRequested {
                approval: approval.clone(),
            })
            .await?;
        let timeout = self.approval_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        let decided = loop {
            if let Some(current) = store.get_approval(&approval.approval_id).await?
                && current.status != ApprovalStatus::Pending
            {
                break current;
            }
            if tokio::time::Instant::now() >= deadline {
                let reason = format!(
                    "nobody decided within {}",
                    humantime::format_duration(timeout)
                );
                if let Ok(expired) = store
                    .decide_approval(
                        &approval.approval_id,
                        ApprovalStatus::Expired,
                        ApprovalScope::Once,
                        "timeout",
                        Some(&reason),
                    )
                    .await
                {
                    break expired;
                }
                // Someone decided at the last moment: the next look reads it.
                continue;
            }
            tokio::time::sleep(APPROVAL_POLL).await;
        };
        self.emitter().emit(EventPayload::ApprovalResolved {
            approval_id: decided.approval_id.clone(),
            status: decided.status,
            decided_by: decided.decided_by.clone(),
            reason: decided.decision_reason.clone(),
        })?;
        self.set_status(RunStatus::Running).await?;
        Ok((
            decided.status == ApprovalStatus::Approved,
            decided.decision_reason,
        ))
    }

    /// Whether an approval for the rest of this run's session covers `tool`.
    async fn session_allows(&self, tool: &str) -> Result<bool, StoreError> {
        let Some(session) = self.record_ref().session_id.clone() else {
            return Ok(false);
        };
        let approved = self
            .store_ref()
            .list_approvals(Some(ApprovalStatus::Approved))
            .await?;
        Ok(approved.iter().any(|a| {
            a.scope == ApprovalScope::Session
                && a.tool == tool
                && a.session_id.as_ref() == Some(&session)
        }))
    }
}

/// The tool result a refused call gives the model.
fn refusal(what: &str, reason: Option<&str>) -> String {
    serde_json::json!({
        "error": format!("tool call {what}"),
        "reason": reason,
    })
    .to_string()
}

/// A short description of a hook's answer for the event log.
fn describe(outcome: &hooks::HookOutcome) -> String {
    let mut parts = Vec::new();
    if let Some(decision) = &outcome.decision {
        parts.push(decision.as_str().to_owned());
    }
    if let Some(reason) = &outcome.block {
        parts.push(format!("block: {reason}"));
    }
    if let Some(reason) = &outcome.stop {
        parts.push(format!("stop: {reason}"));
    }
    if outcome.updated_input.is_some() {
        parts.push("input rewritten".into());
    }
    if outcome.additional_context.is_some() {
        parts.push("context added".into());
    }
    match parts.is_empty() {
        true => "no opinion".into(),
        false => parts.join(", "),
    }
}
