//! The hook runner: runs one `Hook` document's handler with a [`HookInput`] and reads its
//! answer as a [`HookOutcome`] (`docs/tool-gateway.md#hooks`). The wire format is the Claude Code hook protocol, so
//! existing hook scripts work unchanged.
//!
//! Start at [`CompiledHook`] (a hook ready to run: matcher compiled, HTTP client built) or
//! [`run_hook`] (the same, once). The input names events as Claude Code does where it has them
//! ([`HookEvent::hook_input_name`]: `UserPromptSubmit`, `Stop`, …). A `command` handler runs
//! on the process machinery the command tools use ([`crate::process`]): its own process group
//! (killed on timeout and cancellation), a cleaned environment plus `KEEL_HOOK_EVENT` (Keel's
//! name of the event), `KEEL_HOOK_NAME` and `CLAUDE_PROJECT_DIR`, the input as JSON on stdin
//! and bounded capture of its output. Exit 0
//! answers through stdout ([`outcome::parse_output`]), exit 2 blocks with stderr as the
//! reason, any other exit is a [`HookError`]. An `http` handler (`http_handler.rs`) gets the
//! input POSTed as JSON and answers through a 2xx body; without the crate's `http` feature its
//! calls fail, settled by the hook's `onError`.
//!
//! A failed hook is settled by its `onError` ([`settle`]); the outcomes of one event's hooks
//! are folded by [`combine`], and non-blocking events drop what is AI-facing
//! ([`Combined::for_event`]). SDK users hook in with [`InProcessHook`], which has a timeout
//! ([`call_in_process`]) and an `onError` like a declared hook.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{HookEvent, SandboxRecord};
use keel_workspace::{HookHandler, HookOnError, HookSpec};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::resolve_program;
use crate::process::{self, Caps, Finished, RunError, child_env};
use crate::sandbox::{Profile, Sandboxes};
use http_handler::Client;

mod http_handler;
pub mod outcome;

pub use outcome::{Combined, HookOutcome, PermissionDecision, combine, is_blocking};

/// The timeout of a hook whose handler sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest stdout (or http body) of a hook that is read.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// Largest stderr of a hook that is kept.
pub const MAX_STDERR_BYTES: usize = 64 * 1024;

/// Exit code with which a command hook blocks (stderr is the reason).
pub const BLOCK_EXIT_CODE: i32 = 2;

/// What a hook is given: the Claude Code hook input, plus Keel's `request_id` and `agent`.
/// Fields that do not apply to the event are `None` and left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookInput {
    /// The event, by Claude Code's name where it has the event (`UserPromptSubmit`, `Stop`,
    /// `PreToolUse`, `PostToolUse`, `SessionEnd`) and by Keel's otherwise (`RunStart`,
    /// `RunEnd`); see [`HookEvent::hook_input_name`].
    pub hook_event_name: String,
    /// The session, or the run's id when the run has no session (a task's id at create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The run's log as JSONL, when the store keeps one in a file (events, not Claude Code's
    /// transcript entries; written a moment after each event is stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    /// The workspace root.
    pub cwd: PathBuf,
    /// The permission mode calls are decided under (`default`, `acceptEdits`, `dontAsk`,
    /// `plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<Value>,
    /// The user's prompt (`UserPromptSubmit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Whether a `Stop` hook already continued this turn (`Stop`; always `false`: Keel's
    /// `Stop` hooks cannot continue a turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    /// Why the session ended (`SessionEnd`: `prompt_input_exit`, `deleted`, `other`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Keel's run id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The agent of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The W3C `traceparent` of the span the hook runs under (the call's, or the run's): a
    /// command hook gets it as `TRACEPARENT`, an HTTP hook as a header. Not in the JSON.
    #[serde(skip)]
    pub traceparent: Option<String>,
}

