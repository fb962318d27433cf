//! [`A2aEchoServer`]: a real remote A2A 1.0 agent for the tests of Keel's A2A client.
//!
//! It runs `fixtures/a2a_echo_server.py` with the venv of [`a2a_python`]: an agent built on the
//! official Python SDK's server classes, serving JSON-RPC and its agent card on 127.0.0.1. What
//! the agent does depends on the message's first word (`echo …`, `slow…` until cancelled,
//! `fail…`, anything else; the script's docstring and the crate README give the details).
//! [`A2aEchoServer::start`] returns once the script has printed its `{"url": …}` line, or panics
//! with the script's stderr when that line does not come. The script appends one JSON line per
//! JSON-RPC call to a log file in a temp dir of its own, which [`A2aEchoServer::log_lines`]
//! reads: a line is written before the call is handled, so it is there once the caller has an
//! answer. The process is killed when the `A2aEchoServer` is dropped, and exits on its own when
//! the test process goes (its stdin closes).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::test_clients::{a2a_echo_server_script, a2a_python};

/// How long the script may take to print its url: Python importing the SDK and protobuf on a
/// busy two-core machine takes seconds, not minutes.
const STARTUP: Duration = Duration::from_secs(60);

/// A running `fixtures/a2a_echo_server.py` on 127.0.0.1.
pub struct A2aEchoServer {
    child: Child,
    url: String,
    log: PathBuf,
    stderr: Arc<Mutex<String>>,
    /// Holds the call log; removed on drop.
    _dir: TempDir,
}

impl A2aEchoServer {
    /// Starts the echo agent with the script's flags: `--require-key KEY` (every JSON-RPC call
    /// needs `Authorization: Bearer KEY`, else HTTP 401) and `--port N`. The call log is passed
    /// by the helper itself; do not pass `--log`. It blocks (on first use it installs the venv):
    /// from an async test call it inside `tokio::task::block_in_place`.
    ///
    /// # Panics
    /// When the venv cannot be installed or the script does not print its url within a minute;
    /// the message carries the script's stderr.
    pub fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("create a temp dir: {e}"));
        let log = dir.path().join("calls.jsonl");
        let mut child = Command::new(a2a_python())
            .arg(a2a_echo_server_script())
            .args(args)
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start the A2A echo server: {e}"));
        let (Some(stdout), Some(stderr_pipe)) = (child.stdout.take(), child.stderr.take()) else {
            panic!("the A2A echo server has no stdout or stderr");
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        let collector = collect_stderr(stderr_pipe, Arc::clone(&stderr));
        let first_line = first_line_of(stdout);
        let url = match first_line.recv_timeout(STARTUP) {
            Ok(line) => parse_url(&line),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("no url line within {STARTUP:?}")),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err("its stdout closed before the url line".to_owned())
            }
        };
        match url {
            Ok(url) => Self {
                child,
                url,
                log,
                stderr,
                _dir: dir,
            },
            Err(why) => {
                let _ = child.kill();
                let status = child.wait();
                let _ = collector.join();
                panic!(
                    "the A2A echo server did not start: {why}; exit: {status:?}; stderr:\n{}",
                    lock(&stderr)
                );
            }
        }
    }

    /// The agent's base URL, `http://127.0.0.1:PORT`: its JSON-RPC endpoint (the card's
    /// interface URL), with the card under `/.well-known/agent-card.json`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The agent card's URL, `http://127.0.0.1:PORT/.well-known/agent-card.json`.
    pub fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// The JSON-RPC calls received so far, one value per call in order of arrival:
    /// `{"method", "id" | ("taskId", "text"), "headers": {"authorization", "a2a-version"},
    /// "authorized"}` (absent headers are `null`; the script's docstring has the details).
    ///
    /// # Panics
    /// When the log cannot be read or a whole line does not parse.
    pub fn log_lines(&self) -> Vec<Value> {
        let text = match std::fs::read_to_string(&self.log) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => panic!("read {}: {e}", self.log.display()),
        };
        // A line still being written (a call whose answer nobody can have yet) is left out.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("a call log line {line:?} does not parse: {e}"))
            })
            .collect()
    }

    /// The [`log_lines`](Self::log_lines) of calls to `method` (`CancelTask`, …).
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        self.log_lines()
            .into_iter()
            .filter(|line| line["method"] == method)
            .collect()
    }

    /// What the script wrote to stderr so far (uvicorn's and the SDK's warnings and errors),
    /// for a failing test's message.
    pub fn stderr(&self) -> String {
        lock(&self.stderr).clone()
    }
}

impl Drop for A2aEchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock(text: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    text.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends the script's first stdout line (or nothing, when stdout closes first) and keeps
/// draining the rest, so the script never blocks on a full pipe.
fn first_line_of(stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = send.send(line);
        }
        lines.map_while(Result::ok).for_each(drop);
    });
    receive
}

/// Appends the script's stderr to `into` until it closes.
fn collect_stderr(stderr: ChildStderr, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut text = lock(&into);
            text.push_str(&line);
            text.push('\n');
        }
    })
}

/// The url of the script's first line, `{"url": "http://127.0.0.1:PORT"}`.
fn parse_url(line: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("its first line {line:?}: {e}"))?;
    value["url"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("its first line {line:?} has no url"))
}
