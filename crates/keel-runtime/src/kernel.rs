//! The kernel: resolves a request to an agent and its model, records the run, spawns the agent
//! loop. Holds what all runs share (workspace, providers, gateway, store) and cancellation tokens.

mod approvals;
mod branches;
mod children;
mod memory_runs;
mod options;
mod queue;
mod reload;
mod runs;
mod sessions;
mod skills;
mod slots;
mod tasks;
mod tools;
mod workflow;

pub use approvals::Approvals;
pub use memory_runs::Memory;
pub use options::RequestOptions;
pub use queue::Replica;
use reload::Current;
pub use reload::{RELOAD_AGENT, ReloadParts, workspace_changes, workspace_digest};
pub use runs::Runs;
pub use sessions::Sessions;
pub use skills::Skills;
pub use tasks::{TaskRequest, Tasks};
pub use tools::Tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use keel_tools::gateway::Gateway;
use keel_types::{
    ArtifactStore, EventObserver, EventPayload, Message, ModelProvider, RequestId, RunLinks,
    RunRecord, RunStatus, RunStore, SessionId,
};
use keel_workspace::{AgentSpec, Workspace};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::RuntimeError;
use crate::agent_loop::{self, AgentRun, Launch, Services, Start};
use crate::emitter::{Emitter, Pipeline};
use crate::handle::RunHandle;
use crate::history::validate_history;
use crate::memory::{MemoryPrompt, MemoryService};
use crate::rebuild::{opening, rebuild};
use crate::skills::SkillPrompt;

/// Everything the kernel is assembled from.
pub struct KernelParts {
    pub workspace: Arc<Workspace>,
    /// Providers by `Model` document name; an `Err` explains why that model is unusable.
    pub models: HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
    pub gateway: Arc<Gateway>,
    pub store: Arc<dyn RunStore>,
    /// Where large tool outputs go.
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Hooks written in Rust, run with the workspace's hooks.
    pub hooks: Vec<Arc<dyn keel_tools::hooks::InProcessHook>>,
    /// Called with every stored event of every run.
    pub observers: Vec<Arc<dyn EventObserver>>,
    /// Long-term memory, when the workspace declares `Memory` documents.
    pub memory: Option<Arc<MemoryService>>,
    /// Held while a run of this workspace snapshot lives (see [`ReloadParts::keep`]).
    pub keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// What runs agents whose `backend` is not native (`docs/adapters.md`).
    pub adapters: crate::adapter::Adapters,
}

/// The runtime kernel. Cheap to clone. A clone made by `Kernel::pin` keeps using the
/// workspace snapshot current when it was made, whatever reloads happen meanwhile.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
    pinned: Option<Arc<Current>>,
}

struct Inner {
    /// The loaded workspace and what is built from it, swapped whole by a reload.
    current: RwLock<Arc<Current>>,
    /// `redacting`, which redacts every record it writes.
    store: Arc<dyn RunStore>,
    redacting: Arc<crate::redacting_store::RedactingStore>,
    artifacts: Arc<dyn ArtifactStore>,
    /// Hooks written in Rust, run with the workspace's hooks (kept across reloads).
    hooks: Vec<Arc<dyn keel_tools::hooks::InProcessHook>>,
    /// What runs agents whose `backend` is not native (kept across reloads).
    adapters: crate::adapter::Adapters,
    observers: crate::emitter::Observers,
    /// Woken when an approval is decided.
    decisions: Arc<tokio::sync::Notify>,
    /// The slots runs execute in: the one owner of `limits.maxConcurrentRuns`.
    slots: slots::RunSlots,
    active: Mutex<Tracker>,
    /// The number of live runs, for waiting on them.
    live: watch::Sender<usize>,
}

/// The live runs of this kernel and the shutdown state, under one lock.
#[derive(Default)]
struct Tracker {
    runs: HashMap<RequestId, Active>,
    /// `shutdown` was called: no new operation starts.
    shutting_down: bool,
    /// The grace period is over: live runs are being interrupted.
    interrupting: bool,
    /// Runs that ended on their own since `shutdown` was called.
    finished_in_grace: usize,
    /// Launches so far (numbers each [`Active`]).
    launches: u64,
}

