//! Reloading the workspace: an explicit operation that swaps the compiled workspace and what
//! is built from it (providers, gateway, governance, memory, the redactor) in one step
//! (`docs/workspace.md#reloading-the-workspace`). A run holds the snapshot it started on until
//! it ends; runs started after the swap use the new one. The store, the artifacts, the run
//! slots, the live runs and the observers are the kernel's own and stay.
//!
//! A reload is recorded as a run of its own (agent `workspace`): `runtime.request.started`,
//! `runtime.workspace.reloaded {digest, changes}`, `runtime.request.completed`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use keel_tools::gateway::Gateway;
use keel_types::{
    ArtifactStore, EventPayload, FinishReason, ModelProvider, RequestId, RunRecord, RunStatus,
    RunStore, Usage,
};
use keel_workspace::Workspace;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::children::KernelRef;
use super::{Inner, Kernel};
use crate::RuntimeError;
use crate::agent_loop::Services;
use crate::emitter::{Emitter, Observers, Pipeline};
use crate::governance::Governance;
use crate::memory::MemoryService;
use crate::narrator::Narrator;
use crate::redact::Redactor;
use crate::skills::SkillCache;

/// The agent name of the runs that record a reload.
pub const RELOAD_AGENT: &str = "workspace";

/// What a workspace snapshot is built from.
pub struct ReloadParts {
    pub workspace: Arc<Workspace>,
    /// Providers by `Model` document name; an `Err` explains why that model is unusable.
    pub models: HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
    pub gateway: Arc<Gateway>,
    /// Long-term memory, when the workspace declares `Memory` documents.
    pub memory: Option<Arc<MemoryService>>,
    /// Held for as long as a run of this snapshot lives (e.g. the MCP servers its tools use).
    pub keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// One loaded workspace and what is built from it. A run holds the one it started on until
/// it ends: a reload changes what later runs use, never a run in flight.
pub(crate) struct Current {
    /// What every run shares: workspace, gateway, store, artifacts, governance.
    pub(super) services: Arc<Services>,
    /// Providers by `Model` document name; an `Err` explains why that model is unusable.
    pub(super) models: HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
    /// Where every run's events go (the redactor and narrator are the workspace's).
    pub(super) pipeline: Pipeline,
    /// Set once the task keeping this workspace's skills current has started.
    pub(super) skill_watch: std::sync::Once,
}

/// What every snapshot of a kernel shares.
pub(super) struct Base<'a> {
    pub(super) store: &'a Arc<dyn RunStore>,
    /// The same store, whose redactor each snapshot sets.
    pub(super) redacting: &'a crate::redacting_store::RedactingStore,
    pub(super) artifacts: &'a Arc<dyn ArtifactStore>,
    pub(super) hooks: &'a [Arc<dyn keel_tools::hooks::InProcessHook>],
    pub(super) adapters: &'a crate::adapter::Adapters,
    pub(super) observers: &'a Observers,
    pub(super) decisions: &'a Arc<tokio::sync::Notify>,
    pub(super) kernel: Weak<Inner>,
}

/// Builds a snapshot from its parts.
pub(super) fn compile(base: &Base<'_>, parts: ReloadParts) -> Current {
    let ReloadParts {
        workspace,
        models,
        gateway,
        memory,
        keep,
    } = parts;
    let fallbacks = fallbacks_of(&workspace, &models);
    let providers = models
        .iter()
        .filter_map(|(name, built)| Some((name.clone(), built.as_ref().ok()?.clone())))
        .collect();
    let limiters = workspace
        .models
        .iter()
        .filter_map(|(name, spec)| {
            let limits = spec.limits.as_ref()?;
            Some((
                name.clone(),
                Arc::new(crate::rate_limit::ModelLimiter::new(limits)),
            ))
        })
        .collect();
    let redactor = Arc::new(Redactor::for_workspace(&workspace));
    base.redacting.set_redactor(redactor.clone());
    let pipeline = Pipeline {
        store: base.store.clone(),
        redactor,
        narrator: Arc::new(Narrator::new(&workspace.runtime.progress.narration)),
        observers: base.observers.clone(),
    };
    Current {
        services: Arc::new(Services {
            governance: Governance::new(&workspace, base.hooks.to_vec()),
            workspace,
            gateway,
            store: base.store.clone(),
            artifacts: base.artifacts.clone(),
            skills: SkillCache::default(),
            memory,
            delegate: Arc::new(KernelRef(base.kernel.clone())),
            decisions: base.decisions.clone(),
            _keep: keep,
            adapters: base.adapters.clone(),
            fallbacks,
            limiters,
            providers,
        }),
        models,
        pipeline,
        skill_watch: std::sync::Once::new(),
    }
}

