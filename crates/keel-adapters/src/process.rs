//! The program of one run: started in a process group of its own with a clean environment,
//! given its run on stdin, read on stdout (JSON lines) and stderr (logs), waited for, and
//! stopped whole — SIGTERM to the group, SIGKILL after the grace period — however the run
//! ends.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use keel_runtime::adapter::{AdapterAnswer, AdapterFailure, AdapterRun, Progress, RunCalls};
use keel_tools::process::ProcessGroup;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::PROTOCOL;
use crate::endpoints::Endpoints;

/// Variables of Keel's environment every program gets (besides its `envAllow`).
const PASSED: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];
/// The longest stdout line read as a protocol line; a longer one is kept as a log, cut.
const MAX_LINE: usize = 8 << 20;
/// How much of stderr's end a failure quotes, in bytes.
const STDERR_TAIL: usize = 2000;
/// How long the readers may take to reach the end of output once the group is stopped.
const DRAIN: Duration = Duration::from_secs(5);

/// What the program said on stdout.
#[derive(Default)]
struct Said {
    answer: Option<AdapterAnswer>,
    error: Option<String>,
}

pub(crate) async fn run(
    run: &AdapterRun,
    endpoints: &Endpoints,
    grace: Duration,
) -> Result<AdapterAnswer, AdapterFailure> {
    let backend = &run.backend;
    let cwd = match &backend.cwd {
        Some(cwd) => run.workspace_root.join(cwd),
        None => run.workspace_root.clone(),
    };
    if !cwd.is_dir() {
        return Err(AdapterFailure::Start(format!(
            "its `cwd` {} is not a folder",
            cwd.display()
        )));
    }
    let Some(program) = backend.command.first() else {
        return Err(AdapterFailure::Start("its `command` is empty".into()));
    };
    let program = resolve(program, &cwd);
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&backend.command[1..])
        .current_dir(&cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for name in PASSED
        .iter()
        .copied()
        .chain(backend.env_allow.iter().map(String::as_str))
    {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&backend.env);
    let model_url = endpoints.model_url();
    command
        .env("KEEL_PROTOCOL", PROTOCOL.to_string())
        .env("KEEL_RUN_ID", run.request_id.as_str())
        .env("KEEL_AGENT", &run.agent)
        .env("KEEL_MODEL", &run.model)
        .env("KEEL_MODEL_BASE_URL", &model_url)
        .env("KEEL_API_KEY", &endpoints.secret)
        .env("KEEL_TOOLS_URL", endpoints.tools_url())
        .env("OPENAI_BASE_URL", &model_url)
        .env("OPENAI_API_KEY", &endpoints.secret);
    if let Some(session) = &run.session_id {
        command.env("KEEL_SESSION_ID", session.as_str());
    }
    let mut child = command
        .spawn()
        .map_err(|e| AdapterFailure::Start(format!("{}: {e}", program.display())))?;
    let mut group = Group {
        group: child.id().map(ProcessGroup::new),
        grace,
    };
    let document = stdin_document(run, endpoints);
    if let Some(mut stdin) = child.stdin.take() {
        // A program that never reads its stdin must not hold the run up.
        tokio::spawn(async move {
            let _ = stdin.write_all(document.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = child.stdout.take().map(|out| {
        let calls = run.calls.clone();
        tokio::spawn(read_stdout(out, calls))
    });
    let stderr = child.stderr.take().map(|err| {
        let calls = run.calls.clone();
        tokio::spawn(read_stderr(err, calls))
    });
    let waited = match backend.timeout {
        Some(timeout) => tokio::time::timeout(timeout.0, child.wait()).await,
        None => Ok(child.wait().await),
    };
    // Whatever it left running goes with it; the readers then reach the end of output.
    group.stop_now();
    let said = match stdout {
        Some(task) => tokio::time::timeout(DRAIN, task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => Said::default(),
    };
    let tail = match stderr {
        Some(task) => tokio::time::timeout(DRAIN, task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default(),
        None => String::new(),
    };
    let quoted = match tail.trim() {
        "" => String::new(),
        tail => format!("; its stderr ends: {tail}"),
    };
    let status = match waited {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(AdapterFailure::Program(format!("cannot wait for it: {e}"))),
        Err(_) => {
            let timeout = backend.timeout.map(|t| t.0).unwrap_or_default();
            return Err(AdapterFailure::Program(format!(
                "the program did not end within its timeout of {}{quoted}",
                humanize(timeout)
            )));
        }
    };
    if let Some(message) = said.error {
        return Err(AdapterFailure::Program(format!(
            "the program reported a failure: {message}"
        )));
    }
    match said.answer {
        Some(answer) => Ok(answer),
        None if status.success() => Err(AdapterFailure::Program(format!(
            "the program exited without a final answer (a `{{\"type\": \"final\"}}` line on stdout){quoted}"
        ))),
        None => Err(AdapterFailure::Program(format!(
            "the program exited with {status}{quoted}"
        ))),
    }
}

fn humanize(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

/// A relative program path with a `/` is the `cwd`'s; a bare name is looked up in `PATH`.
fn resolve(program: &str, cwd: &Path) -> PathBuf {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        cwd.join(path)
    } else {
        path.to_path_buf()
    }
}

/// The run, as the program reads it on stdin (one JSON document, then end of input).
fn stdin_document(run: &AdapterRun, endpoints: &Endpoints) -> String {
    let mut document = json!({
        "protocol": PROTOCOL,
        "runId": run.request_id,
        "sessionId": run.session_id,
        "agent": run.agent,
        "input": run.input,
        "history": run.history,
        "instructions": run.instructions,
        "messages": run.messages,
        "tools": run.tools,
        "config": run.backend.config,
        "resumed": run.resumed,
        "model": {
            "baseUrl": endpoints.model_url(),
            "apiKey": endpoints.secret,
            "name": run.model,
        },
        "toolsEndpoint": {"url": endpoints.tools_url(), "transport": "streamable_http"},
    })
    .to_string();
    document.push('\n');
    document
}

/// Reads stdout's lines: protocol lines are acted on, the rest kept as logs.
async fn read_stdout(out: impl AsyncRead + Unpin, calls: RunCalls) -> Said {
    let mut said = Said::default();
    let mut lines = Lines::new(out);
    while let Some(line) = lines.next().await {
        let line = match line {
            Line::Whole(line) => line,
            Line::Cut(start) => {
                calls
                    .log(format!(
                        "stdout:{start}… (cut: a line over {MAX_LINE} bytes)"
                    ))
                    .await;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Option<Value> = serde_json::from_str(&line).ok();
        let kind = parsed
            .as_ref()
            .and_then(|v| v.get("type"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (kind.as_deref(), parsed) {
            (Some("final"), Some(value)) if said.answer.is_none() => {
                let output = match value.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                let structured = value.get("value").filter(|v| !v.is_null()).cloned();
                said.answer = Some(AdapterAnswer {
                    output,
                    value: structured,
                });
            }
            (Some("error"), Some(value)) => {
                let message = value
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.to_string(), str::to_owned);
                said.error.get_or_insert(message);
            }
            (Some(kind @ ("progress" | "event" | "plan")), Some(data)) => {
                calls
                    .progress(Progress {
                        kind: kind.to_owned(),
                        data,
                    })
                    .await;
            }
            _ => calls.log(format!("stdout:{line}")).await,
        }
    }
    said
}

/// Reads stderr's lines into logs; returns its last [`STDERR_TAIL`] bytes.
async fn read_stderr(err: impl AsyncRead + Unpin, calls: RunCalls) -> String {
    let mut tail = String::new();
    let mut lines = Lines::new(err);
    while let Some(line) = lines.next().await {
        let line = match line {
            Line::Whole(line) => line,
            Line::Cut(start) => format!("{start}… (cut)"),
        };
        tail.push_str(&line);
        tail.push('\n');
        if tail.len() > 2 * STDERR_TAIL {
            keep_end(&mut tail, STDERR_TAIL);
        }
        calls.log(format!("stderr:{line}")).await;
    }
    keep_end(&mut tail, STDERR_TAIL);
    tail.trim_end().to_owned()
}

/// Keeps the last `max` bytes of `text` or fewer, cut at a character boundary.
fn keep_end(text: &mut String, max: usize) {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.drain(..start);
}

enum Line {
    Whole(String),
    /// A line longer than [`MAX_LINE`]: its first bytes (the rest is skipped).
    Cut(String),
}

/// Lines of a byte stream, each at most [`MAX_LINE`] bytes kept; invalid UTF-8 is replaced.
struct Lines<R> {
    reader: R,
    buffer: Vec<u8>,
    skipping: bool,
    done: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            buffer: Vec::new(),
            skipping: false,
            done: false,
        }
    }

    async fn next(&mut self) -> Option<Line> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if std::mem::take(&mut self.skipping) {
                    continue;
                }
                let text = String::from_utf8_lossy(&line[..line.len() - 1]);
                return Some(Line::Whole(text.trim_end_matches('\r').to_owned()));
            }
            if self.buffer.len() > MAX_LINE {
                let start = String::from_utf8_lossy(&self.buffer[..200]).into_owned();
                self.buffer.clear();
                let was_skipping = std::mem::replace(&mut self.skipping, true);
                if !was_skipping {
                    return Some(Line::Cut(start));
                }
            }
            if self.done {
                if self.buffer.is_empty() || self.skipping {
                    return None;
                }
                let text = String::from_utf8_lossy(&self.buffer).into_owned();
                self.buffer.clear();
                return Some(Line::Whole(text));
            }
            let mut chunk = [0u8; 8192];
            match self.reader.read(&mut chunk).await {
                Ok(0) | Err(_) => self.done = true,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// The program's process group, stopped when dropped: SIGTERM, then SIGKILL to whatever is
/// left after the grace period (the run was cancelled or interrupted while it ran).
struct Group {
    group: Option<ProcessGroup>,
    grace: Duration,
}

impl Group {
    /// Stops what is left of the group at once (the program itself has exited).
    fn stop_now(&mut self) {
        if let Some(group) = self.group.take() {
            group.kill();
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.terminate(self.grace);
        }
    }
}