/// How to stop one live run.
struct Active {
    cancel: CancellationToken,
    interrupt: CancellationToken,
    /// Which launch of the run this is: a run taken back after this process lost its lease
    /// may be launched again while its fenced first launch is still ending.
    launch: u64,
}

/// What [`Kernel::shutdown`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Runs that ended on their own within the grace period.
    pub finished: usize,
    /// Runs stopped when the grace period ran out, now `interrupted` (resumable).
    pub interrupted: usize,
}

impl Kernel {
    /// Assembles a kernel.
    pub fn new(parts: KernelParts) -> Self {
        let KernelParts {
            workspace,
            models,
            gateway,
            store,
            artifacts,
            hooks,
            observers,
            memory,
            keep,
            adapters,
        } = parts;
        let slots = slots::RunSlots::new(workspace.runtime.limits.max_concurrent_runs as usize);
        let observers: crate::emitter::Observers = observers.into();
        let decisions: Arc<tokio::sync::Notify> = Arc::default();
        let redacting = Arc::new(crate::redacting_store::RedactingStore::new(store));
        let store: Arc<dyn RunStore> = redacting.clone();
        let parts = ReloadParts {
            workspace,
            models,
            gateway,
            memory,
            keep,
        };
        let inner = Arc::new_cyclic(|weak| {
            let base = reload::Base {
                store: &store,
                redacting: &redacting,
                artifacts: &artifacts,
                hooks: &hooks,
                adapters: &adapters,
                observers: &observers,
                decisions: &decisions,
                kernel: weak.clone(),
            };
            let current = reload::compile(&base, parts);
            Inner {
                current: RwLock::new(Arc::new(current)),
                store,
                redacting,
                artifacts,
                hooks,
                adapters,
                observers,
                decisions,
                slots,
                active: Mutex::new(Tracker::default()),
                live: watch::Sender::new(0),
            }
        });
        Self {
            inner,
            pinned: None,
        }
    }

    /// The compiled workspace.
    pub fn workspace(&self) -> Arc<Workspace> {
        self.current().services.workspace.clone()
    }

