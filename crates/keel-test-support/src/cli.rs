//! [`Cli`]: runs a built `keel` binary inside a workspace folder with a clean environment and
//! hands back its exit code, stdout and stderr as text.
//!
//! The binary's path comes from the calling test crate (`env!("CARGO_BIN_EXE_keel")`), so this
//! crate does not depend on the CLI. Commands run with the workspace as their current folder,
//! which is the CLI's default `-w .`; only `PATH` is kept from the caller's environment.
//! [`Cli::serve`] starts `keel serve` on a free loopback port and stops it when dropped.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// A `keel` binary bound to one workspace folder.
#[derive(Debug, Clone)]
pub struct Cli {
    bin: PathBuf,
    dir: PathBuf,
    env: Vec<(String, String)>,
}

/// What a finished `keel` command left behind.
#[derive(Debug, Clone)]
pub struct CliOutput {
    /// The exit code (`None` when a signal ended the process).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// From a finished process.
    pub fn from_output(output: &Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Whether the command exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout read as one JSON value per line (`--json` listings).
    ///
    /// # Panics
    /// When a line is not JSON.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout.lines().map(|line| parse_json(line)).collect()
    }

    /// stdout read as one JSON value.
    ///
    /// # Panics
    /// When stdout is not JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        parse_json(&self.stdout)
    }
}

#[track_caller]
fn parse_json(text: &str) -> Value {
    match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => panic!("not JSON ({e}): {text}"),
    }
}

/// A running `keel serve`, killed (and reaped) when dropped. Its stderr goes to a temporary
/// file; when it is dropped while a test panics, the end of that log is written to stderr, so
/// a failing test shows what each server said.
#[derive(Debug)]
pub struct Serving {
    child: Child,
    addr: String,
    log: Option<tempfile::NamedTempFile>,
}

impl Serving {
    /// `host:port` the server listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The process (to signal it, or to wait for its exit).
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking()
            && let Some(log) = &self.log
        {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(SHOWN_LOG_LINES)..];
            let _ = writeln!(
                std::io::stderr(),
                "--- keel serve on {}: the last {} of {} lines of its stderr ---\n{}",
                self.addr,
                tail.len(),
                lines.len(),
                tail.join("\n")
            );
        }
    }
}

/// How much of a server's stderr a failing test shows.
const SHOWN_LOG_LINES: usize = 200;

impl Cli {
    /// `bin` run inside `dir`.
    pub fn new(bin: impl Into<PathBuf>, dir: impl AsRef<Path>) -> Self {
        Self {
            bin: bin.into(),
            dir: dir.as_ref().to_path_buf(),
            env: vec![("KEEL_LOG".into(), "error".into())],
        }
    }

    /// Adds an environment variable to every command.
    #[must_use]
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The workspace folder the commands run in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A command with `args`, ready to be given pipes and spawned.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).current_dir(&self.dir).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Runs `args` to completion with no stdin.
    ///
    /// # Panics
    /// When the binary cannot be started.
    #[track_caller]
    pub fn run<I, S>(&self, args: I) -> CliOutput
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let output = self.command(args).stdin(Stdio::null()).output();
        match output {
            Ok(output) => CliOutput::from_output(&output),
            Err(e) => panic!("cannot run {}: {e}", self.bin.display()),
        }
    }

    /// Runs `args` to completion with `stdin` written to its standard input.
    ///
    /// # Panics
    /// When the binary cannot be started or fed.
    #[track_caller]
    pub fn run_with_stdin<I, S>(&self, args: I, stdin: &[u8]) -> CliOutput
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let spawned = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => panic!("cannot run {}: {e}", self.bin.display()),
        };
        if let Some(mut input) = child.stdin.take()
            && let Err(e) = input.write_all(stdin)
        {
            panic!("cannot write to the stdin of keel: {e}");
        }
        match child.wait_with_output() {
            Ok(output) => CliOutput::from_output(&output),
            Err(e) => panic!("cannot wait for keel: {e}"),
        }
    }

    /// Starts `keel serve --listen 127.0.0.1:0` and waits for the address it prints.
    ///
    /// # Panics
    /// When the server does not start or prints no address.
    #[track_caller]
    pub fn serve(&self) -> Serving {
        let log = tempfile::NamedTempFile::new().ok();
        let stderr = log
            .as_ref()
            .and_then(|log| log.reopen().ok())
            .map_or_else(Stdio::null, Stdio::from);
        let spawned = self
            .command(["serve", "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => panic!("cannot run {}: {e}", self.bin.display()),
        };
        let mut line = String::new();
        if let Some(stdout) = child.stdout.as_mut() {
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        match line.trim().strip_prefix("listening on http://") {
            Some(addr) => Serving {
                addr: addr.to_owned(),
                child,
                log,
            },
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("keel serve printed no address: {line:?}")
            }
        }
    }

    /// Runs `args` and reads stdout as JSON lines (a `--json` listing).
    #[track_caller]
    pub fn json_lines<I, S>(&self, args: I) -> Vec<Value>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.run(args).json_lines()
    }

    /// The newest recorded run (`keel runs list --json --limit 1`).
    ///
    /// # Panics
    /// When the workspace has no run.
    #[track_caller]
    pub fn newest_run(&self) -> Value {
        match self
            .json_lines(["runs", "list", "--json", "--limit", "1"])
            .into_iter()
            .next()
        {
            Some(run) => run,
            None => panic!("no run recorded in {}", self.dir.display()),
        }
    }

    /// The id of the newest recorded run.
    #[track_caller]
    pub fn newest_run_id(&self) -> String {
        match self.newest_run()["requestId"].as_str() {
            Some(id) => id.to_owned(),
            None => panic!("the newest run has no requestId"),
        }
    }

    /// The stored events of the newest run (`keel runs events <id> --json`).
    #[track_caller]
    pub fn newest_run_events(&self) -> Vec<Value> {
        let id = self.newest_run_id();
        self.json_lines(["runs", "events", &id, "--json"])
    }
}
