//! Keel's SDK: embed the runtime in a Rust program.
//!
//! ```no_run
//! # async fn demo() -> Result<(), keel::Error> {
//! let runtime = keel::Runtime::builder().workspace("examples/quickstart").build()?;
//! let mut run = runtime.request(keel::RequestOptions {
//!     input: "What is in this workspace?".into(),
//!     ..Default::default()
//! }).await?;
//! while let Some(event) = run.next_event().await {
//!     println!("{}", event.type_name());
//! }
//! let response = run.wait().await?;
//! # Ok(()) }
//! ```
//!
//! [`RuntimeBuilder`] assembles the parts — the workspace, model providers (built from the
//! workspace's `Model` documents, or injected), tools (built-ins, the workspace's command tools,
//! or injected Rust tools, and the tools of its `McpServer`s, which start when a run first
//! needs them: [`Runtime::mcp_servers`], `docs/mcp.md`) and the run store — into a
//! [`Runtime`].
//!
//! Features, both on by default: `sqlite` gives the default stores (`SqliteStore` and
//! `FsArtifacts` of `keel-store`, under the workspace's `.keel/`); without it the builder needs
//! [`RuntimeBuilder::store`] and [`RuntimeBuilder::artifacts`] and otherwise fails with
//! [`Error::NoStore`]. `http-tools` gives the HTTP client tools (`http_fetch`, declared `http`
//! tools, `http` hook handlers); without it those tools and hooks fail every call saying why
//! (a hook's failure is settled by its `onError`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

// What an embedder needs, named one by one: this list is the SDK's promise
// (ARCHITECTURE.md, "Compatibility promises"). `tests/it/public_api.rs` snapshots it, so a
// change to it is a reviewed diff. The other crates' items stay internal.

// Running requests: the runtime's answers and handles.
pub use keel_runtime::memory::{
    Draft as MemoryDraft, MaintenanceReport, MaintenanceRequest, MemoryService,
};
pub use keel_runtime::narrator::Narrator;
pub use keel_runtime::subagents::{RunTree, run_tree};
/// A run's spans, computed from its events (`docs/observability.md`).
pub use keel_runtime::trace;

/// Exports what this process's OTLP exporters have queued, waiting at most `deadline` (a
/// program about to exit calls it; without the `otlp` feature it does nothing).
pub fn flush_telemetry(deadline: std::time::Duration) {
    #[cfg(feature = "otlp")]
    telemetry::flush_all(deadline);
    #[cfg(not(feature = "otlp"))]
    let _ = deadline;
}
pub use keel_runtime::usage::{UsageBy, UsageRow, usage_by, usage_grouped};
pub use keel_runtime::{
    Approvals, Divergence, Memory, Replica, RequestOptions, RunHandle, RunResponse, Runs,
    RuntimeError, Sessions, ShutdownReport, Skills, TaskRequest, Tasks, Tools,
};
pub use keel_tools::gateway::GatewayError;
pub use keel_tools::policy::PolicyVerdict;
pub use models::ModelCheck;

// The workspace as loaded.
pub use keel_workspace::skills::SkillSet;
pub use keel_workspace::{Diagnostic, LoadError, LoadOptions, WorkflowSpec, Workspace};

// Records: runs, sessions, messages, approvals, tasks, artifacts, memory, skill candidates.
pub use keel_types::cost::{Amount, Cost, Currency, Pricing};
pub use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, ArtifactRecord, CandidateStatus, ErrorCode,
    ErrorInfo, FinishReason, InvalidSessionId, MemoryCandidate, MemoryFilter, MemoryHit,
    MemoryKind, MemoryMerge, MemoryRecord, MemorySource, MemoryStatus, MemoryUpdate, Message,
    ModelParams, PermissionMode, PolicyDecision, Provenance, RequestId, Role, RunCursor, RunFilter,
    RunLinks, RunRecord, RunStatus, SessionId, SessionMessage, SessionOwner, SessionRecord,
    SkillCandidate, StoreHealth, TaskDecision, TaskHook, TaskRecord, TaskStatus, Thinking,
    ToolCall, ToolSpec, ToolStats, UnknownName, Usage,
};