impl HookInput {
    /// An input for `event` in `cwd`, every optional field empty (`stop_hook_active` is
    /// `false` for `Stop`).
    pub fn new(event: HookEvent, cwd: impl Into<PathBuf>) -> Self {
        Self {
            hook_event_name: event.hook_input_name().to_owned(),
            cwd: cwd.into(),
            stop_hook_active: (event == HookEvent::SessionStop).then_some(false),
            ..Self::default()
        }
    }
}

/// Whether `event` concerns one tool call (and so has a matcher over tool names).
pub fn is_tool_event(event: HookEvent) -> bool {
    matches!(event, HookEvent::PreToolUse | HookEvent::PostToolUse)
}

/// Why a hook gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HookError {
    /// The hook's declaration cannot run (empty command, bad URL or header, bad matcher).
    #[error("the hook cannot run as declared: {0}")]
    Invalid(String),
    /// The program could not be started (not found, not executable) or waited for.
    #[error("cannot run `{program}`: {message}")]
    Spawn { program: String, message: String },
    /// The command exited with a status other than 0 and 2 (`code` is `None` when a signal
    /// killed it).
    #[error("the hook {}{}", exit_words(*code), stderr_words(stderr))]
    Exit { code: Option<i32>, stderr: String },
    /// The hook's stdout (or http body) is not a hook answer.
    #[error("the hook's output is invalid: {message} (output: {excerpt})")]
    InvalidOutput { message: String, excerpt: String },
    /// The hook did not answer in time; a command's process group was killed.
    #[error("the hook timed out after {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// An http hook answered with a status other than 2xx.
    #[error("the hook endpoint answered {status}: {body}")]
    Http { status: u16, body: String },
    /// An http hook's endpoint could not be reached.
    #[error("cannot connect to the hook endpoint: {0}")]
    Connect(String),
    /// An http hook's request failed after connecting.
    #[error("the request to the hook endpoint failed: {0}")]
    Request(String),
}

fn exit_words(code: Option<i32>) -> String {
    match code {
        Some(code) => format!("exited with status {code}"),
        None => "was killed by a signal".to_owned(),
    }
}

fn stderr_words(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// What the runtime does with one hook's result, by the hook's `onError`.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The hook answered.
    Outcome(HookOutcome),
    /// The hook failed and is ignored (`onError: skip`).
    Skip(HookError),
    /// The hook failed; record a warning and go on (`onError: warn`).
    Warn(HookError),
    /// The hook failed; deny the tool call (`onError: deny`, tool events).
    Deny(HookError),
    /// The hook failed; fail the run (`onError: fail-run`).
    FailRun(HookError),
}

/// Settles a hook's `result` by its `on_error`: an answer stays an answer (a block by exit
/// code 2 is an answer, not an error); an error becomes what `on_error` says.
pub fn settle(result: Result<HookOutcome, HookError>, on_error: HookOnError) -> Settled {
    match result {
        Ok(outcome) => Settled::Outcome(outcome),
        Err(error) => match on_error {
            HookOnError::Skip => Settled::Skip(error),
            HookOnError::Warn => Settled::Warn(error),
            HookOnError::Deny => Settled::Deny(error),
            HookOnError::FailRun => Settled::FailRun(error),
        },
    }
}

/// Whether `spec` applies to a call of `tool`. Non-tool events always apply; on tool events a
/// missing matcher, `""` and `*` match every tool, and otherwise the matcher is a regex that
/// must match the whole tool name (`Edit` matches only `Edit`; `Edit|Write`, `mcp__.*`). A
/// matcher that is not a valid regex matches nothing. Compiles the regex on every call: keep
/// a [`CompiledHook`] to match often.
pub fn matches(spec: &HookSpec, tool: Option<&str>) -> bool {
    match compile_matcher(spec) {
        Ok(matcher) => matcher_applies(spec.event, matcher.as_ref(), tool),
        Err(_) => false,
    }
}

