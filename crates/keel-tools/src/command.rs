//! Command tools: a `kind: Tool` document with `impl: {kind: command}` run as a process.
//!
//! [`CommandTool::call`] starts the argv in the workspace root, in its own process group,
//! writes the JSON arguments to stdin and closes it, and reads stdout and stderr concurrently
//! under size bounds (the process machinery, shared with `shell`, is in [`crate::process`]).
//! Exit 0 is success (stdout is the result, compacted when it is JSON); any other exit fails
//! with the trimmed stderr. The process group — the command and anything it forked — is
//! killed on timeout, when the call future is dropped (cancellation), and as soon as the
//! command itself exits, so no tool process outlives its call.
//!
//! The child's environment is the runtime's minus anything that looks like a secret
//! ([`looks_secret`]), plus the document's `env` and `KEEL_WORKSPACE`, `KEEL_REQUEST_ID`,
//! `KEEL_TOOL_NAME` (and `KEEL_SESSION_ID` when there is a session).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{SandboxRecord, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
pub use keel_workspace::looks_secret;
use keel_workspace::{SandboxSpec, ToolImpl, ToolSpecDoc};
use serde_json::Value;

pub use crate::process::child_env;
use crate::process::{self, Caps, Finished, RunError};
use crate::sandbox::{Profile, Sandboxes};

/// The timeout when the document sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this much of stderr is kept for the error message.
pub const STDERR_CAP: usize = 8 * 1024;

/// The most stdout a command tool keeps (64 MiB); beyond it the output is cut.
pub const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;

/// A tool backed by a process.
#[derive(Debug, Clone)]
pub struct CommandTool {
    spec: ToolSpec,
    /// The program, already resolved against the workspace when it is a relative path.
    program: Option<PathBuf>,
    args: Vec<String>,
    timeout: Duration,
    env: BTreeMap<String, String>,
    workspace_root: PathBuf,
    idempotent: bool,
    /// The document's own `sandbox:`, and the workspace's settings it goes over.
    sandbox: Option<SandboxSpec>,
    sandboxes: Sandboxes,
}

impl CommandTool {
    /// The tool called `name` described by `doc`, running in `workspace_root`. A document of
    /// another kind gives a tool with no program, whose calls fail saying so; use
    /// [`crate::declared`] to build the right tool for any document.
    pub fn new(name: &str, doc: &ToolSpecDoc, workspace_root: &Path) -> CommandTool {
        let no_env = BTreeMap::new();
        let (command, timeout, env) = match &doc.implementation {
            ToolImpl::Command {
                command,
                timeout,
                env,
            } => (command.as_slice(), *timeout, env),
            _ => (&[][..], None, &no_env),
        };
        // Relative program paths must not depend on how the child's cwd is applied.
        let workspace_root =
            std::path::absolute(workspace_root).unwrap_or_else(|_| workspace_root.to_path_buf());
        let mut argv = command.iter();
        let program = argv
            .next()
            .map(|program| resolve_program(program, &workspace_root));
        CommandTool {
            spec: ToolSpec {
                name: name.to_owned(),
                description: doc.description.clone(),
                parameters: doc.schema.clone(),
            },
            program,
            args: argv.cloned().collect(),
            timeout: timeout.map_or(DEFAULT_TIMEOUT, |t| t.0),
            env: env.clone(),
            workspace_root,
            idempotent: doc.idempotent,
            sandbox: doc.sandbox.clone(),
            sandboxes: Sandboxes::default(),
        }
    }

    /// The tool, its process started in the workspace's sandbox profiles.
    pub fn with_sandboxes(self, sandboxes: Sandboxes) -> Self {
        Self { sandboxes, ..self }
    }

    fn profile(&self, ctx: &ToolContext) -> Option<Profile> {
        self.sandboxes.profile(&ctx.agent, self.sandbox.as_ref())
    }

    /// How long a call may run.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn keel_vars(&self, ctx: &ToolContext) -> Vec<(String, String)> {
        let mut vars = vec![
            (
                "KEEL_WORKSPACE".to_owned(),
                self.workspace_root.display().to_string(),
            ),
            ("KEEL_REQUEST_ID".to_owned(), ctx.request_id.to_string()),
            ("KEEL_TOOL_NAME".to_owned(), self.spec.name.clone()),
        ];
        if let Some(session) = &ctx.session_id {
            vars.push(("KEEL_SESSION_ID".to_owned(), session.to_string()));
        }
        if let Some(parent) = &ctx.traceparent {
            vars.push(("TRACEPARENT".to_owned(), parent.clone()));
        }
        vars
    }
}

