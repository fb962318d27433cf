//! Child processes of tools: the machinery `command` tools and `shell` share.
//!
//! `command` prepares a process the same way for both: a cleaned environment
//! ([`child_env`]), piped output, and its own process group. `run_to_end` then feeds its
//! stdin, reads stdout and stderr concurrently under size caps, and waits for it under a
//! timeout. The process group — the command and anything it forked — is killed on timeout,
//! when the future is dropped (cancellation), and as soon as the command itself exits, so no
//! tool process outlives its call.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use crate::sandbox::{Prepared, Profile};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use keel_types::ToolError;
use keel_workspace::looks_secret;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// A process in its own group, with a cleaned environment, piped stdout and stderr, and stdin
/// piped when `with_stdin` (otherwise `/dev/null`, so a command reading stdin never hangs).
pub(crate) fn command(
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = impl AsRef<OsStr>>,
    cwd: &Path,
    env: BTreeMap<OsString, OsString>,
    with_stdin: bool,
) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(if with_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
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

/// What starting `program` (for request `request_id`) in `profile`'s sandbox needs, when
/// there is a profile: build the command from [`Prepared::argv`], then
/// [`Prepared::apply`] it and keep the guard until the process has ended.
pub(crate) fn prepare(
    profile: Option<&Profile>,
    program: &Path,
    workspace_root: &Path,
    request_id: &str,
    extra_read: &[PathBuf],
) -> Result<Option<Prepared>, ToolError> {
    let Some(profile) = profile else {
        return Ok(None);
    };
    let temp_dir = crate::sandbox::run_temp_dir(request_id);
    crate::sandbox::note_run_temp_dir(request_id);
    profile
        .prepare(program, workspace_root, &temp_dir, extra_read)
        .map(Some)
        .map_err(|e| ToolError::Failed(e.to_string()))
}

/// The program and arguments to start: themselves, or as the sandbox runs them.
pub(crate) fn argv(
    prepared: Option<&Prepared>,
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = impl AsRef<OsStr>>,
) -> (OsString, Vec<OsString>) {
    match prepared {
        Some(prepared) => prepared.argv(program, args),
        None => (
            program.as_ref().to_os_string(),
            args.into_iter()
                .map(|a| a.as_ref().to_os_string())
                .collect(),
        ),
    }
}

/// Why a program could not be started, in words.
pub(crate) fn spawn_error(program: &str, err: &io::Error) -> ToolError {
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
pub(crate) struct Captured {
    pub bytes: Vec<u8>,
    /// Everything the process wrote, kept or not.
    pub total: usize,
}

impl Captured {
    /// Whether some of the output was not kept.
    pub(crate) fn truncated(&self) -> bool {
        self.total > self.bytes.len()
    }
}

/// A process that ran to its end.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Why [`run_to_end`] did not see the process finish.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The timeout passed; the process group was killed.
    TimedOut,
    /// Waiting for the process failed.
    Wait(io::Error),
}

/// Caps on what is kept of a process's output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub stdout: usize,
    pub stderr: usize,
}

/// Runs a spawned `child` (from [`command`]) to its end: writes `input` to its stdin (when
/// piped) and closes it, captures stdout and stderr under `caps`, and waits at most
/// `timeout`. The child's process group is killed when the child exits, on timeout, and when
/// this future is dropped.
pub(crate) async fn run_to_end(
    mut child: Child,
    input: Vec<u8>,
    caps: Caps,
    timeout: Duration,
) -> Result<Finished, RunError> {
    // Declared after `child`, so it is dropped first: the group is killed, then the child
    // handle (with `kill_on_drop`) is dropped and reaped by tokio.
    let group = child.id().map(ProcessGroup);
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
        let ((), stdout, stderr, status) = tokio::join!(
            feed,
            read_capped(stdout, caps.stdout),
            read_capped(stderr, caps.stderr),
            exited
        );
        (stdout, stderr, status)
    };
    match tokio::time::timeout(timeout, run).await {
        Ok((stdout, stderr, status)) => Ok(Finished {
            status: status.map_err(RunError::Wait)?,
            stdout,
            stderr,
        }),
        Err(_) => {
            if let Some(group) = &group {
                group.kill();
            }
            let _ = child.start_kill();
            let _ = child.wait().await;
            Err(RunError::TimedOut)
        }
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

/// How a process ended that did not exit 0, in words: `exited with status 2`, `was killed by
/// signal 9`.
pub(crate) fn describe_failure(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => match std::os::unix::process::ExitStatusExt::signal(&status) {
            Some(signal) => format!("was killed by signal {signal}"),
            None => "failed".to_owned(),
        },
    }
}