/// Each model's usable fallbacks (`Model.fallbacks`), in order; an unusable one (its
/// provider could not be built) is left out, and said so at load.
fn fallbacks_of(
    workspace: &Workspace,
    models: &HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
) -> HashMap<String, crate::agent_loop::Fallbacks> {
    workspace
        .models
        .iter()
        .filter_map(|(name, spec)| {
            let fallbacks = spec.fallbacks.as_ref()?;
            let chain = fallbacks
                .models()
                .iter()
                .filter_map(|next| match models.get(next) {
                    Some(Ok(provider)) => Some((next.clone(), provider.clone())),
                    _ => {
                        tracing::warn!(model = %name, fallback = %next, "A fallback model is not usable; it is skipped.");
                        None
                    }
                })
                .collect();
            let sticky = fallbacks.sticky();
            Some((name.clone(), crate::agent_loop::Fallbacks { chain, sticky }))
        })
        .collect()
}

impl Kernel {
    /// The workspace snapshot this kernel uses now: its pinned one, else the current one.
    pub(crate) fn current(&self) -> Arc<Current> {
        if let Some(pinned) = &self.pinned {
            return pinned.clone();
        }
        match self.inner.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// A clone that keeps using the current workspace snapshot, so everything one operation
    /// does (resolve the agent, its model, skills, memory, launch) sees the same workspace.
    pub(crate) fn pin(&self) -> Kernel {
        Kernel {
            inner: self.inner.clone(),
            pinned: Some(self.current()),
        }
    }

    /// Swaps in a new workspace and what is built from it: runs started from now on use it,
    /// runs in flight finish on theirs. Returns the workspace it replaced.
    pub fn reload(&self, parts: ReloadParts) -> Arc<Workspace> {
        let inner = &self.inner;
        let base = Base {
            store: &inner.store,
            redacting: &inner.redacting,
            artifacts: &inner.artifacts,
            hooks: &inner.hooks,
            adapters: &inner.adapters,
            observers: &inner.observers,
            decisions: &inner.decisions,
            kernel: Arc::downgrade(inner),
        };
        let next = Arc::new(compile(&base, parts));
        let mut slot = match inner.current.write() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        let before = std::mem::replace(&mut *slot, next);
        before.services.workspace.clone()
    }

    /// Records a reload as a run of its own: `runtime.workspace.reloaded {digest, changes}`
    /// between the usual opening and terminal events. Returns the run's id.
    pub async fn record_reload(
        &self,
        digest: String,
        changes: Vec<String>,
        owner: Option<String>,
    ) -> Result<RequestId, RuntimeError> {
        let input = format!("reload the workspace ({} change(s))", changes.len());
        let mut record = RunRecord::new(RequestId::generate(), None, RELOAD_AGENT, input);
        record.owner = owner;
        let pipeline = self.pipeline();
        let opening = crate::emitter::opening_event(
            &pipeline,
            &record,
            EventPayload::RequestStarted {
                input: record.input.clone(),
                history: Vec::new(),
                mode: None,
                metadata: BTreeMap::new(),
                params: Default::default(),
                output_schema: None,
                session_owner_overridden: None,
            },
        );
        self.store()
            .create_run_with(&record, std::slice::from_ref(&opening))
            .await?;
        let emitter = Emitter::opened(&pipeline, &record, opening, None);
        let summary = format!("loaded workspace {digest}");
        emitter.emit(EventPayload::WorkspaceReloaded { digest, changes })?;
        emitter
            .emit_durable(EventPayload::RequestCompleted {
                output: summary.clone(),
                value: None,
                finish_reason: FinishReason::Completed,
                usage: Usage::default(),
                steps: 0,
                duration_ms: 0,
            })
            .await?;
        record.status = RunStatus::Completed;
        record.output = Some(summary);
        record.finish_reason = Some(FinishReason::Completed);
        record.ended_at = Some(keel_types::now_rfc3339());
        record.event_count = emitter.count();
        self.store().update_run(&record).await?;
        Ok(record.request_id)
    }
}

/// The documents of a workspace that a digest covers, in a stable order.
#[derive(Serialize)]
struct Documents<'a> {
    runtime: &'a keel_workspace::RuntimeSpec,
    models: &'a BTreeMap<String, keel_workspace::ModelSpec>,
    tools: &'a BTreeMap<String, keel_workspace::ToolSpecDoc>,
    agents: &'a BTreeMap<String, keel_workspace::AgentSpec>,
    policies: &'a BTreeMap<String, keel_workspace::PolicySpec>,
    hooks: &'a [(String, keel_workspace::HookSpec)],
    mcp_servers: &'a BTreeMap<String, keel_workspace::McpServerSpec>,
    memories: &'a BTreeMap<String, keel_workspace::MemorySpec>,
    workflows: &'a BTreeMap<String, keel_workspace::WorkflowSpec>,
}