    /// The run store.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.inner.store
    }

    /// What every run shares, to hold.
    pub(crate) fn services(&self) -> Arc<Services> {
        self.current().services.clone()
    }

    /// What every run shares, to hold (a workflow's tool calls).
    pub(crate) fn shared_services(&self) -> Arc<Services> {
        self.services()
    }

    /// Where every run's events go.
    pub(crate) fn pipeline(&self) -> Pipeline {
        self.current().pipeline.clone()
    }

    /// The artifact store.
    pub fn artifacts(&self) -> &Arc<dyn ArtifactStore> {
        &self.inner.artifacts
    }

    /// The tool gateway.
    pub fn gateway(&self) -> Arc<Gateway> {
        self.current().services.gateway.clone()
    }

    /// Starts a run. The run is recorded before this returns; its events flow to the handle.
    pub async fn request(&self, options: RequestOptions) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        self.pin().start_run(options, Origin::default()).await
    }

    /// Starts a new run with the agent, input, session, supplied history and mode of ended
    /// run `id`, linked to it (`links.retryOf`). The session's history leaves out `id`'s own
    /// turn, so the model sees what it saw the first time.
    ///
    /// Errors: [`RuntimeError::NotFound`]; [`RuntimeError::Conflict`] while `id` has not
    /// ended; [`RuntimeError::InvalidInput`] for a direct tool call (call the tool again).
    pub async fn retry(
        &self,
        id: &RequestId,
        owner: Option<String>,
    ) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let original = self.existing_run(id).await?;
        if !original.status.is_terminal() {
            return Err(RuntimeError::Conflict(format!(
                "run `{id}` is still {}; only an ended run can be retried",
                original.status.as_str()
            )));
        }
        let events = self.inner.store.events(id, 0).await?;
        if events
            .iter()
            .any(|e| matches!(e.payload, EventPayload::DirectStarted { .. }))
        {
            return Err(RuntimeError::Conflict(format!(
                "run `{id}` is a direct tool call; call the tool again instead"
            )));
        }
        let (history, mode, metadata) = opening(&events);
        let (params, output_schema) = crate::rebuild::settings(&events);
        let options = RequestOptions {
            input: original.input,
            agent: Some(original.agent),
            session_id: original.session_id,
            mode,
            history,
            timeout: None,
            owner,
            metadata,
            params,
            output_schema,
            // Repeats the original's own turn; whoever may retry it may read it already.
            override_session_owner: true,
            // A retry is a new request: a trace of its own.
            trace: None,
            // The agent's own model (an eval's override is not recorded with the run).
            model: None,
            // The file tools use the disk (a caller's view of the files is not recorded).
            files: None,
        };
        let origin = Origin {
            links: RunLinks {
                retry_of: Some(id.clone()),
                ..RunLinks::default()
            },
            skip_turn_of: Some(id.clone()),
            ..Origin::default()
        };
        self.start_run(options, origin).await
    }

    /// Records and launches a new run.
    async fn start_run(
        &self,
        options: RequestOptions,
        origin: Origin,
    ) -> Result<RunHandle, RuntimeError> {
        let workflow = options
            .agent
            .as_deref()
            .and_then(|a| a.strip_prefix(keel_types::WORKFLOW_PREFIX))
            .map(str::to_owned);
        if let Some(name) = workflow {
            if origin.provider.is_some() {
                return Err(RuntimeError::InvalidInput(format!(
                    "workflow `{name}` runs its agent nodes with their own models: its rounds \
                     cannot be answered from one cassette"
                )));
            }
            return self.start_workflow(&name, options, origin).await;
        }
        let Origin {
            links,
            skip_turn_of,
            narrowing,
            depth,
            claimed,
            provider: answering,
        } = origin;
        validate_history(&options.history).map_err(RuntimeError::InvalidInput)?;
        // The one rule for session ids holds for embedders too, not only the CLI and HTTP.
        if let Some(session) = &options.session_id {
            SessionId::parse(&session.to_string())
                .map_err(|error| RuntimeError::InvalidInput(error.to_string()))?;
        }
        let current = self.current();
        let workspace = &current.services.workspace;
        let agent_name = match options.agent.as_deref().or(workspace.default_agent()) {
            Some(name) => name.to_owned(),
            None => return Err(RuntimeError::NoDefaultAgent),
        };
        let mut agent = self.agent(&agent_name)?;
        if let Some(schema) = &options.output_schema {
            options::check_output_schema(&agent_name, &agent, schema)?;
        }
        if let Some(model) = &options.model {
            if !workspace.models.contains_key(model) {
                return Err(RuntimeError::InvalidInput(format!(
                    "no `Model` document is named `{model}` (models: {})",
                    workspace
                        .models
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            agent.model = model.clone();
        }
        let provider = match answering {
            Some(provider) => provider,
            None => self.provider(&agent_name, &agent)?,
        };
        let skills = self.skill_prompt(&agent_name, &agent, &options.input)?;
        // Before the memory recall: a session's owner is checked before anything is recalled.
        let limits = &workspace.runtime.limits;
        let session = self
            .enter_session(
                &agent_name,
                &options,
                skip_turn_of.as_ref(),
                limits.history_tokens,
            )
            .await?;
        let memory = match &current.services.memory {
            Some(memory) => {
                memory
                    .recall(
                        &agent_name,
                        options.session_id.as_ref(),
                        &options.metadata,
                        &options.input,
                    )
                    .await?
            }
            None => MemoryPrompt::default(),
        };
        let store = &self.inner.store;
        let (record, start) = match claimed {
            // A queued run this process claimed: already recorded, now running and ours.
            Some(record) => (record, Start::Fresh),
            None => {
                let mut record = RunRecord::new(
                    RequestId::generate(),
                    options.session_id,
                    agent_name,
                    options.input,
                );
                record.owner = options.owner;
                record.links = links;
                record.trace = Some(self.trace_for(options.trace));
                // The record and the opening event: one write.
                let opening = crate::emitter::opening_event(
                    &current.pipeline,
                    &record,
                    EventPayload::RequestStarted {
                        input: record.input.clone(),
                        history: options.history.clone(),
                        mode: options.mode,
                        metadata: options.metadata.clone(),
                        params: options.params.clone(),
                        output_schema: options.output_schema.clone(),
                        session_owner_overridden: session.overridden,
                    },
                );
                store
                    .create_run_with(&record, std::slice::from_ref(&opening))
                    .await?;
                (record, Start::Opened(Box::new(opening)))
            }
        };
        Ok(self.launch(Launch {
            history: session.history,
            request_history: options.history,
            timeout: options.timeout,
            mode: options.mode,
            skills,
            memory,
            metadata: options.metadata,
            params: options.params,
            output_schema: options.output_schema,
            narrowing,
            depth,
            files: options.files,
            ..Launch::new(record, agent, provider, start)
        }))
    }

    /// A new run's trace: the caller's, or a new one kept at the workspace's sampling ratio.
    pub(crate) fn trace_for(&self, incoming: Option<keel_types::RunTrace>) -> keel_types::RunTrace {
        incoming.unwrap_or_else(|| {
            let spec = &self.workspace().runtime.observability;
            keel_types::RunTrace::root(crate::trace::sampling_ratio(spec))
        })
    }

    /// Continues an `interrupted` run from its log: a cut-off model round is asked again; a
    /// tool call that started without a recorded result runs again only if its tool is
    /// idempotent (the model is told the outcome is unknown otherwise).
    pub async fn resume(&self, id: &RequestId) -> Result<RunHandle, RuntimeError> {
        self.accepting()?;
        let kernel = self.pin();
        let store = &self.inner.store;
        let before = kernel.existing_run(id).await?;
        if before.status != RunStatus::Interrupted {
            return Err(RuntimeError::Conflict(format!(
                "run `{id}` is {}, only interrupted runs can be resumed",
                before.status.as_str()
            )));
        }
        kernel.not_ending_here(id)?;
        if before.workflow().is_some() {
            return kernel.resume_workflow(before).await;
        }
        let agent = kernel.agent(&before.agent)?;
        let provider = kernel.provider(&before.agent, &agent)?;
        let events = store.events(id, 0).await?;
        let rebuilt = rebuild(&events).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        let skills = kernel.skill_prompt(&before.agent, &agent, &before.input)?;
        // The log already holds the recall; the prompt gets the same context again.
        let memory = MemoryPrompt::recorded(&events)
            .map(|(_, prompt)| MemoryPrompt {
                events: Vec::new(),
                ..prompt
            })
            .unwrap_or_default();
        // The claim is the last step that can fail (see `resume_workflow`).
        let history = kernel.history_of(&before).await?;
        let (depth, narrowing) = kernel.lineage(&before).await?;
        let record = store.claim(id).await?;
        let start = Start::Resumed {
            cut_off_round: rebuilt.cut_off_round,
        };
        Ok(kernel.launch(Launch {
            history,
            narrowing,
            depth,
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

    /// Marks runs left active by processes that died as `interrupted`; returns their ids.
    pub async fn recover(&self) -> Result<Vec<RequestId>, RuntimeError> {
        Ok(self.inner.store.recover().await?)
    }

    /// The record of a run that must exist.
    async fn existing_run(&self, id: &RequestId) -> Result<RunRecord, RuntimeError> {
        self.inner
            .store
            .get_run(id)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("no run `{id}`")))
    }

    /// The agent named, or the workspace's default.
    pub(crate) fn agent_name(&self, agent: Option<&str>) -> Result<String, RuntimeError> {
        let workspace = self.workspace();
        let name = agent
            .or(workspace.default_agent())
            .ok_or(RuntimeError::NoDefaultAgent)?;
        self.agent(name)?;
        Ok(name.to_owned())
    }

    pub(crate) fn agent(&self, name: &str) -> Result<AgentSpec, RuntimeError> {
        let workspace = self.workspace();
        workspace
            .agents
            .get(name)
            .cloned()
            .ok_or_else(|| RuntimeError::UnknownAgent {
                name: name.to_owned(),
                available: workspace
                    .agents
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// What skills add to a prompt of `agent` for `input`; a bad `$mention` is an error.
    fn skill_prompt(
        &self,
        agent_name: &str,
        agent: &AgentSpec,
        input: &str,
    ) -> Result<SkillPrompt, RuntimeError> {
        let services = self.services();
        services
            .skills
            .prompt(&services.workspace, agent_name, agent, input)
    }

    pub(crate) fn provider(
        &self,
        agent_name: &str,
        agent: &AgentSpec,
    ) -> Result<Arc<dyn ModelProvider>, RuntimeError> {
        let unavailable = |message: String| RuntimeError::ModelUnavailable {
            agent: agent_name.to_owned(),
            model: agent.model.clone(),
            message,
        };
        if let Some(remote) = agent.backend.remote() {
            return Ok(Arc::new(crate::adapter::NoModel(remote.url)));
        }
        match self.current().models.get(&agent.model) {
            Some(Ok(provider)) => Ok(provider.clone()),
            Some(Err(message)) => Err(unavailable(message.clone())),
            None => Err(unavailable("no provider is configured for it".into())),
        }
    }

    /// The trimmed transcript of a run's session, without the run's own turn.
    async fn history_of(&self, record: &RunRecord) -> Result<Vec<Message>, RuntimeError> {
        let Some(session) = &record.session_id else {
            return Ok(Vec::new());
        };
        self.session_history(
            session,
            Some(&record.request_id),
            self.workspace().runtime.limits.history_tokens,
        )
        .await
    }

    /// Spawns the agent loop for a recorded run.
    pub(crate) fn launch(&self, launch: Launch) -> RunHandle {
        let opened = match &launch.start {
            Start::Opened(opening) => Some((**opening).clone()),
            _ => None,
        };
        let depth = launch.depth;
        let request_id = launch.record.request_id.clone();
        // What a post-run extraction needs (cloned only when the agent has one).
        let extraction = (launch.direct.is_none() && self.wants_extraction(&launch.record.agent))
            .then(|| (launch.record.clone(), launch.metadata.clone()));
        let (tx, rx) = crate::emitter::subscription();
        let current = self.current();
        let pipeline = &current.pipeline;
        let emitter = match opened {
            Some(opening) => Emitter::opened(pipeline, &launch.record, opening, Some(tx)),
            None => {
                let last_seq = launch.rebuilt.as_ref().map_or(0, |r| r.last_seq);
                Emitter::new(pipeline, &launch.record, last_seq, Some(tx))
            }
        };
        // Boxed, so the run's task does not carry it twice (the task's own state and the
        // loop's); with the loop's phases boxed too (`AgentRun::drive`) the task is about
        // 1.5 KiB, not 14 KiB, which counts at a thousand runs in flight.
        let run = Box::new(AgentRun::new(
            current.services.clone(),
            Arc::new(emitter),
            launch,
        ));
        let cancel = CancellationToken::new();
        let interrupt = CancellationToken::new();
        let launch = self.track(&request_id, &cancel, &interrupt);
        // A child run does not wait for a slot: its parent holds one and waits for it (a
        // tree cannot starve itself), and its parent's own limits bound how many there are.
        let slot = (depth == 0).then(|| self.inner.slots.take());
        let token = cancel.clone();
        // Untracks the run when its task ends, however it ends.
        let tracked = Tracked {
            kernel: self.clone(),
            id: request_id.clone(),
            launch,
        };
        let task = tokio::spawn(async move {
            // Waiting for a slot is part of the run: cancelling (or a shutdown) while queued
            // still records it.
            let permit = match slot {
                Some(slot) => tokio::select! {
                    permit = slot.ready() => permit,
                    _ = token.cancelled() => None,
                    _ = interrupt.cancelled() => None,
                },
                None => None,
            };
            let response = agent_loop::execute(run, token, interrupt).await;
            drop(permit);
            if let (Some((record, metadata)), RunStatus::Completed, Some(output)) =
                (extraction, response.status, &response.output)
            {
                // In the background: the run's answer does not wait for it.
                tracked.kernel.extract_after(crate::memory::Finished {
                    record,
                    metadata,
                    output: output.clone(),
                });
            }
            drop(tracked);
            response
        });
        RunHandle::new(request_id, rx, cancel, task)
    }

    /// Cancels an active run. Returns whether a run with that id was active.
    pub fn cancel(&self, id: &RequestId) -> bool {
        match self.tracker().runs.get(id) {
            Some(active) => {
                active.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// How many runs of this kernel are live (queued or running).
    pub fn active_runs(&self) -> usize {
        self.tracker().runs.len()
    }

    /// Stops taking work and ends the live runs: from now on every operation that would start
    /// a run fails with [`RuntimeError::ShuttingDown`]. Waits up to `grace` for the live runs
    /// to end on their own; then stops the rest, which end `interrupted` (error code
    /// `shutdown`, event `runtime.request.interrupted`) and can be resumed. Returns once every
    /// run has recorded its end.
    pub async fn shutdown(&self, grace: Duration) -> ShutdownReport {
        self.tracker().shutting_down = true;
        let mut live = self.inner.live.subscribe();
        let in_time = tokio::time::timeout(grace, live.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|waited| waited.is_ok());
        tracing::debug!(in_time, "Shutdown: the grace period is over.");
        let (finished, interrupted) = {
            let mut tracker = self.tracker();
            tracker.interrupting = true;
            for active in tracker.runs.values() {
                active.interrupt.cancel();
            }
            (tracker.finished_in_grace, tracker.runs.len())
        };
        // Each stopped run records its end (one event and the record) and untracks itself.
        let all_ended = live.wait_for(|n| *n == 0).await.is_ok();
        tracing::debug!(all_ended, "Shutdown: every run recorded its end.");
        ShutdownReport {
            finished,
            interrupted,
        }
    }

    /// Fails once a shutdown has begun.
    pub fn accepting(&self) -> Result<(), RuntimeError> {
        match self.tracker().shutting_down {
            true => Err(RuntimeError::ShuttingDown),
            false => Ok(()),
        }
    }

    fn tracker(&self) -> MutexGuard<'_, Tracker> {
        match self.inner.active.lock() {
            Ok(tracker) => tracker,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn track(
        &self,
        id: &RequestId,
        cancel: &CancellationToken,
        interrupt: &CancellationToken,
    ) -> u64 {
        let mut tracker = self.tracker();
        tracker.launches += 1;
        let launch = tracker.launches;
        // A run launched after the grace period (its operation began before the shutdown)
        // stops at once.
        if tracker.interrupting {
            interrupt.cancel();
        }
        tracker.runs.insert(
            id.clone(),
            Active {
                cancel: cancel.clone(),
                interrupt: interrupt.clone(),
                launch,
            },
        );
        self.inner.live.send_replace(tracker.runs.len());
        launch
    }

    fn untrack(&self, id: &RequestId, launch: u64) {
        let mut tracker = self.tracker();
        // Only this launch's entry: a later launch of the same run stays tracked.
        if tracker
            .runs
            .get(id)
            .is_none_or(|active| active.launch != launch)
        {
            return;
        }
        tracker.runs.remove(id);
        if tracker.shutting_down && !tracker.interrupting {
            tracker.finished_in_grace += 1;
        }
        self.inner.live.send_replace(tracker.runs.len());
    }
}

/// Where a new run comes from besides its request.
#[derive(Default)]
struct Origin {
    links: RunLinks,
    /// Leave this run's turn out of the session history (a retry).
    skip_turn_of: Option<RequestId>,
    /// Narrowing layers (a child run: its ancestors' policies).
    narrowing: Vec<keel_workspace::PolicySpec>,
    depth: u32,
    /// The record of a queued run this process claimed (none: record a new run).
    claimed: Option<RunRecord>,
    /// The model answering instead of the agent's (a recorded cassette).
    provider: Option<Arc<dyn ModelProvider>>,
}

/// A live run; dropping it untracks the run.
struct Tracked {
    kernel: Kernel,
    id: RequestId,
    launch: u64,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.kernel.untrack(&self.id, self.launch);
    }
}