/// The process group of a running child (started with `process_group(0)`, so its group id
/// is its pid); the whole group is killed when this is dropped.
#[derive(Debug)]
pub struct ProcessGroup(u32);

impl ProcessGroup {
    /// The group led by process `pid`.
    pub fn new(pid: u32) -> Self {
        Self(pid)
    }

    /// Sends SIGKILL to every process in the group.
    pub fn kill(&self) {
        kill_group(self.0);
    }

    /// Stops the group politely, without waiting: SIGTERM now, SIGKILL to whatever is left
    /// after `grace` (a thread of its own watches, so this works outside async code too).
    /// Consumes the group without the SIGKILL of its drop.
    pub fn terminate(self, grace: std::time::Duration) {
        let pgid = self.0;
        std::mem::forget(self);
        if !signal_group(pgid, libc::SIGTERM) {
            return;
        }
        std::thread::spawn(move || {
            let step = std::time::Duration::from_millis(50);
            let mut waited = std::time::Duration::ZERO;
            while waited < grace {
                std::thread::sleep(step);
                waited += step;
                if !signal_group(pgid, 0) {
                    return;
                }
            }
            kill_group(pgid);
        });
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends SIGKILL to every process in group `pgid`. Errors (the group is already gone) are
/// ignored.
pub(crate) fn kill_group(pgid: u32) {
    signal_group(pgid, libc::SIGKILL);
}

/// Sends `signal` to every process in group `pgid` (0: none, only checks); whether the group
/// still had a process.
#[allow(unsafe_code)]
fn signal_group(pgid: u32, signal: libc::c_int) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // Never signal our own group, init, or "every process" (-1).
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of ours; a negative pid sends
    // the signal to that process group only, and `pgid > 1` rules out the special values.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

/// What a program run by [`run_program`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramOutput {
    /// The exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `argv` (a program and its arguments; a program path with a `/` is relative to `cwd`)
/// in `cwd` with `stdin`, the process-group, cleaned-environment and output-cap machinery of
/// command tools, for at most `timeout`. For programs the workspace's author runs
/// themselves (an eval's `command` grader), so without a tool's sandbox.
pub async fn run_program(
    argv: &[String],
    cwd: &Path,
    stdin: Vec<u8>,
    timeout: Duration,
) -> Result<ProgramOutput, ToolError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(ToolError::Failed("no program to run".into()));
    };
    // A path with a `/` is the workspace's own program.
    let resolved = match program.contains('/') && Path::new(program).is_relative() {
        true => cwd.join(program),
        false => PathBuf::from(program),
    };
    let env = child_env(std::env::vars_os(), &BTreeMap::new(), &[]);
    let child = command(&resolved, args, cwd, env, true)
        .spawn()
        .map_err(|e| spawn_error(program, &e))?;
    let caps = Caps {
        stdout: 1 << 20,
        stderr: 64 << 10,
    };
    match run_to_end(child, stdin, caps, timeout).await {
        Ok(finished) => Ok(ProgramOutput {
            code: finished.status.code(),
            stdout: String::from_utf8_lossy(&finished.stdout.bytes).into_owned(),
            stderr: String::from_utf8_lossy(&finished.stderr.bytes).into_owned(),
        }),
        Err(RunError::TimedOut) => Err(ToolError::Failed(format!(
            "`{program}` did not finish within {timeout:?}"
        ))),
        Err(RunError::Wait(e)) => Err(ToolError::Failed(format!(
            "waiting for `{program}` failed: {e}"
        ))),
    }
}