/// `sha256:<hex>` of a workspace's compiled documents (after overlays and interpolation), so
/// two loads of the same configuration have the same digest.
pub fn workspace_digest(workspace: &Workspace) -> String {
    let documents = Documents {
        runtime: &workspace.runtime,
        models: &workspace.models,
        tools: &workspace.tools,
        agents: &workspace.agents,
        policies: &workspace.policies,
        hooks: &workspace.hooks,
        mcp_servers: &workspace.mcp_servers,
        memories: &workspace.memories,
        workflows: &workspace.workflows,
    };
    let json = serde_json::to_vec(&documents).unwrap_or_default();
    format!("sha256:{:x}", Sha256::digest(&json))
}

/// What differs between two workspaces, one `Kind/name (added|removed|changed)` per document.
pub fn workspace_changes(before: &Workspace, after: &Workspace) -> Vec<String> {
    let mut changes = Vec::new();
    if before.runtime != after.runtime {
        changes.push("Runtime (changed)".to_owned());
    }
    diff("Model", &before.models, &after.models, &mut changes);
    diff("Tool", &before.tools, &after.tools, &mut changes);
    diff("Agent", &before.agents, &after.agents, &mut changes);
    diff("Policy", &before.policies, &after.policies, &mut changes);
    diff("Eval", &before.evals, &after.evals, &mut changes);
    let hooks = |w: &Workspace| -> BTreeMap<String, keel_workspace::HookSpec> {
        w.hooks.iter().cloned().collect()
    };
    diff("Hook", &hooks(before), &hooks(after), &mut changes);
    diff(
        "McpServer",
        &before.mcp_servers,
        &after.mcp_servers,
        &mut changes,
    );
    diff("Memory", &before.memories, &after.memories, &mut changes);
    diff(
        "Workflow",
        &before.workflows,
        &after.workflows,
        &mut changes,
    );
    changes
}

fn diff<T: PartialEq>(
    kind: &str,
    before: &BTreeMap<String, T>,
    after: &BTreeMap<String, T>,
    out: &mut Vec<String>,
) {
    for (name, spec) in before {
        match after.get(name) {
            None => out.push(format!("{kind}/{name} (removed)")),
            Some(now) if now != spec => out.push(format!("{kind}/{name} (changed)")),
            Some(_) => {}
        }
    }
    for name in after.keys().filter(|name| !before.contains_key(*name)) {
        out.push(format!("{kind}/{name} (added)"));
    }
}
