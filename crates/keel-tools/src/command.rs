//! Command tools: a `kind: Tool` document with `impl: {kind: command}` run as a process.
//!
//! [`CommandTool::call`] starts the argv in the workspace root, in its own process group,
//! writes the JSON arguments to stdin and closes it, and reads stdout and stderr concurrently
//! under size bounds. Exit 0 is success (stdout is the result, compacted when it is JSON); any
//! other exit fails with the trimmed stderr. The process group — the command and anything it
//! forked — is killed on timeout, when the call future is dropped (cancellation), and as soon
//! as the command itself exits, so no tool process outlives its call.
//!
//! The child's environment is the runtime's minus anything that looks like a secret
//! ([`looks_secret`]), plus the document's `env` and `KEEL_WORKSPACE`, `KEEL_REQUEST_ID`,
//! `KEEL_TOOL_NAME` (and `KEEL_SESSION_ID` when there is a session).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
pub use keel_workspace::looks_secret;
use keel_workspace::{ToolImpl, ToolSpecDoc};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// The timeout when the document sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this much of stderr is kept for the error message.
pub const STDERR_CAP: usize = 8 * 1024;

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
        }
    }

    /// How long a call may run.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn command(&self, program: &Path, ctx: &ToolContext) -> Command {
        let mut command = Command::new(program);
        command
            .args(&self.args)
            .current_dir(&self.workspace_root)
            .env_clear()
            .envs(child_env(
                std::env::vars_os(),
                &self.env,
                &self.keel_vars(ctx),
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        command
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
        let mut child = self
            .command(program, ctx)
            .spawn()
            .map_err(|e| spawn_error(program, &e))?;
        // Declared after `child`, so it is dropped first: the group is killed, then the child
        // handle (with `kill_on_drop`) is dropped and reaped by tokio.
        let group = child.id().map(ProcessGroup);
        tracing::debug!(
            tool = %self.spec.name,
            request_id = %ctx.request_id,
            pid = child.id(),
            "Command tool started."
        );

        let mut input = args.to_string().into_bytes();
        input.push(b'\n');
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let run = async {
            let feed = async {
                if let Some(mut stdin) = stdin {
                    // The command may exit without reading its input; that is not an error.
                    let _ = stdin.write_all(&input).await;
                    let _ = stdin.shutdown().await;
                }
            };
            // Once the command exits, whatever it left running in its group is killed, so a
            // background process holding stdout open cannot stretch the call to its timeout.
            let exited = async {
                let status = child.wait().await;
                if let Some(group) = &group {
                    group.kill();
                }
                status
            };
            let ((), out, err, status) = tokio::join!(
                feed,
                read_capped(stdout, ctx.max_output_bytes),
                read_capped(stderr, STDERR_CAP),
                exited
            );
            (out, err, status)
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok((out, err, status)) => {
                let status = status.map_err(|e| {
                    ToolError::Failed(format!("waiting for `{}` failed: {e}", program.display()))
                })?;
                finish(status, out, err)
            }
            Err(_) => {
                tracing::debug!(tool = %self.spec.name, "Command tool timed out.");
                if let Some(group) = &group {
                    group.kill();
                }
                let _ = child.start_kill();
                let _ = child.wait().await;
                Err(ToolError::Timeout(self.timeout))
            }
        }
    }
}

/// A program path as written: containing `/` and relative means relative to the workspace;
/// a bare name is looked up on `PATH`.
fn resolve_program(program: &str, workspace_root: &Path) -> PathBuf {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        workspace_root.join(path)
    } else {
        path.to_path_buf()
    }
}

fn spawn_error(program: &Path, err: &io::Error) -> ToolError {
    let program = program.display();
    match err.kind() {
        io::ErrorKind::NotFound => {
            ToolError::Failed(format!("cannot run `{program}`: program not found"))
        }
        io::ErrorKind::PermissionDenied => {
            ToolError::Failed(format!("cannot run `{program}`: permission denied"))
        }
        _ => ToolError::Failed(format!("cannot run `{program}`: {err}")),
    }
}