fn compile_matcher(spec: &HookSpec) -> Result<Option<Regex>, String> {
    if !is_tool_event(spec.event) {
        return Ok(None);
    }
    match spec.matcher.as_deref().map(str::trim) {
        None | Some("" | "*") => Ok(None),
        Some(pattern) => Regex::new(&format!("^(?:{pattern})$"))
            .map(Some)
            .map_err(|e| format!("the matcher `{pattern}` is not a valid regex: {e}")),
    }
}

fn matcher_applies(event: HookEvent, matcher: Option<&Regex>, tool: Option<&str>) -> bool {
    if !is_tool_event(event) {
        return true;
    }
    match (matcher, tool) {
        (None, _) => true,
        (Some(regex), Some(tool)) => regex.is_match(tool),
        (Some(_), None) => false,
    }
}

/// A `Hook` document ready to run: the matcher compiled, an http handler's client built.
#[derive(Debug, Clone)]
pub struct CompiledHook {
    name: String,
    spec: HookSpec,
    matcher: Option<Regex>,
    clients: Option<Client>,
    /// The OS sandbox of a command hook's process.
    sandbox: Option<Profile>,
}

impl CompiledHook {
    /// Compiles hook `name`, or says why its matcher, URL, headers or client are unusable.
    pub fn new(name: &str, spec: &HookSpec) -> Result<Self, String> {
        let matcher = compile_matcher(spec)?;
        let clients = match &spec.handler {
            HookHandler::Command { command, .. } => {
                if command.is_empty() {
                    return Err(format!("hook `{name}` has an empty command"));
                }
                None
            }
            HookHandler::Http {
                url,
                headers,
                timeout,
            } => Some(http_handler::client(
                name,
                url,
                headers,
                timeout_of(timeout.map(|t| t.0)),
            )?),
        };
        Ok(Self {
            name: name.to_owned(),
            spec: spec.clone(),
            matcher,
            clients,
            sandbox: None,
        })
    }

    /// The hook, a command's process started in its sandbox profile: the hook's own
    /// `sandbox:` over the Runtime's.
    pub fn with_sandboxes(self, sandboxes: &Sandboxes) -> Self {
        let sandbox = sandboxes.profile("", self.spec.sandbox.as_ref());
        Self { sandbox, ..self }
    }

    /// The sandbox a command hook starts in, as this machine enforces it.
    pub fn sandbox(&self) -> Option<SandboxRecord> {
        match self.spec.handler {
            HookHandler::Command { .. } => Some(self.sandbox.as_ref()?.record()),
            HookHandler::Http { .. } => None,
        }
    }

    /// The hook's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hook's document.
    pub fn spec(&self) -> &HookSpec {
        &self.spec
    }

    /// When the hook runs.
    pub fn event(&self) -> HookEvent {
        self.spec.event
    }

    /// Whether the hook applies to a call of `tool` (see [`matches()`]).
    pub fn matches(&self, tool: Option<&str>) -> bool {
        matcher_applies(self.spec.event, self.matcher.as_ref(), tool)
    }

    /// How long the hook may take.
    pub fn timeout(&self) -> Duration {
        let timeout = match &self.spec.handler {
            HookHandler::Command { timeout, .. } | HookHandler::Http { timeout, .. } => timeout,
        };
        timeout_of(timeout.map(|t| t.0))
    }

