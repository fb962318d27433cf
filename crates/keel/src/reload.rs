//! Assembling a runtime's parts from a loaded workspace, at build and again at a reload
//! (`docs/workspace.md#reloading-the-workspace`): the workspace is loaded and checked first —
//! an invalid one is refused with every error and the old one keeps serving —, then the
//! providers, tools, gateway, memory and MCP servers are built and the kernel swaps them in
//! at once. MCP servers whose document (and environment) did not change keep running; the
//! others start afresh. Runs in flight finish on the workspace they started with.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use keel_mcp::client::HubReload;
use keel_runtime::ReloadParts;
use keel_tools::gateway::Gateway;
use keel_types::{Embedder, MemoryStore, ModelProvider, RequestId, RunStore, Tool};
use keel_workspace::{LoadOptions, Workspace};

use crate::{Error, McpHub, MemoryService, Runtime};

/// How to load and assemble the workspace again: where it is, how it was loaded, and what
/// the program injected.
pub(crate) struct Recipe {
    pub root: PathBuf,
    pub options: LoadOptions,
    pub models: HashMap<String, Arc<dyn ModelProvider>>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub embedders: BTreeMap<String, Arc<dyn Embedder>>,
    pub memory_store: Option<Arc<dyn MemoryStore>>,
    pub store: Arc<dyn RunStore>,
    /// One reload at a time.
    pub lock: tokio::sync::Mutex<()>,
}

/// The current workspace and what its load gave besides the kernel's parts, swapped whole
/// by a reload, so the workspace, its digest and its load time always belong together.
pub(crate) struct Loaded {
    /// The workspace (the one the kernel was given with it).
    pub workspace: Arc<Workspace>,
    /// The workspace's MCP servers.
    pub mcp: McpHub,
    /// When the workspace was loaded, RFC 3339.
    pub loaded_at: Arc<str>,
    /// Models whose provider could not be built, with why.
    pub unavailable_models: Arc<BTreeMap<String, String>>,
    /// `sha256:…` of the compiled documents.
    pub digest: String,
}

/// The parts built from one workspace.
pub(crate) struct Assembled {
    pub models: HashMap<String, Result<Arc<dyn ModelProvider>, String>>,
    pub unavailable_models: BTreeMap<String, String>,
    pub gateway: Arc<Gateway>,
    pub memory: Option<Arc<MemoryService>>,
    pub mcp: McpHub,
    /// With a previous hub: which servers were kept, restarted, removed.
    pub hub: Option<HubReload>,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// The loaded workspace's digest (`sha256:…`).
    pub digest: String,
    /// One `Kind/name (added|removed|changed)` per document that differs; empty when the
    /// workspace did not change (then nothing was swapped or recorded).
    pub changes: Vec<String>,
    /// The run recording `runtime.workspace.reloaded` (none when nothing changed).
    pub run: Option<RequestId>,
    /// MCP servers kept running, restarted (new or changed) and removed.
    pub mcp_kept: Vec<String>,
    pub mcp_restarted: Vec<String>,
    pub mcp_removed: Vec<String>,
}

