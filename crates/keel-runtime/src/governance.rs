//! The compiled governance of a workspace: its policy engine and its hooks, built once per
//! runtime and shared by every run. Which hooks run for an event — declared hooks by event and
//! matcher in declaration order, hooks bound on a tool by name (`hooks.preCall` /
//! `hooks.postCall`), then hooks written in Rust — is decided here; running them, recording
//! them and acting on their answers is a step of the run (`agent_loop/govern.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use keel_tools::hooks::{CompiledHook, InProcessHook};
use keel_tools::policy::PolicyEngine;
use keel_types::HookEvent;
use keel_workspace::{HookOnError, Workspace};

/// Policies and hooks of a workspace, compiled once per runtime.
pub struct Governance {
    policy: PolicyEngine,
    /// Hooks that apply by event and matcher, in declaration order.
    session_hooks: Vec<(CompiledHook, HookOnError)>,
    /// Hooks bound on tools by name (`hooks.preCall` / `hooks.postCall`).
    bound_hooks: BTreeMap<String, (CompiledHook, HookOnError)>,
    /// The names of the hooks bound on each tool to run before it.
    pre_call: HashMap<String, Vec<String>>,
    /// The names of the hooks bound on each tool to run after it.
    post_call: HashMap<String, Vec<String>>,
    /// Hooks written in Rust and given to the SDK; they run after the declared ones.
    in_process: Vec<Arc<dyn InProcessHook>>,
}

impl std::fmt::Debug for Governance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governance")
            .field("session_hooks", &self.session_hooks.len())
            .field("bound_hooks", &self.bound_hooks.len())
            .finish()
    }
}

impl Governance {
    /// Compiles the workspace's policies and hooks. Hooks bound on a tool run only for that
    /// tool; the others run for every matching call.
    pub fn from_workspace(workspace: &Workspace) -> Self {
        Self::new(workspace, Vec::new())
    }

    /// Compiles the workspace's policies and hooks, plus hooks written in Rust (they run
    /// after the declared hooks of the same event; a failing one is recorded as a warning).
    pub fn new(workspace: &Workspace, in_process: Vec<Arc<dyn InProcessHook>>) -> Self {
        let bound: HashSet<&String> = workspace
            .tools
            .values()
            .flat_map(|t| t.hooks.pre_call.iter().chain(&t.hooks.post_call))
            .collect();
        let mut session_hooks = Vec::new();
        let mut bound_hooks = BTreeMap::new();
        for (name, spec) in &workspace.hooks {
            let compiled = match CompiledHook::new(name, spec) {
                Ok(compiled) => compiled,
                Err(error) => {
                    tracing::warn!(hook = %name, %error, "Hook skipped: it does not compile.");
                    continue;
                }
            };
            match bound.contains(name) {
                true => {
                    bound_hooks.insert(name.clone(), (compiled, spec.on_error));
                }
                false => session_hooks.push((compiled, spec.on_error)),
            }
        }
        let bound_on = |names: fn(&keel_workspace::ToolSpecDoc) -> &Vec<String>| {
            workspace
                .tools
                .iter()
                .filter(|(_, tool)| !names(tool).is_empty())
                .map(|(name, tool)| (name.clone(), names(tool).clone()))
                .collect()
        };
        Self {
            policy: PolicyEngine::from_workspace(workspace),
            session_hooks,
            bound_hooks,
            pre_call: bound_on(|tool| &tool.hooks.pre_call),
            post_call: bound_on(|tool| &tool.hooks.post_call),
            in_process,
        }
    }
}

impl Governance {
    /// The policy engine.
    pub fn policy(&self) -> &PolicyEngine {
        &self.policy
    }

    /// The names of the hooks bound on `tool` for `event` (before or after a call).
    fn bound(&self, event: HookEvent, tool: Option<&str>) -> &[String] {
        let by_tool = match event {
            HookEvent::PreToolUse => &self.pre_call,
            HookEvent::PostToolUse => &self.post_call,
            _ => return &[],
        };
        tool.and_then(|tool| by_tool.get(tool))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether any hook runs for `event` (on `tool`, for a tool event), so a run builds no
    /// hook input when none does.
    pub(crate) fn wants(&self, event: HookEvent, tool: Option<&str>) -> bool {
        !self.bound(event, tool).is_empty()
            || self
                .session_hooks
                .iter()
                .any(|(hook, _)| hook.event() == event && hook.matches(tool))
            || self
                .in_process
                .iter()
                .any(|hook| hook.event() == event && hook.matches(tool))
    }

    /// The declared hooks that run for `event` (on `tool`), in order: those that apply by
    /// event and matcher, in declaration order, then those bound on the tool.
    pub(crate) fn declared(
        &self,
        event: HookEvent,
        tool: Option<&str>,
    ) -> impl Iterator<Item = &(CompiledHook, HookOnError)> {
        self.session_hooks
            .iter()
            .filter(move |(hook, _)| hook.event() == event && hook.matches(tool))
            .chain(
                self.bound(event, tool)
                    .iter()
                    .filter_map(|name| self.bound_hooks.get(name)),
            )
    }

    /// The hooks written in Rust that run for `event` (on `tool`), after the declared ones.
    pub(crate) fn in_process(
        &self,
        event: HookEvent,
        tool: Option<&str>,
    ) -> impl Iterator<Item = &Arc<dyn InProcessHook>> {
        self.in_process
            .iter()
            .filter(move |hook| hook.event() == event && hook.matches(tool))
    }
}
