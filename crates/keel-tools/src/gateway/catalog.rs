//! The gateway's registry: the tools fixed when the runtime is built, and the tools that
//! sources (MCP servers) publish while it runs, swapped atomically under one lock.
//!
//! A caller takes a [`Snapshot`] and works on it: a list that changes mid-call (a server's
//! `tools/list_changed`) never changes a call already being checked. An agent's inventory may
//! name source tools by glob (`mcp__files__*`); [`expand`] resolves the globs against a
//! snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;
use keel_types::{Tool, ToolSpec};

use super::GatewayError;
use crate::policy::glob_match;

/// A tool with its compiled argument schema.
pub(super) struct Registered {
    pub(super) tool: Arc<dyn Tool>,
    pub(super) validator: jsonschema::Validator,
}

impl Registered {
    pub(super) fn compile(tool: Arc<dyn Tool>) -> Result<Self, GatewayError> {
        let spec = tool.spec();
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&spec.parameters)
            .map_err(|e| GatewayError::InvalidSchema {
                tool: spec.name.clone(),
                message: e.to_string(),
            })?;
        Ok(Self { tool, validator })
    }
}

/// Every registered tool by name, as of one moment.
pub(super) type Snapshot = Arc<HashMap<String, Arc<Registered>>>;

/// The registry. Clones share it: a source keeps one to publish its tools.
#[derive(Clone, Default)]
pub struct Catalog {
    tools: Arc<RwLock<Snapshot>>,
    specs: Arc<Mutex<SpecLists>>,
}

/// The spec lists made from one snapshot, by inventory: every round of every run of an agent
/// shows the model the same list, so it is made once per agent until the tools change.
#[derive(Default)]
struct SpecLists {
    /// The snapshot the lists were made from (held, so its address stays its own).
    snapshot: Option<Snapshot>,
    lists: HashMap<Vec<String>, Arc<[ToolSpec]>>,
}

/// How many inventories' lists are kept before they are made afresh.
const SPEC_LISTS_KEPT: usize = 256;

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.snapshot();
        let mut names: Vec<_> = snapshot.keys().collect();
        names.sort();
        f.debug_tuple("Catalog").field(&names).finish()
    }
}

impl Catalog {
    pub(super) fn new(tools: HashMap<String, Arc<Registered>>) -> Self {
        Self {
            tools: Arc::new(RwLock::new(Arc::new(tools))),
            specs: Arc::default(),
        }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let guard = self
            .tools
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.clone()
    }

    /// The specs of `inventory`'s tools in `snapshot` (made by `make` the first time a
    /// snapshot is asked for an inventory), shared.
    pub(super) fn spec_list(
        &self,
        snapshot: &Snapshot,
        inventory: &[String],
        make: impl FnOnce() -> Vec<ToolSpec>,
    ) -> Arc<[ToolSpec]> {
        let mut specs = self.specs.lock().unwrap_or_else(PoisonError::into_inner);
        let current = specs
            .snapshot
            .as_ref()
            .is_some_and(|held| Arc::ptr_eq(held, snapshot));
        if !current || specs.lists.len() >= SPEC_LISTS_KEPT {
            specs.snapshot = Some(snapshot.clone());
            specs.lists.clear();
        }
        if let Some(list) = specs.lists.get(inventory) {
            return list.clone();
        }
        let list: Arc<[ToolSpec]> = make().into();
        specs.lists.insert(inventory.to_vec(), list.clone());
        list
    }

    /// Replaces every tool whose name starts with `prefix` by `tools` (all of which must
    /// start with it), in one swap. A tool with an invalid schema, a name outside the prefix
    /// or a name given twice is left out; the errors say which and why.
    pub fn publish(&self, prefix: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<GatewayError> {
        let mut errors = Vec::new();
        let mut fresh: Vec<(String, Arc<Registered>)> = Vec::with_capacity(tools.len());
        for tool in tools {
            let name = tool.spec().name.clone();
            if !name.starts_with(prefix) {
                errors.push(GatewayError::OutsidePrefix {
                    tool: name,
                    prefix: prefix.to_owned(),
                });
                continue;
            }
            if fresh.iter().any(|(n, _)| *n == name) {
                errors.push(GatewayError::Duplicate(name));
                continue;
            }
            match Registered::compile(tool) {
                Ok(registered) => fresh.push((name, Arc::new(registered))),
                Err(error) => errors.push(error),
            }
        }
        let mut guard = self
            .tools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut next: HashMap<String, Arc<Registered>> = guard
            .iter()
            .filter(|(name, _)| !name.starts_with(prefix))
            .map(|(name, registered)| (name.clone(), registered.clone()))
            .collect();
        next.extend(fresh);
        *guard = Arc::new(next);
        errors
    }

    /// The names of the registered tools that start with `prefix`, sorted.
    pub fn names_with_prefix(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .snapshot()
            .keys()
            .filter(|name| name.starts_with(prefix))
            .cloned()
            .collect();
        names.sort();
        names
    }
}

/// A source of tools discovered while the runtime runs (an MCP server). Its tools all start
/// with [`ToolSource::prefix`]; it publishes them into the gateway's [`Catalog`].
#[async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// The prefix of every tool name this source publishes, e.g. `mcp__files__`.
    fn prefix(&self) -> &str;

    /// Waits until the source has settled: its tools are published, or it failed (bounded by
    /// the source's own startup timeout). Starts the source if it has not started yet.
    async fn settle(&self);

    /// Why the source's tools cannot be called now, if they cannot.
    fn unavailable(&self) -> Option<String>;

    /// What happened to the source (started, down, restarting…) since the last call, each
    /// reported once: the runtime records them in the run that settles the source next.
    fn take_lifecycle(&self) -> Vec<SourceEvent> {
        Vec::new()
    }
}

/// A change in the life of a tool source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEvent {
    /// The source's name (an MCP server's document name).
    pub source: String,
    /// What happened.
    pub kind: keel_types::SourceLifecycle,
    /// When, RFC 3339.
    pub at: String,
    pub detail: Option<String>,
}

/// Whether an inventory entry is a glob rather than a tool name.
pub(super) fn is_glob(entry: &str) -> bool {
    entry.contains(['*', '?'])
}

/// Whether `name` is listed by `inventory`, by name or by glob.
pub(super) fn listed(inventory: &[String], name: &str) -> bool {
    inventory
        .iter()
        .any(|entry| entry == name || (is_glob(entry) && glob_match(entry, name)))
}

/// The inventory with its globs resolved against `snapshot`: names in list order, each glob
/// replaced by the registered tools it matches (sorted); no name twice.
pub(super) fn expand(inventory: &[String], snapshot: &Snapshot) -> Vec<String> {
    if !inventory.iter().any(|entry| is_glob(entry)) {
        return inventory.to_vec();
    }
    let mut out: Vec<String> = Vec::with_capacity(inventory.len());
    for entry in inventory {
        if !is_glob(entry) {
            if !out.contains(entry) {
                out.push(entry.clone());
            }
            continue;
        }
        let mut matched: Vec<&String> = snapshot
            .keys()
            .filter(|name| glob_match(entry, name))
            .collect();
        matched.sort();
        for name in matched {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
    }
    out
}