/// Builds the providers, tools, gateway, memory and MCP servers of `workspace`; with
/// `previous`, the MCP servers that did not change are taken over from it.
pub(crate) fn assemble(
    recipe: &Recipe,
    workspace: &Arc<Workspace>,
    previous: Option<&McpHub>,
) -> Result<Assembled, Error> {
    let mut models: HashMap<String, Result<Arc<dyn ModelProvider>, String>> = HashMap::new();
    for name in workspace.models.keys() {
        let provider = match recipe.models.get(name) {
            Some(provider) => Ok(provider.clone()),
            None => keel_models::provider_for(workspace, name).map_err(|e| e.to_string()),
        };
        models.insert(name.clone(), provider);
    }
    for (name, provider) in &recipe.models {
        models
            .entry(name.clone())
            .or_insert_with(|| Ok(provider.clone()));
    }
    let unavailable_models: BTreeMap<String, String> = models
        .iter()
        .filter_map(|(name, provider)| Some((name.clone(), provider.as_ref().err()?.clone())))
        .collect();
    let memory = memory_service(
        workspace,
        recipe.memory_store.clone(),
        &recipe.store,
        recipe.embedders.clone(),
    )?;
    let mut tools = recipe.tools.clone();
    let proposes = |agent: &keel_workspace::AgentSpec| {
        agent
            .tools
            .iter()
            .any(|t| t == keel_workspace::skills::PROPOSE_SKILL_TOOL)
    };
    if let Some(memory) = &memory {
        tools.push(Arc::new(keel_runtime::memory::MemorySearchTool::new(
            memory.clone(),
        )));
        tools.push(Arc::new(keel_runtime::memory::RememberTool::new(
            memory.clone(),
        )));
    }
    if workspace.agents.values().any(|a| !a.subagents.is_empty()) {
        tools.push(Arc::new(keel_runtime::subagents::TaskTool::new(
            workspace.clone(),
        )));
    }
    if workspace.agents.values().any(proposes) {
        tools.insert(
            0,
            Arc::new(keel_tools::builtin::ProposeSkill::new(
                workspace.clone(),
                recipe.store.clone(),
            )),
        );
    }
    let mut gateway = Gateway::new(assemble_tools(workspace, tools))?;
    if let Some(name) = &workspace.runtime.gateway.repair_model {
        match models.get(name) {
            Some(Ok(provider)) => gateway = gateway.with_repair_model(provider.clone()),
            Some(Err(message)) => {
                return Err(Error::InvalidInput(format!(
                    "the gateway's repair model `{name}` is unavailable: {message}"
                )));
            }
            None => {
                return Err(Error::InvalidInput(format!(
                    "the gateway's repair model `{name}` is not a Model of this workspace"
                )));
            }
        }
    }
    // MCP servers publish their tools into the gateway's catalog once they start (a kept
    // server at once).
    let (mcp, hub) = match previous {
        Some(previous) => {
            let (mcp, report) = previous.reload(workspace, gateway.catalog());
            (mcp, Some(report))
        }
        None => (McpHub::new(workspace, gateway.catalog()), None),
    };
    for source in mcp.sources() {
        gateway = gateway.with_source(source);
    }
    if let Some(tool) = mcp.resource_tool() {
        let name = tool.spec().name.clone();
        if let Some(error) = gateway
            .catalog()
            .publish(&name, vec![tool])
            .into_iter()
            .next()
        {
            return Err(Error::Gateway(error));
        }
    }
    Ok(Assembled {
        models,
        unavailable_models,
        gateway: Arc::new(gateway),
        memory,
        mcp,
        hub,
    })
}

