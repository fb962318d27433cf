//! `shell`: run a command in the workspace and return its exit code and output.
//!
//! A string command runs as `sh -c <command>`; an array runs as argv, without a shell. The
//! working directory is the workspace root or a directory inside it (checked before the call
//! and again when it runs). The process gets the runtime's environment minus anything that
//! looks like a secret, plus the call's `env` and Keel's variables, and `/dev/null` as stdin.
//!
//! A non-zero exit is a *result* (`{exit_code, stdout, stderr, truncated}`), not a tool error,
//! so the model can read what went wrong. Output is bounded by the context's output cap and
//! cut with a note. The process group — the command and everything it forked — is killed when
//! the command exits, on timeout, and when the call future is dropped (see
//! [`crate::process`]).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use std::path::Path;

use keel_types::{Issue, SandboxRecord, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use keel_workspace::ShellSettings;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{arg_issue, clip, content_budget, path_issues};
use crate::input;
use crate::paths::{self, Access};
use crate::process::{self, Caps, Captured, RunError};
use crate::sandbox::{Profile, Sandboxes};

/// `shell`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShellInput {
    /// A shell command line (run with `sh -c`), or argv as an array of strings.
    command: CommandArg,
    /// Working directory relative to the workspace root (default: the root).
    #[serde(default)]
    cwd: Option<String>,
    /// How long the command may run: seconds, or a duration such as `90s` or `5m`.
    #[serde(default)]
    timeout: Option<TimeoutArg>,
    /// Extra environment variables.
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
}

