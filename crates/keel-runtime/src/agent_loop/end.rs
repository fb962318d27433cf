//! How a run's loop ended, and how a run whose writes failed with an unknown outcome is
//! settled: the connection to the store dropped mid-statement, so the write may or may not
//! have been stored. Such a run never reports an end its log does not hold: what was stored
//! is read back; a log that holds the run's end stands (its record was written in the same
//! statement), any other is recorded `interrupted` with the events actually stored, and the
//! run is resumed from its log (by this replica's next sweep on a shared store, or with
//! `keel runs resume`).

use std::time::Duration;

use keel_types::{
    ErrorCode, ErrorInfo, FinishReason, ModelError, RunRecord, RunStatus, RunStore, StoreError,
};

/// How the loop ended, before the terminal event is written.
pub(super) enum End {
    Answer {
        output: String,
        /// The structured output, when the agent declares `output.schema`.
        value: Option<serde_json::Value>,
        finish_reason: FinishReason,
    },
    Failed {
        error: ErrorInfo,
        finish_reason: FinishReason,
    },
    Cancelled,
    /// The runtime shut down; the run can be resumed.
    Interrupted,
    /// A write to the store failed other than by fencing: its outcome is unknown. The run
    /// stops and is recorded `interrupted`, to be resumed from what its log holds.
    Unsettled(String),
}

impl End {
    pub(super) fn failed(
        code: ErrorCode,
        message: impl Into<String>,
        finish_reason: FinishReason,
    ) -> Self {
        Self::Failed {
            error: ErrorInfo::new(code, message),
            finish_reason,
        }
    }

    /// A store error: a fenced write leaves the run to whoever holds it now (nothing more is
    /// written); any other leaves it unsettled.
    pub(super) fn store(error: StoreError) -> Self {
        match error {
            StoreError::Fenced(_) => {
                Self::failed(ErrorCode::Store, error.to_string(), FinishReason::Internal)
            }
            other => Self::Unsettled(other.to_string()),
        }
    }

    pub(super) fn model(error: &ModelError) -> Self {
        let reason = match error {
            // Still too long after a compaction (or with nothing left to compact).
            ModelError::ContextLength(_) => FinishReason::ContextOverflow,
            _ => FinishReason::ModelError,
        };
        Self::failed(error.code(), error.to_string(), reason)
    }
}

/// How long a run whose end could not be stored keeps trying to settle it (the store may be
/// restarting); after that its lease, unrenewed, lets another replica take it over.
const SETTLE_FOR: Duration = Duration::from_secs(300);

/// Settles `record` after its end could not be stored for certain: reads back the log; when
/// it holds a final event, `record` becomes the stored record; otherwise the record is stored
/// `interrupted` with the count of events stored. Retries while the store fails; returns
/// whether it settled (not when the run is another process's now, or the store stayed away).
pub(super) async fn settle(store: &dyn RunStore, record: &mut RunRecord, failure: &str) -> bool {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        match settle_once(store, record, failure).await {
            Ok(()) => return true,
            Err(StoreError::Fenced(_)) => return false,
            Err(store_error) if started.elapsed() >= SETTLE_FOR => {
                tracing::error!(request_id = %record.request_id, %store_error, "Gave up settling a run whose end was not stored.");
                return false;
            }
            Err(store_error) => {
                tracing::warn!(request_id = %record.request_id, %store_error, "Cannot settle a run whose end was not stored yet; trying again.");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

async fn settle_once(
    store: &dyn RunStore,
    record: &mut RunRecord,
    failure: &str,
) -> Result<(), StoreError> {
    let events = store.events(&record.request_id, 0).await?;
    if events.last().is_some_and(|e| e.payload.is_final())
        && let Some(stored) = store.get_run(&record.request_id).await?
    {
        *record = stored;
        return Ok(());
    }
    let mut interrupted = record.clone();
    interrupted.status = RunStatus::Interrupted;
    interrupted.event_count = events.len() as u64;
    interrupted.output = None;
    interrupted.value = None;
    interrupted.finish_reason = Some(FinishReason::Interrupted);
    interrupted.ended_at = None;
    interrupted.error = Some(ErrorInfo::new(
        ErrorCode::Store,
        format!("a write to the store failed ({failure}); the run was stopped and can be resumed"),
    ));
    store.update_run(&interrupted).await?;
    *record = interrupted;
    Ok(())
}
