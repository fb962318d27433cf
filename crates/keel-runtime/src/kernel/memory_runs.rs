//! Long-term memory as its callers see it (`Runtime::memory()` in the SDK): the workspace's
//! memory service, and the operations that are runs of their own (agent `memory`):
//! maintenance (`runtime.memory.maintenance.*` and a `runtime.memory.lifecycle` per change
//! between the usual opening and terminal events) and post-run extraction (a background run
//! linked to its parent; the parent's answer never waits for it).

use std::sync::Arc;
use std::time::Instant;

use keel_types::{
    ErrorCode, ErrorInfo, EventPayload, FinishReason, Message, ModelProvider, RequestId, RunRecord,
    RunStatus, Usage,
};

use super::Kernel;
use crate::RuntimeError;
use crate::emitter::Emitter;
use crate::memory::{
    Access, Finished, MAINTENANCE_AGENT, MaintenanceReport, MaintenanceRequest, MemoryService,
    Origin, ask, instructions, parse,
};

/// Long-term memory of a runtime. Cheap to clone.
#[derive(Clone)]
pub struct Memory {
    kernel: Kernel,
}

impl Memory {
    /// The memory of the current workspace — list, search, add, update, delete, history,
    /// candidates, export, import; [`RuntimeError::NotFound`] when it declares no `Memory`
    /// document.
    pub fn service(&self) -> Result<Arc<MemoryService>, RuntimeError> {
        self.kernel.memory_service()
    }
}

/// A run of the kernel's own (agent `memory`): recorded, opened, and closed with one
/// terminal event from an outcome.
struct OwnRun {
    record: RunRecord,
    emitter: Emitter,
    started: Instant,
}

impl OwnRun {
    /// Records the run and emits its opening event.
    async fn open(
        kernel: &Kernel,
        input: String,
        parent: Option<RequestId>,
        owner: Option<String>,
    ) -> Result<Self, RuntimeError> {
        let started = Instant::now();
        let mut record = RunRecord::new(RequestId::generate(), None, MAINTENANCE_AGENT, input);
        record.links.parent_id = parent;
        record.owner = owner;
        kernel.store().create_run(&record).await?;
        let emitter = Emitter::new(&kernel.pipeline(), &record, 0, None);
        emitter.emit(EventPayload::RequestStarted {
            input: record.input.clone(),
            history: Vec::new(),
            mode: None,
            metadata: Default::default(),
            params: Default::default(),
            output_schema: None,
            session_owner_overridden: None,
        })?;
        Ok(Self {
            record,
            emitter,
            started,
        })
    }

    /// Ends the run: completed with `Ok(summary)`, failed with `Err(message)`.
    async fn close(
        mut self,
        kernel: &Kernel,
        outcome: Result<String, String>,
        steps: u32,
    ) -> Result<RequestId, RuntimeError> {
        let duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let record = &mut self.record;
        let terminal = match outcome {
            Ok(summary) => {
                record.status = RunStatus::Completed;
                record.output = Some(summary.clone());
                record.finish_reason = Some(FinishReason::Completed);
                EventPayload::RequestCompleted {
                    output: summary,
                    value: None,
                    finish_reason: FinishReason::Completed,
                    usage: Usage::default(),
                    steps,
                    duration_ms,
                }
            }
            Err(message) => {
                let error = ErrorInfo::new(ErrorCode::Internal, message);
                record.status = RunStatus::Failed;
                record.error = Some(error.clone());
                record.finish_reason = Some(FinishReason::Internal);
                EventPayload::RequestFailed {
                    error,
                    finish_reason: FinishReason::Internal,
                    usage: Usage::default(),
                    steps,
                    duration_ms,
                }
            }
        };
        self.emitter.emit_durable(terminal).await?;
        record.steps = steps;
        record.ended_at = Some(keel_types::now_rfc3339());
        record.event_count = self.emitter.count();
        kernel.store().update_run(record).await?;
        Ok(self.record.request_id)
    }
}

impl Kernel {
    /// Long-term memory of this runtime.
    pub fn memory(&self) -> Memory {
        Memory {
            kernel: self.clone(),
        }
    }

    /// The workspace's memory service; [`RuntimeError::NotFound`] when it declares no
    /// `Memory` document.
    pub(crate) fn memory_service(&self) -> Result<Arc<MemoryService>, RuntimeError> {
        self.services().memory.clone().ok_or_else(|| {
            RuntimeError::NotFound(
                "no memory: the workspace declares no `kind: Memory` document".into(),
            )
        })
    }

    /// The provider of `Model` document `name`, if it is usable.
    pub(crate) fn model_provider(&self, name: &str) -> Option<Arc<dyn ModelProvider>> {
        self.current().models.get(name)?.as_ref().ok().cloned()
    }

    /// The provider of the `Model` document `name` (an eval's judge), or why there is none.
    pub fn provider_of(&self, name: &str) -> Result<Arc<dyn ModelProvider>, RuntimeError> {
        match self.current().models.get(name) {
            Some(Ok(provider)) => Ok(provider.clone()),
            Some(Err(message)) => Err(RuntimeError::InvalidInput(format!(
                "model `{name}` is unavailable: {message}"
            ))),
            None => Err(RuntimeError::InvalidInput(format!(
                "no `Model` document is named `{name}`"
            ))),
        }
    }