#[async_trait]
impl Tool for CommandTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn sandbox(&self, ctx: &ToolContext) -> Option<SandboxRecord> {
        Some(self.profile(ctx)?.record())
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let Some(program) = &self.program else {
            return Err(ToolError::Failed(format!(
                "tool `{}` has an empty command",
                self.spec.name
            )));
        };
        if !self.workspace_root.is_dir() {
            return Err(ToolError::Failed(format!(
                "cannot run `{}`: the workspace root `{}` is not a directory",
                program.display(),
                self.workspace_root.display()
            )));
        }
        let env = child_env(std::env::vars_os(), &self.env, &self.keel_vars(ctx));
        let shown = program.display().to_string();
        let profile = self.profile(ctx);
        let prepared = process::prepare(
            profile.as_ref(),
            program,
            &self.workspace_root,
            &ctx.request_id.to_string(),
            &[],
        )?;
        let (started, argv) = process::argv(prepared.as_ref(), program, &self.args);
        let mut command = process::command(&started, &argv, &self.workspace_root, env, true);
        let guard = prepared.map(|p| p.apply(&mut command));
        let child = command
            .spawn()
            .map_err(|e| process::spawn_error(&shown, &e))?;
        tracing::debug!(
            tool = %self.spec.name,
            request_id = %ctx.request_id,
            pid = child.id(),
            "Command tool started."
        );
        let mut input = args.to_string().into_bytes();
        input.push(b'\n');
        // The whole output (up to a hard bound) goes back: the runtime keeps what exceeds the
        // model's limit as an artifact and shows the model a preview.
        let caps = Caps {
            stdout: MAX_CAPTURE_BYTES.max(ctx.max_output_bytes),
            stderr: STDERR_CAP,
        };
        let ended = process::run_to_end(child, input, caps, self.timeout).await;
        drop(guard);
        match ended {
            Ok(finished) => finish(finished, profile.as_ref()),
            Err(RunError::Wait(e)) => Err(ToolError::Failed(format!(
                "waiting for `{shown}` failed: {e}"
            ))),
            Err(RunError::TimedOut) => {
                tracing::debug!(tool = %self.spec.name, "Command tool timed out.");
                Err(ToolError::Timeout(self.timeout))
            }
        }
    }
}

/// A program path as written: containing `/` and relative means relative to the workspace;
/// a bare name is looked up on `PATH`.
pub(crate) fn resolve_program(program: &str, workspace_root: &Path) -> PathBuf {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        workspace_root.join(path)
    } else {
        path.to_path_buf()
    }
}

/// The result of a finished process.
fn finish(finished: Finished, profile: Option<&Profile>) -> Result<ToolOutput, ToolError> {
    let Finished {
        status,
        stdout: out,
        stderr: err,
    } = finished;
    if !status.success() {
        let mut stderr = String::from_utf8_lossy(&err.bytes).trim().to_owned();
        if err.truncated() {
            stderr.push_str(" […]");
        }
        let what = format!("command {}", process::describe_failure(status));
        let mut message = if stderr.is_empty() {
            what
        } else {
            format!("{what}: {stderr}")
        };
        let blocked = profile.map(|p| crate::sandbox::explain(p, &stderr));
        if let Some(blocked) = blocked.filter(|b| !b.is_empty()) {
            message.push_str(&format!(" ({})", blocked.join("; ")));
        }
        return Err(ToolError::Failed(message));
    }
    let text = String::from_utf8_lossy(&out.bytes);
    if out.truncated() {
        return Ok(ToolOutput::text(format!(
            "{text}\n[output truncated: {} of {} bytes shown]",
            out.bytes.len(),
            out.total
        )));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => Ok(ToolOutput::json(&value)),
        Err(_) => Ok(ToolOutput::text(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "github_token",
            "AWS_SECRET_ACCESS_KEY",
            "DB_Password",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "KEYRING",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "KEEL_WORKSPACE", "TERM"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn relative_programs_with_a_slash_resolve_in_the_workspace() {
        let root = Path::new("/ws");
        assert_eq!(
            resolve_program("./tools/x.sh", root),
            Path::new("/ws/./tools/x.sh")
        );
        assert_eq!(resolve_program("bin/x", root), Path::new("/ws/bin/x"));
        assert_eq!(resolve_program("python3", root), Path::new("python3"));
        assert_eq!(
            resolve_program("/usr/bin/env", root),
            Path::new("/usr/bin/env")
        );
    }
}
