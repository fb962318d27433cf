//! Memory maintenance recorded as a run of its own (agent `memory`): its log holds
//! `runtime.memory.maintenance.started`, a `runtime.memory.lifecycle` event per change and
//! `runtime.memory.maintenance.completed` (or `.failed`), between the usual opening and
//! terminal events, so `keel runs show` tells what maintenance did and when.

use std::time::Instant;

use keel_types::{
    ErrorCode, ErrorInfo, EventPayload, FinishReason, RequestId, RunRecord, RunStatus, Usage,
};

use super::{MaintenanceReport, MaintenanceRequest};
use crate::RuntimeError;
use crate::emitter::Emitter;
use crate::kernel::Kernel;

/// The agent name maintenance runs are recorded under.
pub const MAINTENANCE_AGENT: &str = "memory";

impl Kernel {
    /// Runs memory maintenance as a recorded run; returns the run's id and what was done.
    pub async fn maintain_memory(
        &self,
        request: &MaintenanceRequest,
        owner: Option<String>,
    ) -> Result<(RequestId, MaintenanceReport), RuntimeError> {
        let memory = self.memory()?.clone();
        let started = Instant::now();
        let target = request.namespace.clone().unwrap_or_else(|| "*".to_owned());
        let operations: Vec<String> = [("expire", request.expire), ("compact", request.compact)]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| name.to_owned())
            .collect();
        let input = format!("memory maintenance: {} on {target}", operations.join(", "));
        let mut record = RunRecord::new(RequestId::generate(), None, MAINTENANCE_AGENT, input);
        record.owner = owner;
        self.store().create_run(&record).await?;
        let emitter = Emitter::new(self.pipeline(), &record, 0, None);
        emitter.emit(EventPayload::RequestStarted {
            input: record.input.clone(),
            history: Vec::new(),
            mode: None,
            metadata: Default::default(),
        })?;
        emitter.emit(EventPayload::MemoryMaintenanceStarted {
            target: target.clone(),
            operations,
        })?;
        let mut emit_error = None;
        let mut emit = |payload: EventPayload| {
            if let Err(error) = emitter.emit(payload) {
                emit_error.get_or_insert(error);
            }
        };
        let outcome = memory.maintain(request, &mut emit).await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (terminal, result) = match outcome {
            Ok(report) => {
                let summary = format!(
                    "{} merged, {} expired",
                    report.merged.len(),
                    report.expired.len()
                );
                emitter.emit(EventPayload::MemoryMaintenanceCompleted {
                    target,
                    operation_count: (report.merged.len() + report.expired.len()) as u64,
                    merged: report.merged.len() as u64,
                    expired: report.expired.len() as u64,
                })?;
                record.status = RunStatus::Completed;
                record.output = Some(summary.clone());
                record.finish_reason = Some(FinishReason::Completed);
                (
                    EventPayload::RequestCompleted {
                        output: summary,
                        finish_reason: FinishReason::Completed,
                        usage: Usage::default(),
                        steps: 0,
                        duration_ms,
                    },
                    Ok(report),
                )
            }
            Err(error) => {
                emitter.emit(EventPayload::MemoryMaintenanceFailed {
                    target,
                    error: error.to_string(),
                })?;
                let info = ErrorInfo::new(ErrorCode::Internal, error.to_string());
                record.status = RunStatus::Failed;
                record.error = Some(info.clone());
                record.finish_reason = Some(FinishReason::Internal);
                (
                    EventPayload::RequestFailed {
                        error: info,
                        finish_reason: FinishReason::Internal,
                        usage: Usage::default(),
                        steps: 0,
                        duration_ms,
                    },
                    Err(error),
                )
            }
        };
        emitter.emit_durable(terminal).await?;
        if let Some(error) = emit_error {
            return Err(error.into());
        }
        record.ended_at = Some(keel_types::now_rfc3339());
        record.event_count = emitter.count();
        self.store().update_run(&record).await?;
        result.map(|report| (record.request_id, report))
    }
}
