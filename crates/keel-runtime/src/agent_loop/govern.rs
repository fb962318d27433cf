//! The governance steps of a run: hook rounds and human approvals.
//!
//! A *hook round* runs the hooks of one event ([`Governance`](crate::Governance) decides which
//! hooks, in what order, settles failures by the hook's `onError` and combines the answers);
//! the run fills in its part of the input (`session_id`, `permission_mode`, `transcript_path`
//! when the store keeps the run's log in a file, `request_id`, `agent`) and records each call as `runtime.hook.completed` (with the tool call and the
//! hook's reason) or `runtime.hook.failed`.
//! An *approval* is persisted before the run waits on it, so any process can decide it; a
//! resumed run waits again on the approval its dead process asked for, or takes the decision a
//! person made while no process waited on it (`approval_wait::earlier`); nobody deciding within
//! `limits.approvalTimeout` denies the call.
//!
//! Where these steps sit in a tool call's path is in `tools.rs`; the prompt and end-of-run
//! hooks are in `mod.rs`.

use std::collections::BTreeMap;

use keel_tools::hooks::{self, HookInput};
use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, EventPayload, HookEvent, RunStatus, StoreError,
};
use serde_json::Value;

use super::AgentRun;
use crate::approval_wait::Earlier;
use crate::governance::{HookCall, HookResult, HookRound};

/// What a human decided about a call.
pub(super) struct Decision {
    pub approved: bool,
    pub reason: Option<String>,
}

impl AgentRun {
    /// Runs the hooks of `event` (for `tool`, if a tool event) in order, records each as
    /// `runtime.hook.completed` or `runtime.hook.failed`, and combines their answers. Builds
    /// nothing when no hook runs.
    pub(super) async fn run_hooks(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        input: impl FnOnce() -> HookInput,
    ) -> Result<HookRound, StoreError> {
        let governance = &self.services.governance;
        if !governance.wants(event, tool) {
            return Ok(HookRound {
                combined: hooks::combine(Vec::new()),
                denied: None,
                fail: None,
            });
        }
        let mut input = input();
        let request_id = self.record.request_id.to_string();
        input.session_id = Some(
            self.record
                .session_id
                .as_ref()
                .map_or_else(|| request_id.clone(), |s| s.to_string()),
        );
        input.permission_mode = Some(
            governance
                .policy()
                .mode(&self.record.agent, self.mode)
                .as_str()
                .to_owned(),
        );
        input.transcript_path = self
            .services
            .store
            .log_path(&self.record.request_id)
            .map(|path| path.to_string_lossy().into_owned());
        input.request_id = Some(request_id.clone());
        input.agent = Some(self.record.agent.clone());
        // A tool event's hook runs under the call's span, any other under the run's.
        input.traceparent = Some(match &input.tool_use_id {
            Some(call_id) => self.propagation.of_call(call_id),
            None => self.propagation.attempt(),
        });
        let env = BTreeMap::from([("KEEL_REQUEST_ID".to_owned(), request_id)]);
        let root = &self.services.workspace.root;
        let (round, calls) = Box::pin(governance.hook_round(event, tool, &input, root, &env)).await;
        for call in calls {
            self.record_hook(event, input.tool_use_id.as_deref(), call)?;
        }
        Ok(round)
    }

    /// Records one hook's call of a round.
    fn record_hook(
        &self,
        event: HookEvent,
        call_id: Option<&str>,
        call: HookCall,
    ) -> Result<u64, StoreError> {
        let HookCall {
            hook,
            duration_ms,
            result,
            sandbox,
        } = call;
        self.emitter.emit(match result {
            HookResult::Answered(outcome) => EventPayload::HookCompleted {
                hook,
                event,
                call_id: call_id.map(str::to_owned),
                outcome: HookResult::describe(&outcome),
                reason: HookResult::reason(&outcome),
                duration_ms,
                sandbox: sandbox.map(Box::new),
            },
            HookResult::Failed { error, on_error } => EventPayload::HookFailed {
                hook,
                event,
                call_id: call_id.map(str::to_owned),
                error: error.to_string(),
                on_error,
                duration_ms,
                sandbox: sandbox.map(Box::new),
            },
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
        // A resumed run goes back to waiting on the approval its earlier process had asked
        // for, or takes the decision made while no process waited on it.
        let earlier = match self.asked_before {
            true => {
                crate::approval_wait::earlier(
                    self.services.store.as_ref(),
                    &self.record.request_id,
                    call_id,
                )
                .await?
            }
            false => Earlier::Nothing,
        };
        let approval = match earlier {
            Earlier::Decided(decided) => {
                self.emitter
                    .emit(crate::approval_wait::resolved(&decided))?;
                return Ok(Decision {
                    approved: decided.status == ApprovalStatus::Approved,
                    reason: decided.decision_reason,
                });
            }
            Earlier::Pending(pending) => {
                self.asked = true;
                // The run is `waiting_approval` again while it waits.
                self.set_status(RunStatus::WaitingApproval).await?;
                pending
            }
            Earlier::Nothing => {
                let approval = ApprovalRecord::pending(
                    &self.record,
                    call_id,
                    tool.to_owned(),
                    arguments.clone(),
                    asked_by,
                    ask_reason,
                );
                self.asked = true;
                // The run is `waiting_approval` before anyone can see the approval.
                self.set_status(RunStatus::WaitingApproval).await?;
                self.services.store.create_approval(&approval).await?;
                approval
            }
        };
        self.wait_for_decision(approval).await
    }

    /// Records the request and polls until a decision or the timeout (the run is already
    /// marked waiting).
    async fn wait_for_decision(
        &mut self,
        approval: ApprovalRecord,
    ) -> Result<Decision, StoreError> {
        let store = self.services.store.clone();
        self.emitter
            .emit_durable(EventPayload::ApprovalRequested {
                approval: Box::new(approval.clone()),
            })
            .await?;
        let timeout = self.services.workspace.runtime.limits.approval_timeout.0;
        let decided = crate::approval_wait::decision(
            store.as_ref(),
            &self.services.decisions,
            &approval.approval_id,
            timeout,
        )
        .await?;
        self.emitter
            .emit(crate::approval_wait::resolved(&decided))?;
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
        // An embedded call's run (a workflow's) keeps its own status.
        if self.embedded {
            return Ok(());
        }
        self.record.status = status;
        self.record.event_count = self.emitter.count();
        self.services.store.update_run(&self.record).await
    }
}