    /// Whether runs of `agent` are followed by a post-run extraction (it writes a memory
    /// with `extraction`).
    pub(crate) fn wants_extraction(&self, agent: &str) -> bool {
        let Ok(memory) = self.memory_service() else {
            return false;
        };
        memory.memories().values().any(|spec| {
            spec.extraction.is_some()
                && spec
                    .writers
                    .iter()
                    .any(|w| keel_workspace::skills::glob_matches(w, agent))
        })
    }

    /// Starts the extraction runs a completed run calls for (none when its agent writes no
    /// memory with `extraction`). Returns at once.
    pub(crate) fn extract_after(&self, finished: Finished) {
        let Ok(memory) = self.memory_service() else {
            return;
        };
        let Ok(accesses) = memory.namespaces(
            &finished.record.agent,
            finished.record.session_id.as_ref(),
            &finished.metadata,
            true,
        ) else {
            return;
        };
        let finished = Arc::new(finished);
        for access in accesses {
            let Some(extraction) = memory
                .memories()
                .get(&access.memory)
                .and_then(|spec| spec.extraction.clone())
            else {
                continue;
            };
            let provider = match self.model_provider(&extraction.model) {
                Some(provider) => provider,
                None => {
                    tracing::warn!(model = %extraction.model, "The memory extraction model is unavailable.");
                    continue;
                }
            };
            let (kernel, memory, finished) = (self.clone(), memory.clone(), finished.clone());
            tokio::spawn(async move {
                if let Err(error) = kernel
                    .extract(
                        &memory,
                        &access,
                        provider,
                        &finished,
                        extraction.max_candidates,
                    )
                    .await
                {
                    tracing::warn!(request_id = %finished.record.request_id, %error, "Memory extraction could not be recorded.");
                }
            });
        }
    }

    /// One extraction, recorded as a run of its own.
    async fn extract(
        &self,
        memory: &MemoryService,
        access: &Access,
        provider: Arc<dyn ModelProvider>,
        finished: &Finished,
        max: u32,
    ) -> Result<RequestId, RuntimeError> {
        let parent = &finished.record;
        let input = format!(
            "memory extraction for {} into {}",
            parent.request_id, access.namespace
        );
        let run = OwnRun::open(self, input, Some(parent.request_id.clone()), None).await?;
        let messages = vec![
            Message::system(instructions(max)),
            Message::user(format!(
                "User: {}\n\nAssistant: {}",
                parent.input, finished.output
            )),
        ];
        let outcome = match ask(provider.as_ref(), messages).await {
            Ok(answer) => parse(&answer, max),
            Err(error) => Err(error),
        };
        let mut submitted = 0usize;
        let result = match outcome {
            Ok(drafts) => {
                let mut failure = None;
                for draft in drafts {
                    let origin = Origin {
                        request_id: parent.request_id.clone(),
                        session_id: parent.session_id.clone(),
                        agent: parent.agent.clone(),
                        call_id: None,
                        seq: None,
                    };
                    match memory
                        .submit_from(access, draft, origin, keel_types::MemorySource::Extraction)
                        .await
                    {
                        Ok(outcome) => {
                            submitted += 1;
                            for event in outcome.events {
                                run.emitter.emit(event)?;
                            }
                        }
                        // One bad candidate (too long, a bad tag) is left out, the rest kept.
                        Err(RuntimeError::Memory(message)) => {
                            tracing::info!(%message, "A memory candidate from extraction was left out.");
                        }
                        Err(error) => {
                            failure = Some(error.to_string());
                            break;
                        }
                    }
                }
                failure.map_or(Ok(()), Err)
            }
            Err(error) => Err(error),
        };
        let outcome = result.map(|()| format!("{submitted} candidate(s) submitted"));
        run.close(self, outcome, 1).await
    }
}

impl Memory {
    /// Runs memory maintenance (expiry, compaction) as a recorded run of its own; returns
    /// the run's id and what was done.
    pub async fn maintain(
        &self,
        request: &MaintenanceRequest,
        owner: Option<String>,
    ) -> Result<(RequestId, MaintenanceReport), RuntimeError> {
        let memory = self.service()?;
        let target = request.namespace.clone().unwrap_or_else(|| "*".to_owned());
        let operations: Vec<String> = [("expire", request.expire), ("compact", request.compact)]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| name.to_owned())
            .collect();
        let input = format!("memory maintenance: {} on {target}", operations.join(", "));
        let run = OwnRun::open(&self.kernel, input, None, owner).await?;
        let emitter = &run.emitter;
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
        let (summary, result) = match outcome {
            Ok(report) => {
                emitter.emit(EventPayload::MemoryMaintenanceCompleted {
                    target,
                    operation_count: (report.merged.len() + report.expired.len()) as u64,
                    merged: report.merged.len() as u64,
                    expired: report.expired.len() as u64,
                })?;
                let summary = format!(
                    "{} merged, {} expired",
                    report.merged.len(),
                    report.expired.len()
                );
                (Ok(summary), Ok(report))
            }
            Err(error) => {
                emitter.emit(EventPayload::MemoryMaintenanceFailed {
                    target,
                    error: error.to_string(),
                })?;
                (Err(error.to_string()), Err(error))
            }
        };
        if let Some(error) = emit_error {
            return Err(error.into());
        }
        let id = run.close(&self.kernel, summary, 0).await?;
        result.map(|report| (id, report))
    }
}