// Events: the event contract (docs/events.md) and every type its payloads carry.
pub use keel_types::{
    AdapterEvent, Event, EventId, EventPayload, GuardDecision, HookEvent, Issue, MemoryAction,
    ModelStopReason, NATIVE_ADAPTER, NodeCompleted, NodeFailed, NodeKey, NodeSkipped, NodeStarted,
    PhaseEvent, PromptSection, Repair, SkillReason, SourceLifecycle, WorkflowCompleted,
    WorkflowFailed, WorkflowStarted, WriteDecision,
};

// Ports: what an embedder implements to give the runtime its own models, tools, stores,
// observers and hooks.
pub use keel_types::{
    ApprovalStore, ArtifactStore, Attachment, BoxStream, Claimed, Cluster, ClusterStatus, Embedder,
    EventObserver, Lease, MemoryStore, ModelError, ModelEvent, ModelProvider, ModelRequest,
    ModelStream, ProgressSink, RunLog, RunStore, SeenFiles, SessionStore, Signal, SignalSink,
    SkillCandidateStore, StoreError, TaskStore, TextFiles, Tool, ToolContext, ToolError,
    ToolOutput, ToolProgress,
};

/// Hooks written in Rust ([`RuntimeBuilder::hook`]): what they implement and exchange.
pub mod hooks {
    pub use keel_tools::hooks::{
        DEFAULT_TIMEOUT, HookError, HookInput, HookOutcome, InProcessHook, PermissionDecision,
    };
    pub use keel_workspace::HookOnError;
}

/// The OS sandbox of the processes Keel starts: what this machine can enforce, and a
/// workspace's profiles as it would enforce them (`keel doctor`).
pub mod sandbox {
    pub use keel_tools::sandbox::{Machine, Profile, Sandboxes, on_path};
}

// The workspace's MCP servers, as the runtime reports them.
pub use keel_mcp::client::{
    HubReload, LifecycleEvent, McpError, McpHub, PromptArgument, PromptInfo, ResourceInfo,
    ServerState, ServerStatus,
};
// This crate's own: the builder's reload report and the default stores' settings.
#[cfg(feature = "sqlite")]
pub use keel_store::MirrorLayout;
#[cfg(feature = "postgres")]
pub use keel_store::PgOptions;
pub use reload::ReloadReport;
#[cfg(feature = "sqlite")]
pub use stores::mirror_layout;
#[cfg(feature = "postgres")]
pub use stores::postgres_options;

use hooks::InProcessHook;
use keel_runtime::{Kernel, KernelParts};

mod cluster;
pub mod eval;
pub mod gateway_eval;
mod models;
mod reload;
mod stores;
#[cfg(feature = "otlp")]
pub mod telemetry;
mod workflows;