/// A command: a line for `sh -c`, or argv.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum CommandArg {
    Line(#[schemars(length(min = 1))] String),
    Argv(#[schemars(length(min = 1))] Vec<String>),
}

/// A timeout: a duration such as `90s`, or seconds.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum TimeoutArg {
    Text(#[schemars(length(min = 1))] String),
    Seconds(#[schemars(extend("exclusiveMinimum" = 0))] f64),
}

/// Runs commands in the workspace.
#[derive(Debug)]
pub struct Shell {
    spec: ToolSpec,
    timeout: Duration,
    max_timeout: Duration,
    sandboxes: Sandboxes,
}

impl Shell {
    /// The tool, with its default and maximum timeouts from `settings`.
    pub fn new(settings: &ShellSettings) -> Self {
        let timeout = settings.timeout.0;
        let max_timeout = settings.max_timeout.0.max(Duration::from_millis(1));
        Self {
            spec: ToolSpec {
                name: "shell".to_owned(),
                description: format!(
                    "Run a command in the workspace. A string runs with `sh -c` (pipes, \
                     redirections and `&&` work); an array of strings runs the program \
                     directly with those arguments. Returns JSON `{{exit_code, stdout, stderr, \
                     truncated}}`; a non-zero exit code is reported, not an error. The command \
                     runs in `cwd` (default: the workspace root) with no stdin, and is killed \
                     after `timeout` (default {}, at most {}) together with every process it \
                     started. Long output is cut: redirect it to a file and use grep or \
                     read_file.",
                    humantime::format_duration(timeout),
                    humantime::format_duration(max_timeout)
                ),
                parameters: input::schema_of::<ShellInput>(),
            },
            timeout: timeout.min(max_timeout),
            max_timeout,
            sandboxes: Sandboxes::default(),
        }
    }

    /// The tool, its commands started in the workspace's sandbox profiles.
    pub fn with_sandboxes(self, sandboxes: Sandboxes) -> Self {
        Self { sandboxes, ..self }
    }

    /// The timeout a call asks for, capped at the maximum; the default when it asks none.
    fn timeout_of(&self, requested: Option<&TimeoutArg>) -> Result<Duration, String> {
        let requested = match requested {
            None => return Ok(self.timeout),
            Some(TimeoutArg::Text(text)) => humantime::parse_duration(text.trim())
                .map_err(|e| format!("`timeout` is not a duration: {e}"))?,
            Some(TimeoutArg::Seconds(secs)) => {
                Duration::try_from_secs_f64(*secs).map_err(|_| {
                    format!("`timeout` must be a positive number of seconds, not {secs}")
                })?
            }
        };
        if requested.is_zero() {
            return Err("`timeout` must be longer than zero".to_owned());
        }
        Ok(requested.min(self.max_timeout))
    }
}

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn sandbox(&self, ctx: &ToolContext) -> Option<SandboxRecord> {
        Some(self.sandboxes.profile(&ctx.agent, None)?.record())
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = path_issues(ctx, args, "cwd", Some("."), Access::Read);
        let timeout = args.get("timeout").filter(|v| !v.is_null()).map(|v| {
            serde_json::from_value::<TimeoutArg>(v.clone())
                .map_err(|_| format!("`timeout` must be seconds or a duration string, not {v}"))
        });
        let timeout = match timeout.transpose() {
            Ok(requested) => self.timeout_of(requested.as_ref()),
            Err(message) => Err(message),
        };
        if let Err(message) = timeout {
            let found = args
                .get("timeout")
                .map(Value::to_string)
                .unwrap_or_default();
            issues.push(arg_issue(
                "timeout",
                "seconds, or a duration such as `90s`",
                found,
                message,
            ));
        }
        if let Err(message) = argv_of(args) {
            issues.push(arg_issue(
                "command",
                "a command line, or a non-empty array of strings",
                args.get("command")
                    .map(Value::to_string)
                    .unwrap_or_default(),
                message,
            ));
        }
        if let Some(Value::Object(env)) = args.get("env") {
            for name in env.keys().filter(|name| !valid_env_name(name)) {
                issues.push(Issue {
                    path: format!("/env/{}", name.replace('~', "~0").replace('/', "~1")),
                    expected: "an environment variable name (no `=` or NUL, not empty)".to_owned(),
                    found: name.clone(),
                    message: format!("`{name}` cannot be an environment variable name"),
                });
            }
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: ShellInput = input::parse(args)?;
        let (program, rest) = argv(&input.command).map_err(ToolError::InvalidArguments)?;
        let timeout = self
            .timeout_of(input.timeout.as_ref())
            .map_err(ToolError::InvalidArguments)?;
        let env = call_env(input.env.unwrap_or_default())?;
        let requested_cwd = input.cwd.as_deref().unwrap_or(".");
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let cwd = paths::resolve(&root, requested_cwd, Access::Read)?;
        if !cwd.is_dir() {
            return Err(ToolError::Io(format!(
                "`cwd` `{requested_cwd}` is not a directory"
            )));
        }
        let keel_vars = [
            ("KEEL_WORKSPACE".to_owned(), root.display().to_string()),
            ("KEEL_REQUEST_ID".to_owned(), ctx.request_id.to_string()),
            ("KEEL_TOOL_NAME".to_owned(), self.spec.name.clone()),
        ]
        .into_iter()
        .chain(
            ctx.session_id
                .as_ref()
                .map(|s| ("KEEL_SESSION_ID".to_owned(), s.to_string())),
        )
        .chain(
            ctx.traceparent
                .as_ref()
                .map(|parent| ("TRACEPARENT".to_owned(), parent.clone())),
        )
        .collect::<Vec<_>>();
        let child_env = process::child_env(std::env::vars_os(), &env, &keel_vars);
        let profile = self.sandboxes.profile(&ctx.agent, None);
        let run = ctx.request_id.to_string();
        let prepared = process::prepare(profile.as_ref(), Path::new(&program), &root, &run, &[])?;
        let (started, args) = process::argv(prepared.as_ref(), &program, &rest);
        let mut command = process::command(&started, &args, &cwd, child_env, false);
        let guard = prepared.map(|p| p.apply(&mut command));
        let child = command
            .spawn()
            .map_err(|e| process::spawn_error(&program, &e))?;
        tracing::debug!(
            request_id = %ctx.request_id,
            pid = child.id(),
            cwd = %paths::display(&root, &cwd),
            "Shell command started."
        );
        let budget = content_budget(ctx.max_output_bytes);
        let caps = Caps {
            stdout: budget,
            stderr: budget,
        };
        let ended = process::run_to_end(child, Vec::new(), caps, timeout).await;
        drop(guard);
        match ended {
            Ok(finished) => Ok(ToolOutput::json(&process_result(
                finished,
                budget,
                "command",
                profile.as_ref(),
            ))),
            Err(RunError::Wait(e)) => Err(ToolError::Failed(format!(
                "waiting for the command failed: {e}"
            ))),
            Err(RunError::TimedOut) => {
                tracing::debug!(request_id = %ctx.request_id, "Shell command timed out.");
                Err(ToolError::Timeout(timeout))
            }
        }
    }
}

/// The program and its arguments of a `command` argument not yet parsed (for
/// [`Tool::check`]).
fn argv_of(args: &Value) -> Result<(String, Vec<String>), String> {
    let command = args
        .get("command")
        .ok_or_else(|| "`command` is required".to_owned())?;
    let command = serde_json::from_value(command.clone()).map_err(|_| {
        format!("`command` must be a string or an array of strings, found {command}")
    })?;
    argv(&command)
}

/// The program and its arguments: `sh -c <command>` for a string, the array itself otherwise.
pub(super) fn argv(command: &CommandArg) -> Result<(String, Vec<String>), String> {
    match command {
        CommandArg::Line(line) if !line.trim().is_empty() => {
            Ok(("sh".to_owned(), vec!["-c".to_owned(), line.clone()]))
        }
        CommandArg::Line(_) => Err("`command` is empty".to_owned()),
        CommandArg::Argv(words) => {
            if let Some(word) = words.iter().find(|w| w.contains('\0')) {
                return Err(format!(
                    "every element of `command` must be a string without NUL, found {}",
                    Value::from(word.as_str())
                ));
            }
            let (program, rest) = words
                .split_first()
                .ok_or_else(|| "`command` must not be an empty array".to_owned())?;
            if program.is_empty() {
                return Err("the program (first element of `command`) is empty".to_owned());
            }
            Ok((program.clone(), rest.to_vec()))
        }
    }
}

/// The call's extra environment, checked.
pub(super) fn call_env(
    env: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ToolError> {
    for (name, value) in &env {
        if !valid_env_name(name) {
            return Err(ToolError::InvalidArguments(format!(
                "`{name}` cannot be an environment variable name"
            )));
        }
        if value.contains('\0') {
            return Err(ToolError::InvalidArguments(format!(
                "`env.{name}` must be a string without NUL, found {}",
                Value::from(value.as_str())
            )));
        }
    }
    Ok(env)
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

/// A finished process as a tool result: `{exit_code, stdout, stderr, truncated}`, plus
/// `error` when a signal ended it (`what` names it: `the command was killed by …`).
/// `profile`: the sandbox it ran in; a failure the sandbox caused is said so (`sandbox`).
pub(super) fn process_result(
    finished: process::Finished,
    budget: usize,
    what: &str,
    profile: Option<&Profile>,
) -> Value {
    let (stdout, stderr, truncated) = fit_output(finished.stdout, finished.stderr, budget);
    let blocked = profile
        .map(|profile| crate::sandbox::explain(profile, &stderr))
        .unwrap_or_default();
    let mut result = json!({
        "exit_code": finished.status.code(),
        "stdout": stdout,
        "stderr": stderr,
        "truncated": truncated,
    });
    if finished.status.code().is_none()
        && let Some(map) = result.as_object_mut()
    {
        map.insert(
            "error".to_owned(),
            json!(format!(
                "the {what} {}",
                process::describe_failure(finished.status)
            )),
        );
    }
    if let (false, Some(map)) = (blocked.is_empty(), result.as_object_mut()) {
        map.insert("sandbox".to_owned(), json!(blocked.join("; ")));
    }
    result
}

/// stdout and stderr as text within `budget` bytes together, each cut with a note when
/// something was dropped; and whether anything was.
fn fit_output(stdout: Captured, stderr: Captured, budget: usize) -> (String, String, bool) {
    let out = String::from_utf8_lossy(&stdout.bytes);
    let err = String::from_utf8_lossy(&stderr.bytes);
    // stderr keeps at least a quarter of the budget when it needs it; stdout gets the rest.
    let err_room = err
        .len()
        .min((budget / 4).max(budget.saturating_sub(out.len())));
    let out_room = budget.saturating_sub(err_room);
    let out_text = cut(&out, out_room, stdout.total, "stdout");
    let err_text = cut(&err, err_room, stderr.total, "stderr");
    let truncated = out_text.1 || err_text.1;
    (out_text.0, err_text.0, truncated)
}

/// `text` (the kept part of `total` bytes) clipped to `room`, with a note when cut.
fn cut(text: &str, room: usize, total: usize, what: &str) -> (String, bool) {
    let kept = clip(text, room);
    if kept.len() == text.len() && total <= text.len() {
        return (text.to_owned(), false);
    }
    let note = format!(
        "\n[{what} truncated: first {} of {total} bytes shown; redirect the output to a file \
         and read it with grep or read_file]",
        kept.len()
    );
    (format!("{kept}{note}"), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str, total: usize) -> Captured {
        Captured {
            bytes: text.as_bytes().to_vec(),
            total,
        }
    }

    #[test]
    fn short_output_is_kept_whole() {
        let (out, err, truncated) = fit_output(captured("out", 3), captured("err", 3), 100);
        assert_eq!(
            (out.as_str(), err.as_str(), truncated),
            ("out", "err", false)
        );
    }

    #[test]
    fn long_output_is_cut_with_notes_and_stderr_keeps_a_share() {
        let long = "x".repeat(1000);
        let (out, err, truncated) = fit_output(captured(&long, 5000), captured(&long, 1000), 400);
        assert!(truncated);
        assert!(out.starts_with(&"x".repeat(300)), "{out}");
        assert!(out.contains("[stdout truncated: first 300 of 5000 bytes shown"));
        assert!(err.contains("[stderr truncated: first 100 of 1000 bytes shown"));
    }

    #[test]
    fn timeouts_are_seconds_or_durations_capped_at_the_maximum() {
        let shell = Shell::new(&ShellSettings {
            timeout: keel_workspace::Duration::from_secs(60),
            max_timeout: keel_workspace::Duration::from_secs(600),
        });
        let of = |v: Value| shell.timeout_of(Some(&serde_json::from_value(v).unwrap()));
        assert_eq!(shell.timeout_of(None), Ok(Duration::from_secs(60)));
        assert_eq!(of(json!(1.5)), Ok(Duration::from_millis(1500)));
        assert_eq!(of(json!("2m")), Ok(Duration::from_secs(120)));
        assert_eq!(of(json!("2h")), Ok(Duration::from_secs(600)));
        assert!(of(json!("soon")).is_err());
        assert!(of(json!(0)).is_err());
        assert!(of(json!(-1)).is_err());
    }
}
