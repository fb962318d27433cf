//! Waiting for a person's decision, durably: the approval is a stored record, so a run that
//! waits for it (a tool call's, a workflow's approval node or gate) finds it again after a
//! restart and goes on waiting. Shared by the agent loop and workflow runs.

use std::time::Duration;

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus, RequestId, RunStore, StoreError};

/// How often a waiting run looks at the store for the decision when nothing wakes it (a
/// decision made by another process on a store without signals).
const APPROVAL_POLL: Duration = Duration::from_millis(200);

/// The pending approval run `request_id` asked for call `call_id`, when its earlier process
/// had asked already.
pub(crate) async fn pending(
    store: &dyn RunStore,
    request_id: &RequestId,
    call_id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    Ok(store
        .list_approvals(Some(ApprovalStatus::Pending))
        .await?
        .into_iter()
        .find(|a| &a.request_id == request_id && a.call_id.as_deref() == Some(call_id)))
}

/// The approval run `request_id` asked for call `call_id`, whatever its status (newest
/// first): a decision made while the run's process was down still counts.
pub(crate) async fn asked(
    store: &dyn RunStore,
    request_id: &RequestId,
    call_id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    Ok(store
        .list_approvals(None)
        .await?
        .into_iter()
        .find(|a| &a.request_id == request_id && a.call_id.as_deref() == Some(call_id)))
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
