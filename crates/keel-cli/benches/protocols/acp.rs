//! The ACP surface's client: `keel acp` started as an editor starts it, spoken to in
//! newline-delimited JSON-RPC on its stdin and stdout. Each prompt gets a session of its own
//! (`session/new`, not timed), so every run is the same first turn, as on the other surfaces.

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::http::truncate;
use super::report::Sample;
use super::{EXPECTED, Result};

/// A `keel acp` process, initialized.
pub(crate) struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// The workspace, as `session/new`'s `cwd`.
    cwd: String,
}

impl Acp {
    /// Starts `keel acp -w WORKSPACE --agent AGENT` (stderr to `log`) and initializes it.
    pub(crate) async fn start(
        keel: &Path,
        workspace: &Path,
        agent: &str,
        log: File,
    ) -> Result<Self> {
        let mut child = Command::new(keel)
            .arg("acp")
            .arg("-w")
            .arg(workspace)
            .args(["--agent", agent])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start keel acp: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("keel acp: no stdin or stdout".into());
        };
        let mut acp = Self {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
            cwd: workspace.display().to_string(),
        };
        let init = acp
            .call(
                "initialize",
                json!({ "protocolVersion": 1, "clientCapabilities": {},
                        "clientInfo": { "name": "protocols-bench", "version": "0" } }),
            )
            .await?;
        if init["protocolVersion"] != 1 {
            return Err(format!(
                "initialize answered {}",
                truncate(&init.to_string(), 120)
            ));
        }
        Ok(acp)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    pub(crate) fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("keel acp exited: {status}")),
            Err(e) => Err(format!("cannot check keel acp: {e}")),
        }
    }

    /// Writes one message; returns when it is on the pipe.
    async fn send(&mut self, method: &str, params: Value) -> Result<u64> {
        self.next_id += 1;
        let mut line =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params })
                .to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().ok_or("keel acp's stdin is closed")?;
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("writing to keel acp: {e}"))?;
        Ok(self.next_id)
    }

    /// The next message from `keel acp`.
    async fn receive(&mut self) -> Result<Value> {
        let line = self
            .lines
            .next_line()
            .await
            .map_err(|e| format!("reading keel acp: {e}"))?
            .ok_or("keel acp closed its stdout")?;
        serde_json::from_str(&line).map_err(|_| {
            format!(
                "keel acp wrote a line that is not JSON: {}",
                truncate(&line, 80)
            )
        })
    }

    /// A request outside a prompt: its result. What belongs to an earlier request (a prompt
    /// that timed out and answered late) is passed over.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.send(method, params).await?;
        let message = loop {
            let message = self.receive().await?;
            if message["id"] == id {
                break message;
            }
            if !is_stale(&message, id) {
                return Err(format!(
                    "{method}: unexpected {}",
                    truncate(&message.to_string(), 120)
                ));
            }
        };
        match message.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(format!("{method}: {}", truncate(&message.to_string(), 160))),
        }
    }

    /// One prompt in a new session, read to its response: the first `session/update`, the
    /// first `agent_message_chunk` and the response, from writing the prompt.
    pub(crate) async fn prompt(&mut self, text: &str) -> Result<Sample> {
        let cwd = self.cwd.clone();
        let session = self
            .call("session/new", json!({ "cwd": cwd, "mcpServers": [] }))
            .await?;
        let session = session["sessionId"]
            .as_str()
            .ok_or("session/new answered no sessionId")?
            .to_owned();
        let started = Instant::now();
        let id = self
            .send(
                "session/prompt",
                json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
            )
            .await?;
        let (mut first, mut first_text) = (None, None);
        let mut answer = String::new();
        loop {
            let message = self.receive().await?;
            let at = started.elapsed();
            if message["method"] == "session/update" {
                if message["params"]["sessionId"] != session.as_str() {
                    // An earlier prompt's, answering late.
                    continue;
                }
                first.get_or_insert(at);
                let update = &message["params"]["update"];
                if update["sessionUpdate"] == "agent_message_chunk" {
                    first_text.get_or_insert(at);
                    answer.push_str(update["content"]["text"].as_str().unwrap_or_default());
                }
                continue;
            }
            if is_stale(&message, id) {
                continue;
            }
            if message["id"] != id || message.get("method").is_some() {
                return Err(format!(
                    "unexpected {}",
                    truncate(&message.to_string(), 120)
                ));
            }
            let stop = &message["result"]["stopReason"];
            if stop != "end_turn" {
                return Err(format!(
                    "the prompt answered {}",
                    truncate(&message.to_string(), 160)
                ));
            }
            if answer != EXPECTED {
                return Err(format!(
                    "answer {:?} != {EXPECTED:?}",
                    truncate(&answer, 60)
                ));
            }
            return Ok(Sample {
                first: first.unwrap_or(at),
                text: first_text.unwrap_or(at),
                end: at,
            });
        }
    }

    /// Closes stdin, as an editor leaving does, and waits (10 s at most) for `keel acp` to exit.
    pub(crate) async fn close(&mut self) {
        drop(self.stdin.take());
        let exited = tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait());
        if !matches!(exited.await, Ok(Ok(_))) {
            let _ = self.child.kill().await;
        }
    }
}

/// Whether `message` is the response to a request sent before request `id`.
fn is_stale(message: &Value, id: u64) -> bool {
    message.get("method").is_none() && message["id"].as_u64().is_some_and(|earlier| earlier < id)
}
