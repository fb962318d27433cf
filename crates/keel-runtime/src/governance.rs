//! The compiled governance of a workspace: its policy engine and its hooks, built once per
//! runtime and shared by every run. Which hooks run for an event — declared hooks by event and
//! matcher in declaration order, hooks bound on a tool by name (`hooks.preCall` /
//! `hooks.postCall`), then hooks written in Rust in registration order — is decided here, and
//! so is a *hook round* (`Governance::hook_round`): the hooks of one event run one after the
//! other, each within its timeout, each failure settled by its `onError`, the answers
//! combined. The round records nothing itself: a run records each `HookCall` in its log
//! (`agent_loop/govern.rs`), a task's create keeps them on the task (`direct.rs`), and a
//! session's end traces them (`kernel.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use keel_tools::gateway::Gateway;
use keel_tools::hooks::{
    self, Combined, CompiledHook, HookError, HookInput, HookOutcome, InProcessHook, Settled,
};
use keel_tools::policy::{PolicyEngine, PolicyQuery, PolicyVerdict};
use keel_types::PermissionMode;
use keel_types::{HookEvent, PolicyDecision};
use keel_workspace::PolicySpec;
use keel_workspace::{HookOnError, Workspace};
use serde_json::Value;

mod ruling;
pub(crate) use ruling::{HookAnswer, Refusal, Ruling};

/// The combined answer of an event's hooks.
pub(crate) struct HookRound {
    pub combined: Combined,
    /// A hook failed with `onError: deny`.
    pub denied: Option<String>,
    /// A hook failed with `onError: fail-run`.
    pub fail: Option<String>,
}

impl HookRound {
    /// Why the round ends the run or blocks what it was asked about, if it does: a failure
    /// with `onError: fail-run`, a stop, or a block.
    pub(crate) fn stops(self) -> Option<String> {
        self.fail.or(self.combined.stop).or(self.combined.block)
    }
}

/// One hook's call in a round, for the record.
pub(crate) struct HookCall {
    pub hook: String,
    pub duration_ms: u64,
    pub result: HookResult,
    /// The sandbox its process started in, when it is a sandboxed command hook.
    pub sandbox: Option<keel_types::SandboxRecord>,
}

/// What one hook's call came to.
pub(crate) enum HookResult {
    /// The hook answered.
    Answered(HookOutcome),
    /// The hook failed; its `on_error` applied.
    Failed {
        error: HookError,
        on_error: HookOnError,
    },
}

impl HookResult {
    /// A short description of a hook's answer for the record (`deny`, `ask`, `allow`,
    /// `block: …`, `stop: …`, `input rewritten`, `context added`, `no opinion`).
    pub(crate) fn describe(outcome: &HookOutcome) -> String {
        let mut parts = Vec::new();
        if let Some(decision) = &outcome.decision {
            parts.push(decision.as_str().to_owned());
        }
        if let Some(reason) = &outcome.block {
            parts.push(format!("block: {reason}"));
        }
        if let Some(reason) = &outcome.stop {
            parts.push(format!("stop: {reason}"));
        }
        if outcome.updated_input.is_some() {
            parts.push("input rewritten".into());
        }
        if outcome.additional_context.is_some() {
            parts.push("context added".into());
        }
        match parts.is_empty() {
            true => "no opinion".into(),
            false => parts.join(", "),
        }
    }

    /// The reason a hook gave for what it decided: the `permissionDecisionReason` of a deny
    /// or an ask, else a block's reason, else a stop's.
    pub(crate) fn reason(outcome: &HookOutcome) -> Option<String> {
        let decided = matches!(
            outcome.decision,
            Some(PolicyDecision::Deny | PolicyDecision::Ask)
        );
        decided
            .then(|| outcome.decision_reason.clone())
            .flatten()
            .or_else(|| outcome.block.clone().filter(|r| !r.is_empty()))
            .or_else(|| outcome.stop.clone().filter(|r| !r.is_empty()))
    }
}