/// Why the runtime could not be assembled or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workspace failed to load (every problem is listed).
    #[error(transparent)]
    Workspace(#[from] LoadError),
    /// The builder was not given what it needs.
    #[error("invalid runtime configuration: {0}")]
    InvalidInput(String),
    /// A tool could not be registered.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The store could not be opened or failed.
    #[error(transparent)]
    Store(#[from] keel_types::StoreError),
    /// A runtime operation failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// No store of this kind (`run store`, `artifact store`) was given, and this build has no
    /// default one (the `sqlite` feature is off); the second field names the builder method.
    #[error("no {0} given, and this build has no default one (feature `sqlite`): call .{1}(..)")]
    NoStore(&'static str, &'static str),
}

/// Assembles a [`Runtime`].
#[derive(Default)]
pub struct RuntimeBuilder {
    root: Option<PathBuf>,
    workspace: Option<Workspace>,
    options: Option<LoadOptions>,
    models: HashMap<String, Arc<dyn ModelProvider>>,
    tools: Vec<Arc<dyn Tool>>,
    store: Option<Arc<dyn RunStore>>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    hooks: Vec<Arc<dyn InProcessHook>>,
    observers: Vec<Arc<dyn EventObserver>>,
    memory_store: Option<Arc<dyn MemoryStore>>,
    embedders: BTreeMap<String, Arc<dyn Embedder>>,
}

impl RuntimeBuilder {
    /// Uses this store for long-term memory (default: the workspace's SQLite store; needed
    /// with an injected run store when the workspace declares `Memory` documents).
    pub fn memory_store(mut self, store: Arc<dyn MemoryStore>) -> Self {
        self.memory_store = Some(store);
        self
    }

    /// Uses this embeddings model for the `Model` document `name` (instead of its endpoint).
    pub fn embedder(mut self, name: impl Into<String>, embedder: Arc<dyn Embedder>) -> Self {
        self.embedders.insert(name.into(), embedder);
        self
    }

    /// The workspace folder to load.
    pub fn workspace(mut self, root: impl AsRef<Path>) -> Self {
        self.root = Some(root.as_ref().to_path_buf());
        self
    }

    /// An already loaded workspace (overrides [`Self::workspace`]).
    pub fn loaded_workspace(mut self, workspace: Workspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// How to load the workspace (environment, overlays). Default: the process environment
    /// and `KEEL_CONFIG_PATHS`.
    pub fn load_options(mut self, options: LoadOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Uses `provider` for the workspace's `Model` document named `model`, instead of building
    /// one from the document.
    pub fn model_provider(
        mut self,
        model: impl Into<String>,
        provider: Arc<dyn ModelProvider>,
    ) -> Self {
        self.models.insert(model.into(), provider);
        self
    }

    /// Registers a tool implemented in Rust. Agents list it by its spec's name; it replaces a
    /// built-in or declared tool of the same name.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Uses this run store instead of the workspace's default.
    pub fn store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Adds a hook written in Rust. It obeys the hook rules as a declared hook does: it runs
    /// after the workspace's hooks of its event, in the order hooks are added here, within its
    /// [`InProcessHook::timeout`], and a failure is settled by its [`InProcessHook::on_error`].
    pub fn hook(mut self, hook: Arc<dyn InProcessHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Adds an observer of every stored event of every run this runtime executes (may be
    /// called several times). It is called once per event, in `seq` order per run, right
    /// after the event is stored — whether or not anyone follows the run — from the run's
    /// delivery path: keep it quick and non-blocking.
    pub fn observer(mut self, observer: Arc<dyn EventObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Uses this artifact store instead of the workspace's `.keel/artifacts`.
    pub fn artifacts(mut self, artifacts: Arc<dyn ArtifactStore>) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    /// Loads the workspace and assembles the runtime. Needs a Tokio runtime only when runs
    /// start, not here.
    pub fn build(self) -> Result<Runtime, Error> {
        let mut options = self.options.unwrap_or_else(LoadOptions::from_process_env);
        // Agents may list the tools this program injects.
        options
            .provided_tools
            .extend(self.tools.iter().map(|t| t.spec().name.clone()));
        let workspace = match (self.workspace, self.root) {
            (Some(workspace), _) => workspace,
            (None, Some(root)) => Workspace::load_with(&root, &options)?,
            (None, None) => {
                return Err(Error::InvalidInput(
                    "no workspace given: call .workspace(path) or .loaded_workspace(ws)".into(),
                ));
            }
        };
        let workspace = Arc::new(workspace);
        let defaults = match &self.store {
            Some(_) => None,
            None => Some(stores::default_store(&workspace)?),
        };
        let (store, default_memory) = match (self.store, &defaults) {
            (Some(store), _) => (store, None),
            (None, Some(defaults)) => (defaults.runs.clone(), defaults.memory.clone()),
            (None, None) => return Err(Error::NoStore("run store", "store")),
        };
        let recipe = reload::Recipe {
            root: workspace.root.clone(),
            options,
            models: self.models,
            tools: self.tools,
            embedders: self.embedders,
            memory_store: self.memory_store.or(default_memory),
            store: store.clone(),
            lock: tokio::sync::Mutex::new(()),
        };
        let assembled = reload::assemble(&recipe, &workspace, None)?;
        let artifacts = match self.artifacts {
            Some(artifacts) => artifacts,
            None => stores::default_artifacts(&workspace, defaults.as_ref())?,
        };
        let digest = keel_runtime::workspace_digest(&workspace);
        #[cfg(feature = "otlp")]
        let (observers, telemetry) = {
            let mut observers = self.observers;
            let telemetry = match telemetry::OtlpConfig::resolve(&workspace.runtime.observability) {
                Some(config) => {
                    let telemetry = telemetry::Telemetry::start(&config)?;
                    observers.push(telemetry.clone());
                    Some(telemetry)
                }
                None => None,
            };
            (observers, telemetry)
        };
        #[cfg(not(feature = "otlp"))]
        let observers = self.observers;
        let kernel = Kernel::new(KernelParts {
            workspace: workspace.clone(),
            models: assembled.models,
            gateway: assembled.gateway,
            store,
            artifacts,
            hooks: self.hooks,
            observers,
            memory: assembled.memory,
            keep: Some(Arc::new(assembled.mcp.clone())),
            adapters: keel_runtime::adapter::Adapters {
                process: Some(Arc::new(keel_adapters::ProcessAdapter::default())),
                // Without an HTTP client (which cannot be built only on a broken TLS set-up)
                // remote agents' runs fail saying so; nothing else needs it.
                remote: keel_adapters::A2aClient::new()
                    .map(|client| Arc::new(client) as Arc<dyn keel_runtime::adapter::RemoteAgents>)
                    .ok(),
            },
        });
        Ok(Runtime {
            runs: kernel.runs(),
            sessions: kernel.sessions(),
            approvals: kernel.approvals(),
            tasks: kernel.tasks(),
            tools: kernel.tools(),
            memory: kernel.memory(),
            skills: kernel.skills(),
            kernel,
            loaded: Arc::new(std::sync::RwLock::new(Arc::new(reload::Loaded {
                workspace,
                mcp: assembled.mcp,
                loaded_at: keel_types::now_rfc3339().into(),
                unavailable_models: Arc::new(assembled.unavailable_models),
                digest,
            }))),
            recipe: Arc::new(recipe),
            #[cfg(feature = "otlp")]
            telemetry,
        })
    }
}

/// An assembled runtime. Cheap to clone; clones share runs and state.
#[derive(Clone)]
pub struct Runtime {
    kernel: Kernel,
    /// The services the SDK hands out, each over the same kernel.
    runs: Runs,
    sessions: Sessions,
    approvals: Approvals,
    tasks: Tasks,
    tools: Tools,
    memory: Memory,
    skills: Skills,
    /// The current workspace and what its load gave besides the kernel's parts (its MCP
    /// servers, when, its digest); swapped by a reload.
    loaded: Arc<std::sync::RwLock<Arc<reload::Loaded>>>,
    /// How to load and assemble the workspace again.
    recipe: Arc<reload::Recipe>,
    /// The OTLP exporter, when the workspace (or the environment) configures one.
    #[cfg(feature = "otlp")]
    telemetry: Option<Arc<telemetry::Telemetry>>,
}

impl Runtime {
    /// Starts assembling a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The stored runs: records, events, counts, the runs live here, divergence, artifacts,
    /// the store's health, recovery after a crash, pruning.
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Sessions: list, show, transcript, end (the `SessionEnd` hooks), delete.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Approvals: the human decisions runs and tasks wait for — list, show, decide.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// Tasks: staged tool calls — create (checked by the gateway, policy and the
    /// `PreToolUse` hooks), get, list, update, run, delete.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// The tools: what an agent may call and how each behaves, policy's decision on a call,
    /// usage statistics, and direct calls (a tool called without a model, as a run).
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// Long-term memory (`docs/workspace.md#memory`), the operator's side: the workspace's
    /// memory service (list, search, add, update, delete, history, candidates, export,
    /// import) and maintenance as a recorded run. Runs use memory on their own (recall,
    /// `memory_search`, `remember`).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Skills: the latest scan, the task that keeps it current, and the skill candidates
    /// agents propose (list, show, approve, reject).
    pub fn skills(&self) -> &Skills {
        &self.skills
    }

    /// The compiled workspace (the one loaded last: a reload swaps it).
    pub fn workspace(&self) -> Arc<Workspace> {
        self.loaded().workspace.clone()
    }

    /// When this runtime loaded its workspace (or was given a loaded one, or last reloaded
    /// it), RFC 3339.
    pub fn loaded_at(&self) -> Arc<str> {
        self.loaded().loaded_at.clone()
    }

    /// The digest of the loaded workspace's compiled documents (`sha256:…`), which a reload
    /// records and `/api/health` shows.
    pub fn workspace_digest(&self) -> String {
        self.loaded().digest.clone()
    }

    /// The workspace's models whose provider could not be built (e.g. an unset API key
    /// variable), with why; requests to their agents fail. Names no secret values.
    pub fn unavailable_models(&self) -> Arc<BTreeMap<String, String>> {
        self.loaded().unavailable_models.clone()
    }

    /// Starts a request; the returned handle streams its events and yields its response.
    pub async fn request(&self, options: RequestOptions) -> Result<RunHandle, Error> {
        self.starting(self.kernel.request(options)).await
    }

    /// Whether a shutdown has begun ([`Self::shutdown`]): no new work is taken.
    pub fn is_shutting_down(&self) -> bool {
        self.kernel.accepting().is_err()
    }

    /// Starts a new run with the agent, input, session, supplied history and mode of ended run
    /// `id` (`links.retryOf = id`), created by `owner`.
    ///
    /// Errors: [`RuntimeError::NotFound`] for an unknown id, [`RuntimeError::Conflict`]
    /// while the run has not ended, [`RuntimeError::InvalidInput`] for a direct tool call,
    /// [`RuntimeError::ShuttingDown`] after [`Self::shutdown`].
    pub async fn retry(&self, id: &RequestId, owner: Option<String>) -> Result<RunHandle, Error> {
        self.starting(self.kernel.retry(id, owner)).await
    }

    /// Stops taking work (every operation that starts a run then fails with
    /// [`RuntimeError::ShuttingDown`]), waits up to `grace` for the live runs to end, then
    /// stops the rest: they end `interrupted` (error code `shutdown`, event
    /// `runtime.request.interrupted`) and can be resumed. Returns once every run's end is
    /// stored.
    pub async fn shutdown(&self, grace: std::time::Duration) -> ShutdownReport {
        let report = self.kernel.shutdown(grace).await;
        self.loaded().mcp.shutdown().await;
        #[cfg(feature = "otlp")]
        if let Some(telemetry) = &self.telemetry {
            // The runs' last spans reach the collector before the process ends (bounded: a
            // dead collector does not hold the shutdown).
            telemetry.flush(std::time::Duration::from_secs(2)).await;
        }
        report
    }

    /// The OTLP exporter's counts (spans exported and dropped), when it exports.
    #[cfg(feature = "otlp")]
    pub fn telemetry(&self) -> Option<&telemetry::TelemetryStats> {
        self.telemetry.as_deref().map(telemetry::Telemetry::stats)
    }

    /// The workspace's MCP servers: their state, tools and lifecycle history.
    pub fn mcp_servers(&self) -> Vec<ServerStatus> {
        self.loaded().mcp.status()
    }

    /// Starts the workspace's MCP servers now rather than when a run first needs their tools
    /// (`keel serve` does at boot); returns at once. Needs a Tokio runtime.
    pub fn start_mcp(&self) {
        self.loaded().mcp.start();
    }

    /// Starts the workspace's MCP servers and waits until each has listed its tools or
    /// failed (each within its `startupTimeout`), so [`Tools::specs`] shows their tools.
    pub async fn settle_mcp(&self) {
        self.loaded().mcp.settle().await;
    }

    /// The prompts MCP server `name` offers (starting it if needed).
    pub async fn mcp_prompts(&self, name: &str) -> Result<Vec<PromptInfo>, McpError> {
        self.loaded().mcp.prompts(name).await
    }

    /// The resources MCP server `name` lists (starting it if needed).
    pub async fn mcp_resources(&self, name: &str) -> Result<Vec<ResourceInfo>, McpError> {
        self.loaded().mcp.resources(name).await
    }

    /// Stops the MCP servers (a stdio server's whole process group). [`Self::shutdown`] does
    /// this too; a program that only lists tools calls it before it exits.
    pub async fn stop_mcp(&self) {
        self.loaded().mcp.shutdown().await;
    }

    /// Continues an interrupted run from its log.
    pub async fn resume(&self, id: &RequestId) -> Result<RunHandle, Error> {
        self.starting(self.kernel.resume(id)).await
    }

    /// A new run continuing a copy of run `id`'s first `at_seq` events.
    pub async fn fork(&self, id: &RequestId, at_seq: u64) -> Result<RunHandle, Error> {
        self.starting(self.kernel.fork(id, at_seq)).await
    }

    /// Re-executes run `id` with its recorded model answers (no model is called).
    pub async fn replay(&self, id: &RequestId) -> Result<RunHandle, Error> {
        self.starting(self.kernel.replay(id)).await
    }

    /// Starts a run: every way in keeps the skills current first (the watcher starts once
    /// per runtime), so a run started by resume, fork, replay or retry sees new and edited
    /// skills as a request's does.
    async fn starting(
        &self,
        start: impl Future<Output = Result<RunHandle, RuntimeError>>,
    ) -> Result<RunHandle, Error> {
        self.skills.watch();
        Ok(start.await?)
    }
}
