//! Runs that branch from another run's log: `fork` (a copy of the first events, continued
//! with the live model), `replay` (the model's answers taken from the log), a request answered
//! from a recording (an eval's cassette) and the divergence between two logs.

use std::sync::Arc;

use keel_types::{Event, EventId, ModelProvider, RequestId, RunRecord};

use super::Kernel;
use crate::RuntimeError;
use crate::agent_loop::{Launch, Start};
use crate::handle::RunHandle;
use crate::kernel::RequestOptions;
use crate::memory::MemoryPrompt;
use crate::rebuild::{opening, rebuild};
use crate::replay::{Divergence, diverge, replay_provider};

impl Kernel {
    /// Starts a new run that copies the first `at_seq` events of run `id` and continues from
    /// there with the live model. The fork has no session (it is a branch, not a turn).
    pub async fn fork(&self, id: &RequestId, at_seq: u64) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let store = &self.inner.store;
        let original = self.existing_run(id).await?;
        agent_run_only(&original, "forked")?;
        let events = store.events(id, 0).await?;
        let last = events.iter().map(|e| e.seq).max().unwrap_or(0);
        // The end of the log; an interruption followed by a resume is not an end.
        let terminal = events
            .last()
            .filter(|e| e.payload.is_terminal())
            .map(|e| e.seq);
        if at_seq == 0 || at_seq > last || terminal.is_some_and(|t| at_seq >= t) {
            return Err(RuntimeError::Conflict(format!(
                "--at must name an event of run `{id}` before its end (1..{})",
                terminal.unwrap_or(last + 1).saturating_sub(1).max(1)
            )));
        }
        let agent = self.agent(&original.agent)?;
        let provider = self.provider(&original.agent, &agent)?;
        let prefix: Vec<Event> = events.iter().filter(|e| e.seq <= at_seq).cloned().collect();
        let rebuilt = rebuild(&prefix).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let skills = self.skill_prompt(&original.agent, &agent, &rebuilt.input)?;
        // The fork sees the context the original recalled; the copied events record it when
        // they reach that far, the fork's own log otherwise.
        let memory = match MemoryPrompt::recorded(&events) {
            Some((seq, prompt)) if seq <= at_seq => MemoryPrompt {
                events: Vec::new(),
                ..prompt
            },
            Some((_, prompt)) => prompt,
            None => MemoryPrompt::default(),
        };
        let mut record = RunRecord::new(
            RequestId::generate(),
            None,
            original.agent,
            rebuilt.input.clone(),
        );
        record.links.forked_from = Some(id.clone());
        record.links.fork_seq = Some(at_seq);
        store.create_run(&record).await?;
        let copies: Vec<Event> = prefix
            .into_iter()
            .map(|event| Event {
                id: EventId::generate(),
                request_id: record.request_id.clone(),
                session_id: None,
                ..event
            })
            .collect();
        store.append(&copies).await?;
        let start = Start::Forked {
            from: id.clone(),
            at_seq,
        };
        Ok(self.launch(Launch {
            request_history: rebuilt.history.clone(),
            mode: rebuilt.mode,
            metadata: rebuilt.metadata.clone(),
            params: rebuilt.params.clone(),
            output_schema: rebuilt.output_schema.clone(),
            rebuilt: Some(rebuilt),
            skills,
            memory,
            ..Launch::new(record, agent, provider, start)
        }))
    }

    /// [`Kernel::request`] with its model rounds answered by `provider` instead of the agent's
    /// model (an eval's recorded cassette). An agent run only.
    pub async fn request_answered_by(
        &self,
        options: RequestOptions,
        provider: Arc<dyn ModelProvider>,
    ) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let origin = super::Origin {
            provider: Some(provider),
            ..super::Origin::default()
        };
        self.pin().start_run(options, origin).await
    }

    /// Re-executes run `id` as a new run whose model answers (and failures) come from the
    /// original's log; tools run for real. Compare the two with [`Kernel::divergence`].
    pub async fn replay(&self, id: &RequestId) -> Result<RunHandle, RuntimeError> {
        self.replay_with(id, std::collections::BTreeMap::new())
            .await
    }

    /// [`Kernel::replay`] with `extra` metadata over the original's (an eval's tags).
    pub async fn replay_with(
        &self,
        id: &RequestId,
        extra: std::collections::BTreeMap<String, String>,
    ) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let store = &self.inner.store;
        let original = self.existing_run(id).await?;
        agent_run_only(&original, "replayed")?;
        let events = store.events(id, 0).await?;
        let agent = self.agent(&original.agent)?;
        let provider: Arc<dyn ModelProvider> = Arc::new(replay_provider(&events));
        let (history, mode, mut metadata) = opening(&events);
        metadata.extend(extra);
        let (params, output_schema) = crate::rebuild::settings(&events);
        let skills = self.skill_prompt(&original.agent, &agent, &original.input)?;
        let memory = MemoryPrompt::recorded(&events)
            .map(|(_, prompt)| prompt)
            .unwrap_or_default();
        let mut record =
            RunRecord::new(RequestId::generate(), None, original.agent, original.input);
        record.links.replay_of = Some(id.clone());
        store.create_run(&record).await?;
        Ok(self.launch(Launch {
            request_history: history,
            mode,
            skills,
            memory,
            metadata,
            params,
            output_schema,
            ..Launch::new(record, agent, provider, Start::Fresh)
        }))
    }

    /// Where the log of `new` first differs from the log of `original` (ids, times and
    /// durations aside); `None` when they are the same.
    pub async fn divergence(
        &self,
        original: &RequestId,
        new: &RequestId,
    ) -> Result<Option<Divergence>, RuntimeError> {
        let store = &self.inner.store;
        let a = store.events(original, 0).await?;
        let b = store.events(new, 0).await?;
        Ok(diverge(&a, &b))
    }
}

/// Fork and replay re-run an agent's model rounds: a workflow run has none (resume or retry
/// it instead).
fn agent_run_only(run: &RunRecord, verb: &str) -> Result<(), RuntimeError> {
    match run.workflow() {
        Some(name) => Err(RuntimeError::InvalidInput(format!(
            "run `{}` is a run of workflow `{name}` and cannot be {verb}; resume or retry it",
            run.request_id
        ))),
        None => Ok(()),
    }
}