/// A hook that runs for an event: declared in the workspace or given to the SDK.
enum Runnable<'a> {
    Declared(&'a CompiledHook, HookOnError),
    InProcess(&'a dyn InProcessHook),
}

impl Runnable<'_> {
    fn name(&self) -> &str {
        match self {
            Self::Declared(hook, _) => hook.name(),
            Self::InProcess(hook) => hook.name(),
        }
    }

    fn on_error(&self) -> HookOnError {
        match self {
            Self::Declared(_, on_error) => *on_error,
            Self::InProcess(hook) => hook.on_error(),
        }
    }

    /// The OS sandbox a command hook's process starts in.
    fn sandbox(&self) -> Option<keel_types::SandboxRecord> {
        match self {
            Self::Declared(hook, _) => hook.sandbox(),
            Self::InProcess(_) => None,
        }
    }

    async fn run(
        &self,
        input: &HookInput,
        root: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<HookOutcome, HookError> {
        match self {
            Self::Declared(hook, _) => hook.run(input, root, env).await,
            Self::InProcess(hook) => hooks::call_in_process(*hook, input).await,
        }
    }
}

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
    /// Hooks written in Rust and given to the SDK; they run after the declared ones, in
    /// registration order.
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
    /// tool; the others run for every matching call; disabled hooks (`enabled: false`) never
    /// run.
    pub fn from_workspace(workspace: &Workspace) -> Self {
        Self::new(workspace, Vec::new())
    }

    /// Compiles the workspace's policies and hooks, plus hooks written in Rust (they run
    /// after the declared hooks of the same event, in the order given, each within its
    /// timeout and with its `onError`).
    pub fn new(workspace: &Workspace, in_process: Vec<Arc<dyn InProcessHook>>) -> Self {
        let bound: HashSet<&String> = workspace
            .tools
            .values()
            .flat_map(|t| t.hooks.pre_call.iter().chain(&t.hooks.post_call))
            .collect();
        let sandboxes = keel_tools::sandbox::Sandboxes::of(workspace);
        let mut session_hooks = Vec::new();
        let mut bound_hooks = BTreeMap::new();
        for (name, spec) in &workspace.hooks {
            if !spec.enabled {
                tracing::debug!(hook = %name, "Hook not run: it is disabled.");
                continue;
            }
            let compiled = match CompiledHook::new(name, spec) {
                Ok(compiled) => compiled.with_sandboxes(&sandboxes),
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

    /// Policy's verdict on a call of `tool` with `args` by `agent`: the one decision path of
    /// a run's calls, direct calls and tasks, and `keel policy check`. Whether the tool only
    /// reads is the gateway's word (a built-in's, an MCP tool's `readOnlyHint`).
    pub fn decide_call(
        &self,
        gateway: &Gateway,
        agent: &str,
        tool: &str,
        args: &Value,
        mode: Option<PermissionMode>,
        narrowing: &[&PolicySpec],
    ) -> PolicyVerdict {
        let query = PolicyQuery {
            agent,
            tool,
            args,
            read_only: gateway.is_read_only(tool),
            mode,
        };
        self.policy.decide(&query, narrowing)
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
    fn declared(
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

    /// Every hook that runs for `event` (on `tool`), in order: the declared ones, then those
    /// written in Rust in registration order.
    fn runnable(&self, event: HookEvent, tool: Option<&str>) -> Vec<Runnable<'_>> {
        self.declared(event, tool)
            .map(|(hook, on_error)| Runnable::Declared(hook, *on_error))
            .chain(
                self.in_process
                    .iter()
                    .filter(move |hook| hook.event() == event && hook.matches(tool))
                    .map(|hook| Runnable::InProcess(hook.as_ref())),
            )
            .collect()
    }

    /// Runs the hooks of `event` (on `tool`) with `input`, one after the other in order, and
    /// combines their answers as `event` may act on them. A command runs in `root` with `env`
    /// added. Returns the round and each hook's call, for the caller to record.
    pub(crate) async fn hook_round(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        input: &HookInput,
        root: &Path,
        env: &BTreeMap<String, String>,
    ) -> (HookRound, Vec<HookCall>) {
        let mut round = HookRound {
            combined: hooks::combine(Vec::new()),
            denied: None,
            fail: None,
        };
        let mut calls = Vec::new();
        let mut outcomes = Vec::new();
        for hook in self.runnable(event, tool) {
            let started = Instant::now();
            let result = hook.run(input, root, env).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let failed = |error: HookError, on_error| HookResult::Failed { error, on_error };
            let result = match hooks::settle(result, hook.on_error()) {
                Settled::Outcome(outcome) => {
                    outcomes.push(outcome.clone());
                    HookResult::Answered(outcome)
                }
                Settled::Skip(error) => failed(error, HookOnError::Skip),
                Settled::Warn(error) => failed(error, HookOnError::Warn),
                Settled::Deny(error) => {
                    round
                        .denied
                        .get_or_insert(format!("hook {} failed: {error}", hook.name()));
                    failed(error, HookOnError::Deny)
                }
                Settled::FailRun(error) => {
                    round
                        .fail
                        .get_or_insert(format!("hook {} failed: {error}", hook.name()));
                    failed(error, HookOnError::FailRun)
                }
            };
            calls.push(HookCall {
                hook: hook.name().to_owned(),
                duration_ms,
                result,
                sandbox: hook.sandbox(),
            });
        }
        round.combined = hooks::combine(outcomes).for_event(event);
        (round, calls)
    }
}