    /// Runs the hook with `input`. A command runs in `cwd` (relative program paths resolve
    /// from it) with the cleaned environment plus `env` and Keel's hook variables.
    pub async fn run(
        &self,
        input: &HookInput,
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<HookOutcome, HookError> {
        let timeout = self.timeout();
        match &self.spec.handler {
            HookHandler::Command { command, .. } => {
                self.run_command(command, input, cwd, env, timeout).await
            }
            HookHandler::Http { url, headers, .. } => {
                let Some(clients) = &self.clients else {
                    return Err(HookError::Invalid("the http client is missing".to_owned()));
                };
                http_handler::post(clients, url, headers, input, timeout).await
            }
        }
    }

    async fn run_command(
        &self,
        command: &[String],
        input: &HookInput,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<HookOutcome, HookError> {
        let Some((program, args)) = command.split_first() else {
            return Err(HookError::Invalid(format!(
                "hook `{}` has an empty command",
                self.name
            )));
        };
        let stdin = serde_json::to_vec(input)
            .map_err(|e| HookError::Invalid(format!("cannot encode the hook input: {e}")))?;
        let keel_vars = [
            (
                "KEEL_HOOK_EVENT".to_owned(),
                self.spec.event.as_str().to_owned(),
            ),
            ("KEEL_HOOK_NAME".to_owned(), self.name.clone()),
            (
                "CLAUDE_PROJECT_DIR".to_owned(),
                cwd.to_string_lossy().into_owned(),
            ),
        ];
        let trace = input
            .traceparent
            .iter()
            .map(|parent| ("TRACEPARENT".to_owned(), parent.clone()));
        let keel_vars: Vec<(String, String)> = keel_vars.into_iter().chain(trace).collect();
        let child_env = child_env(std::env::vars_os(), env, &keel_vars);
        let resolved = resolve_program(program, cwd);
        let spawn_failed = |e: std::io::Error| HookError::Spawn {
            program: program.clone(),
            message: match e.kind() {
                std::io::ErrorKind::NotFound => "program not found".to_owned(),
                std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
                _ => e.to_string(),
            },
        };
        let run_id = input.request_id.as_deref().unwrap_or("hooks");
        let prepared = process::prepare(self.sandbox.as_ref(), &resolved, cwd, run_id, &[])
            .map_err(|e| HookError::Spawn {
                program: program.clone(),
                message: e.to_string(),
            })?;
        let (started, args) = process::argv(prepared.as_ref(), &resolved, args);
        let mut command = process::command(&started, &args, cwd, child_env, true);
        let guard = prepared.map(|p| p.apply(&mut command));
        let child = command.spawn().map_err(spawn_failed)?;
        tracing::debug!(
            hook = %self.name,
            pid = child.id(),
            sandbox = ?self.sandbox().map(|s| s.mechanisms),
            "Hook started."
        );
        let caps = Caps {
            stdout: MAX_OUTPUT_BYTES,
            stderr: MAX_STDERR_BYTES,
        };
        let ended = process::run_to_end(child, stdin, caps, timeout).await;
        drop(guard);
        match ended {
            Ok(finished) => answer_of(finished, self.sandbox.as_ref()),
            Err(RunError::TimedOut) => {
                tracing::debug!(hook = %self.name, "Hook timed out.");
                Err(HookError::Timeout(timeout))
            }
            Err(RunError::Wait(e)) => Err(HookError::Spawn {
                program: program.clone(),
                message: format!("waiting for it failed: {e}"),
            }),
        }
    }
}

fn timeout_of(timeout: Option<Duration>) -> Duration {
    timeout.unwrap_or(DEFAULT_TIMEOUT)
}

/// The answer of a command hook that ran to its end.
fn answer_of(finished: Finished, sandbox: Option<&Profile>) -> Result<HookOutcome, HookError> {
    let mut stderr = String::from_utf8_lossy(&finished.stderr.bytes)
        .trim()
        .to_owned();
    let blocked = sandbox.map(|p| crate::sandbox::explain(p, &stderr));
    if let Some(blocked) = blocked.filter(|b| !b.is_empty() && finished.status.code() != Some(0)) {
        stderr.push_str(&format!(" ({})", blocked.join("; ")));
    }
    match finished.status.code() {
        Some(0) => {
            if finished.stdout.truncated() {
                return Err(HookError::InvalidOutput {
                    message: format!("the output is longer than {MAX_OUTPUT_BYTES} bytes"),
                    excerpt: outcome::excerpt(&String::from_utf8_lossy(&finished.stdout.bytes)),
                });
            }
            outcome::parse_output(&String::from_utf8_lossy(&finished.stdout.bytes))
        }
        Some(BLOCK_EXIT_CODE) => Ok(HookOutcome::blocked(stderr)),
        code => Err(HookError::Exit { code, stderr }),
    }
}

/// Runs hook `name` once (see [`CompiledHook::run`]); a declaration that cannot run is a
/// [`HookError::Invalid`].
pub async fn run_hook(
    name: &str,
    spec: &HookSpec,
    input: &HookInput,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<HookOutcome, HookError> {
    let hook = CompiledHook::new(name, spec).map_err(HookError::Invalid)?;
    hook.run(input, cwd, env).await
}

/// A hook written in Rust and registered through the SDK; it answers like a declared hook and
/// obeys the same rules: it runs in its place in the declared order (after the workspace's
/// hooks of its event, in registration order), within its [`timeout`](Self::timeout), and a
/// failure (an error or the timeout) is settled by its [`on_error`](Self::on_error).
#[async_trait]
pub trait InProcessHook: Send + Sync {
    /// The hook's name, for events and logs.
    fn name(&self) -> &str;

    /// When the hook runs.
    fn event(&self) -> HookEvent;

    /// Whether the hook applies to a call of `tool` (tool events); every call by default.
    fn matches(&self, _tool: Option<&str>) -> bool {
        true
    }

    /// How long the hook may take ([`DEFAULT_TIMEOUT`] by default, as a declared hook).
    fn timeout(&self) -> Duration {
        DEFAULT_TIMEOUT
    }

    /// What a failure does (`warn` by default, as a declared hook).
    fn on_error(&self) -> HookOnError {
        HookOnError::Warn
    }

    /// Answers `input`.
    async fn call(&self, input: &HookInput) -> Result<HookOutcome, HookError>;
}

/// Calls an in-process hook within its timeout; running past it is a [`HookError::Timeout`]
/// (the call's future is dropped).
pub async fn call_in_process(
    hook: &dyn InProcessHook,
    input: &HookInput,
) -> Result<HookOutcome, HookError> {
    let timeout = hook.timeout();
    match tokio::time::timeout(timeout, hook.call(input)).await {
        Ok(result) => result,
        Err(_) => Err(HookError::Timeout(timeout)),
    }
}

#[cfg(test)]
mod tests {
    use keel_workspace::HookOnError;

    use super::*;

    fn spec(event: HookEvent, matcher: Option<&str>) -> HookSpec {
        HookSpec {
            sandbox: Default::default(),
            event,
            matcher: matcher.map(str::to_owned),
            handler: HookHandler::Command {
                command: vec!["true".to_owned()],
                timeout: None,
            },
            on_error: HookOnError::Warn,
            enabled: true,
        }
    }

    #[test]
    fn matchers_match_whole_tool_names() {
        let pre = HookEvent::PreToolUse;
        assert!(matches(&spec(pre, None), Some("shell")));
        assert!(matches(&spec(pre, Some("*")), Some("shell")));
        assert!(matches(&spec(pre, Some("shell")), Some("shell")));
        assert!(!matches(&spec(pre, Some("shell")), Some("shell_x")));
        assert!(matches(&spec(pre, Some("edit|write")), Some("write")));
        assert!(matches(&spec(pre, Some("mcp__.*")), Some("mcp__git__log")));
        assert!(!matches(&spec(pre, Some("(")), Some("(")));
        assert!(!matches(&spec(pre, Some("shell")), None));
        // Non-tool events ignore the matcher.
        assert!(matches(&spec(HookEvent::PromptSubmit, Some("shell")), None));
    }

    #[test]
    fn inputs_leave_out_empty_fields() {
        let input = HookInput::new(HookEvent::PreToolUse, "/ws");
        assert_eq!(
            serde_json::to_value(&input).unwrap(),
            serde_json::json!({ "hook_event_name": "PreToolUse", "cwd": "/ws" })
        );
        let stop = HookInput::new(HookEvent::SessionStop, "/ws");
        assert_eq!(
            serde_json::to_value(&stop).unwrap(),
            serde_json::json!({ "hook_event_name": "Stop", "cwd": "/ws", "stop_hook_active": false })
        );
    }
}
