//! The governance steps of a run: hook rounds and human approvals.
//!
//! A *hook round* runs the hooks of one event (see [`Governance`](crate::Governance) for which
//! hooks and in what order), records each as `runtime.hook.completed` or
//! `runtime.hook.failed`, settles failures by the hook's `onError`, and combines the answers.
//! An *approval* is persisted before the run waits on it, so any process can decide it; a
//! resumed run waits again on the approval its dead process asked for; nobody deciding within
//! `limits.approvalTimeout` denies the call.
//!
//! Where these steps sit in a tool call's path is in `tools.rs`; the prompt and end-of-run
//! hooks are in `mod.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use keel_tools::hooks::{self, Combined, HookInput, HookOutcome, Settled};
use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, EventPayload, HookEvent, RunStatus, StoreError,
};
use serde_json::Value;

use super::{AgentRun, millis};

/// How often the store is asked for an approval's decision.
const APPROVAL_POLL: Duration = Duration::from_millis(200);

/// The combined answer of an event's hooks.
pub(super) struct HookRound {
    pub combined: Combined,
    /// A hook failed with `onError: deny`.
    pub denied: Option<String>,
    /// A hook failed with `onError: fail-run`.
    pub fail: Option<String>,
}

impl HookRound {
    /// Why the round ends the run or blocks what it was asked about, if it does: a failure
    /// with `onError: fail-run`, a stop, or a block.
    pub fn stops(self) -> Option<String> {
        self.fail.or(self.combined.stop).or(self.combined.block)
    }
}

/// What a human decided about a call.
pub(super) struct Decision {
    pub approved: bool,
    pub reason: Option<String>,
}