/// Output read from a pipe, kept up to a cap.
#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    /// Everything the process wrote, kept or not.
    total: usize,
}

impl Captured {
    fn truncated(&self) -> bool {
        self.total > self.bytes.len()
    }
}

/// Reads `pipe` to its end, keeping the first `cap` bytes and discarding the rest (the child
/// must never block on a full pipe). Read errors end the capture.
async fn read_capped<R: AsyncRead + Unpin>(pipe: Option<R>, cap: usize) -> Captured {
    let mut captured = Captured::default();
    let Some(mut pipe) = pipe else {
        return captured;
    };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(captured.bytes.len());
                captured
                    .bytes
                    .extend_from_slice(chunk.get(..n.min(room)).unwrap_or_default());
                captured.total += n;
            }
        }
    }
    captured
}

/// The result of a finished process.
fn finish(status: ExitStatus, out: Captured, err: Captured) -> Result<ToolOutput, ToolError> {
    if !status.success() {
        let mut stderr = String::from_utf8_lossy(&err.bytes).trim().to_owned();
        if err.truncated() {
            stderr.push_str(" […]");
        }
        let what = match status.code() {
            Some(code) => format!("command exited with status {code}"),
            None => match std::os::unix::process::ExitStatusExt::signal(&status) {
                Some(signal) => format!("command was killed by signal {signal}"),
                None => "command failed".to_owned(),
            },
        };
        return Err(ToolError::Failed(if stderr.is_empty() {
            what
        } else {
            format!("{what}: {stderr}")
        }));
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

/// The child's environment: `inherited` without secret-looking names, then the tool's own
/// `env` (declared explicitly, so kept whatever the name), then Keel's variables.
pub fn child_env(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    tool_env: &BTreeMap<String, String>,
    keel_vars: &[(String, String)],
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = inherited
        .into_iter()
        .filter(|(name, _)| !looks_secret(&name.to_string_lossy()))
        .collect();
    for (name, value) in tool_env.iter().chain(keel_vars.iter().map(|(n, v)| (n, v))) {
        env.insert(name.into(), value.into());
    }
    env
}

/// The process group of a running command; killed when dropped.
#[derive(Debug)]
struct ProcessGroup(u32);

impl ProcessGroup {
    fn kill(&self) {
        kill_group(self.0);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends SIGKILL to every process in group `pgid`. Errors (the group is already gone) are
/// ignored.
#[allow(unsafe_code)]
fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    // Never signal our own group, init, or "every process" (-1).
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of ours; a negative pid sends
    // the signal to that process group only, and `pgid > 1` rules out the special values.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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
    fn child_env_drops_inherited_secrets_but_keeps_declared_ones() {
        let inherited = [
            ("PATH", "/bin"),
            ("TEST_API_KEY", "sk-123"),
            ("MY_TOKEN", "t"),
            ("HOME", "/home/x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let declared = BTreeMap::from([("SERVICE_TOKEN".to_owned(), "declared".to_owned())]);
        let keel = [("KEEL_TOOL_NAME".to_owned(), "t".to_owned())];
        let env = child_env(inherited, &declared, &keel);
        let names: Vec<_> = env.keys().map(|k| k.to_str().unwrap()).collect();
        assert_eq!(names, ["HOME", "KEEL_TOOL_NAME", "PATH", "SERVICE_TOKEN"]);
        assert_eq!(env[&OsString::from("SERVICE_TOKEN")], "declared");
    }

    #[test]
    fn declared_env_overrides_inherited_values() {
        let inherited = [(OsString::from("LANG"), OsString::from("C"))];
        let declared = BTreeMap::from([("LANG".to_owned(), "en_US.UTF-8".to_owned())]);
        let env = child_env(inherited, &declared, &[]);
        assert_eq!(env[&OsString::from("LANG")], "en_US.UTF-8");
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
