//! The kernel: resolves a request to an agent and its model, records the run, and spawns the
//! agent loop. Holds what all runs share (workspace, providers, gateway, store) and the
//! cancellation tokens of active runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_tools::gateway::Gateway;
use keel_types::{
    ErrorInfo, Event, FinishReason, ModelProvider, RequestId, RunFilter, RunRecord, RunStatus,
    RunStore, SessionId, Usage,
};
use keel_workspace::Workspace;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::RuntimeError;
use crate::agent_loop::{self, AgentRun};
use crate::emitter::Emitter;
use crate::narrator::Narrator;
use crate::redact::Redactor;

/// Everything the kernel is assembled from.
pub struct KernelParts {
    pub workspace: Arc<Workspace>,
    /// Providers by `Model` document name; an `Err` explains why that model is unusable.
    pub models: HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
    pub gateway: Arc<Gateway>,
    pub store: Arc<dyn RunStore>,
}

/// The runtime kernel. Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<Inner>,
}

struct Inner {
    parts: KernelParts,
    redactor: Arc<Redactor>,
    narrator: Arc<Narrator>,
    permits: Arc<Semaphore>,
    active: Mutex<HashMap<RequestId, CancellationToken>>,
}

/// One request to run.
#[derive(Debug, Clone, Default)]
pub struct RequestOptions {
    pub input: String,
    /// The agent; the workspace default when `None`.
    pub agent: Option<String>,
    pub session_id: Option<SessionId>,
}

/// The final result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResponse {
    pub request_id: RequestId,
    pub status: RunStatus,
    pub output: Option<String>,
    pub error: Option<ErrorInfo>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub steps: u32,
    pub duration_ms: u64,
}

/// A started run: its live events, a way to cancel it, and its final response.
pub struct RunHandle {
    request_id: RequestId,
    events: mpsc::UnboundedReceiver<Event>,
    cancel: CancellationToken,
    task: JoinHandle<RunResponse>,
}

impl RunHandle {
    /// The run's id.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The next live event (stored events and narration), or `None` once the run has ended
    /// and every event was delivered.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The live events as a `Stream`; it ends when the run has ended.
    pub fn events(&mut self) -> impl futures_util::Stream<Item = Event> + Send + '_ {
        futures_util::stream::poll_fn(move |cx| self.events.poll_recv(cx))
    }

    /// A token that cancels the run when triggered.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Cancels the run; it ends with `runtime.request.cancelled`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the run to end. Undelivered events are dropped.
    pub async fn wait(self) -> Result<RunResponse, RuntimeError> {
        self.task
            .await
            .map_err(|e| RuntimeError::Internal(e.to_string()))
    }
}

impl Kernel {
    /// Assembles a kernel.
    pub fn new(parts: KernelParts) -> Self {
        let runtime = &parts.workspace.runtime;
        let redactor = Arc::new(Redactor::from_env(&parts.workspace.env));
        let narrator = Arc::new(Narrator::new(&runtime.progress.narration));
        let permits = Arc::new(Semaphore::new(runtime.limits.max_concurrent_runs as usize));
        Self {
            inner: Arc::new(Inner {
                parts,
                redactor,
                narrator,
                permits,
                active: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The compiled workspace.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.inner.parts.workspace
    }

    /// The run store.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.inner.parts.store
    }

    /// The tool gateway.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.inner.parts.gateway
    }

    /// Starts a run. The run is recorded before this returns; its events flow to the handle.
    pub async fn request(&self, options: RequestOptions) -> Result<RunHandle, RuntimeError> {
        let workspace = &self.inner.parts.workspace;
        let agent_name = match options.agent.as_deref().or(workspace.default_agent()) {
            Some(name) => name.to_owned(),
            None => return Err(RuntimeError::NoDefaultAgent),
        };
        let Some(agent) = workspace.agents.get(&agent_name).cloned() else {
            return Err(RuntimeError::UnknownAgent {
                name: agent_name,
                available: workspace
                    .agents
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let provider = match self.inner.parts.models.get(&agent.model) {
            Some(Ok(provider)) => provider.clone(),
            Some(Err(message)) => {
                return Err(RuntimeError::ModelUnavailable {
                    agent: agent_name,
                    model: agent.model.clone(),
                    message: message.clone(),
                });
            }
            None => {
                return Err(RuntimeError::ModelUnavailable {
                    agent: agent_name,
                    model: agent.model.clone(),
                    message: "no provider is configured for it".into(),
                });
            }
        };
        let stream = workspace
            .models
            .get(&agent.model)
            .is_none_or(|model| model.stream);
        let request_id = RequestId::generate();
        let record = RunRecord::new(
            request_id.clone(),
            options.session_id.clone(),
            agent_name.clone(),
            options.input.clone(),
        );
        let store = self.inner.parts.store.clone();
        store.create_run(&record).await?;

        let (tx, rx) = mpsc::unbounded_channel();
        let emitter = Emitter::new(
            request_id.clone(),
            options.session_id,
            agent_name,
            store.clone(),
            self.inner.redactor.clone(),
            self.inner.narrator.clone(),
            Some(tx),
        );
        let run = AgentRun::new(
            emitter,
            provider,
            self.inner.parts.gateway.clone(),
            store,
            workspace.clone(),
            agent,
            stream,
            record,
        );
        let cancel = CancellationToken::new();
        self.track(&request_id, &cancel);
        let permits = self.inner.permits.clone();
        let kernel = self.clone();
        let token = cancel.clone();
        let id = request_id.clone();
        let task = tokio::spawn(async move {
            // Waiting for a slot is part of the run: cancelling while queued still records it.
            let permit = tokio::select! {
                permit = permits.acquire_owned() => permit.ok(),
                _ = token.cancelled() => None,
            };
            let response = agent_loop::execute(run, token).await;
            drop(permit);
            kernel.untrack(&id);
            response
        });
        Ok(RunHandle {
            request_id,
            events: rx,
            cancel,
            task,
        })
    }

    /// Cancels an active run. Returns whether a run with that id was active.
    pub fn cancel(&self, id: &RequestId) -> bool {
        let active = match self.inner.active.lock() {
            Ok(active) => active,
            Err(poisoned) => poisoned.into_inner(),
        };
        match active.get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// One run's record.
    pub async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, RuntimeError> {
        Ok(self.inner.parts.store.get_run(id).await?)
    }

    /// Runs, newest first.
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, RuntimeError> {
        Ok(self.inner.parts.store.list_runs(filter).await?)
    }

    /// A run's stored events after `seq`.
    pub async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, RuntimeError> {
        Ok(self.inner.parts.store.events(id, after).await?)
    }

    fn track(&self, id: &RequestId, token: &CancellationToken) {
        let mut active = match self.inner.active.lock() {
            Ok(active) => active,
            Err(poisoned) => poisoned.into_inner(),
        };
        active.insert(id.clone(), token.clone());
    }

    fn untrack(&self, id: &RequestId) {
        let mut active = match self.inner.active.lock() {
            Ok(active) => active,
            Err(poisoned) => poisoned.into_inner(),
        };
        active.remove(id);
    }
}