impl AgentRun {
    /// Runs the hooks of `event` (for `tool`, if a tool event) in order, records each, and
    /// combines their answers. Builds nothing when no hook runs.
    pub(super) async fn run_hooks(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        input: impl FnOnce() -> HookInput,
    ) -> Result<HookRound, StoreError> {
        let governance = &self.services.governance;
        let mut round = HookRound {
            combined: hooks::combine(Vec::new()),
            denied: None,
            fail: None,
        };
        if !governance.wants(event, tool) {
            return Ok(round);
        }
        let mut input = input();
        input.session_id = self.record.session_id.as_ref().map(|s| s.to_string());
        input.request_id = Some(self.record.request_id.to_string());
        input.agent = Some(self.record.agent.clone());
        let env = BTreeMap::from([(
            "KEEL_REQUEST_ID".to_owned(),
            self.record.request_id.to_string(),
        )]);
        let root = &self.services.workspace.root;
        let mut outcomes = Vec::new();
        for (hook, on_error) in governance.declared(event, tool) {
            let started = Instant::now();
            let result = hook.run(&input, root, &env).await;
            let duration_ms = millis(started.elapsed());
            let (error, settled_as) = match hooks::settle(result, *on_error) {
                Settled::Outcome(outcome) => {
                    self.hook_completed(hook.name(), event, &outcome, duration_ms)?;
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
            self.hook_failed(
                hook.name(),
                event,
                error.to_string(),
                settled_as,
                duration_ms,
            )?;
        }
        for hook in governance.in_process(event, tool) {
            let started = Instant::now();
            let result = hook.call(&input).await;
            let duration_ms = millis(started.elapsed());
            match result {
                Ok(outcome) => {
                    self.hook_completed(hook.name(), event, &outcome, duration_ms)?;
                    outcomes.push(outcome);
                }
                Err(error) => {
                    self.hook_failed(hook.name(), event, error.to_string(), "warn", duration_ms)?;
                }
            }
        }
        round.combined = hooks::combine(outcomes).for_event(event);
        Ok(round)
    }

    fn hook_completed(
        &self,
        hook: &str,
        event: HookEvent,
        outcome: &HookOutcome,
        duration_ms: u64,
    ) -> Result<u64, StoreError> {
        self.emitter.emit(EventPayload::HookCompleted {
            hook: hook.to_owned(),
            event: event.as_str().to_owned(),
            outcome: describe(outcome),
            duration_ms,
        })
    }

    fn hook_failed(
        &self,
        hook: &str,
        event: HookEvent,
        error: String,
        on_error: &str,
        duration_ms: u64,
    ) -> Result<u64, StoreError> {
        self.emitter.emit(EventPayload::HookFailed {
            hook: hook.to_owned(),
            event: event.as_str().to_owned(),
            error,
            on_error: on_error.to_owned(),
            duration_ms,
        })
    }

    /// Asks a human about a call and waits for the decision (or the timeout, which denies).
    /// An approval for the rest of the session that covers the tool answers at once.
    pub(super) async fn ask_human(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &Value,
        asked_by: &str,
        ask_reason: Option<String>,
    ) -> Result<Decision, StoreError> {
        if self.session_allows(tool).await? {
            return Ok(Decision {
                approved: true,
                reason: None,
            });
        }
        // A resumed run goes back to waiting on the approval its dead process had asked for.
        let existing = self
            .services
            .store
            .list_approvals(Some(ApprovalStatus::Pending))
            .await?
            .into_iter()
            .find(|a| {
                a.request_id == self.record.request_id && a.call_id.as_deref() == Some(call_id)
            });
        let approval = match existing {
            Some(existing) => existing,
            None => {
                let approval = self.new_approval(call_id, tool, arguments, asked_by, ask_reason);
                self.services.store.create_approval(&approval).await?;
                approval
            }
        };
        self.wait_for_decision(approval).await
    }

    fn new_approval(
        &self,
        call_id: &str,
        tool: &str,
        arguments: &Value,
        asked_by: &str,
        ask_reason: Option<String>,
    ) -> ApprovalRecord {
        ApprovalRecord {
            approval_id: keel_types::new_id("apr"),
            request_id: self.record.request_id.clone(),
            session_id: self.record.session_id.clone(),
            agent: self.record.agent.clone(),
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
        }
    }

    /// Marks the run waiting, records the request, and polls until a decision or the timeout.
    async fn wait_for_decision(
        &mut self,
        approval: ApprovalRecord,
    ) -> Result<Decision, StoreError> {
        let store = self.services.store.clone();
        self.set_status(RunStatus::WaitingApproval).await?;
        self.emitter
            .emit_durable(EventPayload::ApprovalRequested {
                approval: approval.clone(),
            })
            .await?;
        let timeout = self.services.workspace.runtime.limits.approval_timeout.0;
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
        self.emitter.emit(EventPayload::ApprovalResolved {
            approval_id: decided.approval_id.clone(),
            status: decided.status,
            decided_by: decided.decided_by.clone(),
            reason: decided.decision_reason.clone(),
        })?;
        self.set_status(RunStatus::Running).await?;
        Ok(Decision {
            approved: decided.status == ApprovalStatus::Approved,
            reason: decided.decision_reason,
        })
    }

    /// Whether an approval for the rest of this run's session covers `tool`.
    async fn session_allows(&self, tool: &str) -> Result<bool, StoreError> {
        let Some(session) = &self.record.session_id else {
            return Ok(false);
        };
        let approved = self
            .services
            .store
            .list_approvals(Some(ApprovalStatus::Approved))
            .await?;
        Ok(approved.iter().any(|a| {
            a.scope == ApprovalScope::Session
                && a.tool == tool
                && a.session_id.as_ref() == Some(session)
        }))
    }

    /// Records a status change of the run (waiting for approval and back) in the store.
    async fn set_status(&mut self, status: RunStatus) -> Result<(), StoreError> {
        self.record.status = status;
        self.record.event_count = self.emitter.count();
        self.services.store.update_run(&self.record).await
    }
}

/// A short description of a hook's answer for the event log.
fn describe(outcome: &HookOutcome) -> String {
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