impl Runtime {
    pub(crate) fn loaded(&self) -> Arc<Loaded> {
        match self.loaded.read() {
            Ok(loaded) => loaded.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Loads the workspace again from its folder (with the options it was first loaded
    /// with) and, when it is valid and differs, swaps it in: runs started from now on use
    /// it, runs in flight finish on theirs. The reload is recorded as a run of its own
    /// (`runtime.workspace.reloaded {digest, changes}`, created by `owner`).
    ///
    /// Errors: [`Error::Workspace`] with every problem when the workspace does not load —
    /// nothing changes then; [`Error::InvalidInput`] or [`Error::Gateway`] when its parts
    /// cannot be built (also nothing changes).
    pub async fn reload(&self, owner: Option<String>) -> Result<ReloadReport, Error> {
        let recipe = &self.recipe;
        let _one_at_a_time = recipe.lock.lock().await;
        let root = recipe.root.clone();
        let options = recipe.options.clone();
        let loaded = tokio::task::spawn_blocking(move || Workspace::load_with(&root, &options))
            .await
            .map_err(|e| Error::InvalidInput(format!("the workspace's load stopped: {e}")))??;
        let workspace = Arc::new(loaded);
        let digest = keel_runtime::workspace_digest(&workspace);
        let before = self.loaded();
        let changes = keel_runtime::workspace_changes(&before.workspace, &workspace);
        if digest == before.digest {
            return Ok(ReloadReport {
                digest,
                changes: Vec::new(),
                run: None,
                mcp_kept: before.mcp.status().into_iter().map(|s| s.name).collect(),
                mcp_restarted: Vec::new(),
                mcp_removed: Vec::new(),
            });
        }
        let assembled = assemble(recipe, &workspace, Some(&before.mcp))?;
        self.kernel.reload(ReloadParts {
            workspace: workspace.clone(),
            models: assembled.models,
            gateway: assembled.gateway,
            memory: assembled.memory,
            keep: Some(Arc::new(assembled.mcp.clone())),
        });
        let next = Arc::new(Loaded {
            workspace,
            mcp: assembled.mcp,
            loaded_at: keel_types::now_rfc3339().into(),
            unavailable_models: Arc::new(assembled.unavailable_models),
            digest: digest.clone(),
        });
        match self.loaded.write() {
            Ok(mut slot) => *slot = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        drop(before);
        self.skills.watch();
        let run = self
            .kernel
            .record_reload(digest.clone(), changes.clone(), owner)
            .await?;
        let hub = assembled.hub.unwrap_or_default();
        Ok(ReloadReport {
            digest,
            changes,
            run: Some(run),
            mcp_kept: hub.kept,
            mcp_restarted: hub.restarted,
            mcp_removed: hub.removed,
        })
    }
}

/// The memory of a workspace that declares `Memory` documents: their store and embeddings
/// models (injected, or from the `Model` documents they name).
fn memory_service(
    workspace: &Arc<Workspace>,
    store: Option<Arc<dyn MemoryStore>>,
    runs: &Arc<dyn RunStore>,
    mut embedders: BTreeMap<String, Arc<dyn Embedder>>,
) -> Result<Option<Arc<MemoryService>>, Error> {
    if workspace.memories.is_empty() {
        return Ok(None);
    }
    let Some(store) = store else {
        return Err(Error::NoStore("memory store", "memory_store"));
    };
    for spec in workspace.memories.values() {
        let Some(embeddings) = &spec.embeddings else {
            continue;
        };
        if embedders.contains_key(&embeddings.model) {
            continue;
        }
        let embedder = keel_models::embedder_for(workspace, &embeddings.model).map_err(|e| {
            Error::InvalidInput(format!(
                "the embeddings model `{}` is unavailable: {e}",
                embeddings.model
            ))
        })?;
        embedders.insert(embeddings.model.clone(), embedder);
    }
    Ok(Some(Arc::new(MemoryService::new(
        workspace.clone(),
        store,
        runs.clone(),
        embedders,
    ))))
}

/// Every tool an agent of this workspace could list: built-ins, then the workspace's declared
/// tools, then injected ones (which replace same-named tools).
fn assemble_tools(workspace: &Arc<Workspace>, injected: Vec<Arc<dyn Tool>>) -> Vec<Arc<dyn Tool>> {
    let mut by_name: Vec<(String, Arc<dyn Tool>)> = Vec::new();
    let mut put = |tool: Arc<dyn Tool>| {
        let name = tool.spec().name.clone();
        by_name.retain(|(n, _)| n != &name);
        by_name.push((name, tool));
    };
    let sandboxes = keel_tools::sandbox::Sandboxes::of(workspace);
    for tool in keel_tools::builtin::builtins_in(&workspace.runtime.tools, &sandboxes) {
        put(tool);
    }
    if workspace
        .agents
        .values()
        .any(|agent| !agent.skills.is_empty())
    {
        for tool in keel_tools::builtin::skill_tools(workspace) {
            put(tool);
        }
    }
    for (name, doc) in &workspace.tools {
        put(keel_tools::declared_in(name, doc, workspace));
    }
    for tool in injected {
        put(tool);
    }
    by_name.into_iter().map(|(_, tool)| tool).collect()
}
