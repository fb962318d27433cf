//! Waiting for a person's decision, durably: the approval is a stored record, so a run that
//! waits for it (a tool call's, a workflow's approval node or gate) finds it again after a
//! restart and goes on waiting. Shared by the agent loop and workflow runs.

use std::time::Duration;

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus, RequestId, RunStore, StoreError};

/// How often a waiting run looks at the store for the decision when nothing wakes it (a
/// decision made by another process on a store without signals).
const APPROVAL_POLL: Duration = Duration::from_millis(200);

/// What an earlier process of a run had asked a person about one call.
pub(crate) enum Earlier {
    /// Nothing: the call asks now.
    Nothing,
    /// An approval nobody has decided yet: the run waits on it again.
    Pending(ApprovalRecord),
    /// An approval decided (or expired) while no process waited on it: the decision counts.
    Decided(ApprovalRecord),
}

/// The one lookup of a resumed run (an agent loop's tool call, a workflow's approval node or
/// gate) for the approval its earlier process asked for call `call_id`, whatever its status
/// (the newest when there are several): a pending one is waited on again, a decision made
/// while the run had no process is taken as it stands.
pub(crate) async fn earlier(
    store: &dyn RunStore,
    request_id: &RequestId,
    call_id: &str,
) -> Result<Earlier, StoreError> {
    let found = store
        .list_approvals(None)
        .await?
        .into_iter()
        .find(|a| &a.request_id == request_id && a.call_id.as_deref() == Some(call_id));
    Ok(match found {
        None => Earlier::Nothing,
        Some(approval) if approval.status == ApprovalStatus::Pending => Earlier::Pending(approval),
        Some(approval) => Earlier::Decided(approval),
    })
}

/// Waits until approval `id` is decided; after `timeout` it expires (unless someone decided
/// at the last moment). Returns the decided record.
pub(crate) async fn decision(
    store: &dyn RunStore,
    decided: &tokio::sync::Notify,
    id: &str,
    timeout: Duration,
) -> Result<ApprovalRecord, StoreError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Registered before the look, so a decision signalled in between is not missed.
        let woken = decided.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Some(current) = store.get_approval(id).await?
            && current.status != ApprovalStatus::Pending
        {
            return Ok(current);
        }
        if tokio::time::Instant::now() >= deadline {
            let reason = format!(
                "nobody decided within {}",
                humantime::format_duration(timeout)
            );
            if let Ok(expired) = store
                .decide_approval(
                    id,
                    ApprovalStatus::Expired,
                    ApprovalScope::Once,
                    "timeout",
                    Some(&reason),
                )
                .await
            {
                return Ok(expired);
            }
            // Someone decided at the last moment: the next look reads it.
            continue;
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(APPROVAL_POLL) => {}
        }
    }
}

/// `runtime.approval.resolved` for a decided approval.
pub(crate) fn resolved(decided: &ApprovalRecord) -> keel_types::EventPayload {
    keel_types::EventPayload::ApprovalResolved {
        approval_id: decided.approval_id.clone(),
        status: decided.status,
        decided_by: decided.decided_by.clone(),
        reason: decided.decision_reason.clone(),
    }
}

/// Closes the approvals run `request_id` waited on and left pending when it ended for good
/// as `status` (cancelled, or failed while it waited, e.g. on its time budget; nothing for an
/// interrupted run, which waits again when resumed): nobody can approve a call of a run that
/// is over. Each becomes `expired`, decided by `runtime`. A decision made at the same moment
/// stands (deciding is exactly once); a store error is logged, not returned.
pub(crate) async fn close_pending(
    store: &dyn RunStore,
    request_id: &RequestId,
    status: keel_types::RunStatus,
) {
    if !status.is_terminal() || status == keel_types::RunStatus::Interrupted {
        return;
    }
    let reason = format!("the run ended ({status}) before anyone decided");
    let reason = reason.as_str();
    let pending = match store.list_approvals(Some(ApprovalStatus::Pending)).await {
        Ok(pending) => pending,
        // A store that keeps no approvals has none to close.
        Err(keel_types::StoreError::Unsupported(_)) => return,
        Err(store_error) => {
            tracing::warn!(%request_id, %store_error, "Cannot list the approvals of an ended run.");
            return;
        }
    };
    // A memory write sent for approval does not hold the run up: it outlives the run.
    let waits = pending
        .iter()
        .filter(|a| &a.request_id == request_id && a.memory.is_none());
    for approval in waits {
        if let Err(store_error) = store
            .decide_approval(
                &approval.approval_id,
                ApprovalStatus::Expired,
                ApprovalScope::Once,
                "runtime",
                Some(reason),
            )
            .await
        {
            tracing::warn!(approval_id = %approval.approval_id, %store_error, "Cannot close the approval of an ended run.");
        }
    }
}
