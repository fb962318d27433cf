//! The A2A 1.0 client behind `RemoteAgent`s (JSON-RPC binding): a run's input becomes a
//! `SendStreamingMessage` whose SSE updates are reported as they come (the task, each state
//! change, the answer's text); a resumed run re-attaches with `SubscribeToTask` (or reads the
//! ended task with `GetTask`). The future being dropped before the task ended — the run was
//! cancelled — sends `CancelTask`. Every request carries `A2A-Version: 1.0` and the
//! document's headers.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::StreamExt;
use keel_runtime::adapter::{RemoteAgents, RemoteEnd, RemoteTask, RemoteUpdate};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The A2A protocol version sent.
const VERSION: &str = "1.0";

/// The A2A client.
#[derive(Clone)]
pub struct A2aClient {
    http: reqwest::Client,
}

impl A2aClient {
    /// A client with its own connection pool.
    pub fn new() -> Result<Self, String> {
        // reqwest is built without a compiled-in TLS crypto provider; ring is Keel's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the A2A HTTP client: {e}"))?;
        Ok(Self { http })
    }
}

/// What the stream said so far.
#[derive(Default)]
struct Seen {
    state: String,
    /// The answer's text: artifact text parts, in order.
    text: String,
    /// The first data part of the artifacts.
    value: Option<Value>,
    /// The last status message's text.
    message: Option<String>,
}

/// Cancels the remote task when dropped before it ended.
struct CancelOnDrop {
    client: A2aClient,
    task: RemoteTask,
    id: Arc<Mutex<Option<String>>>,
    ended: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        // An interrupted run is resumed and re-attaches to the task: leave it running.
        if self.ended || self.task.interrupted.is_cancelled() {
            return;
        }
        let Some(id) = self.id.lock().ok().and_then(|id| id.clone()) else {
            return;
        };
        let client = self.client.clone();
        let task = self.task.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let params = json!({"id": id});
                if let Err(error) = client.call(&task, "CancelTask", params).await {
                    tracing::warn!(%error, task = %id, "cancelling the remote task failed");
                }
            });
        }
    }
}

#[async_trait]
impl RemoteAgents for A2aClient {
    async fn run(
        &self,
        task: RemoteTask,
        updates: mpsc::Sender<RemoteUpdate>,
    ) -> Result<RemoteEnd, String> {
        let id = Arc::new(Mutex::new(task.attach.clone()));
        let mut guard = CancelOnDrop {
            client: self.clone(),
            task: task.clone(),
            id: id.clone(),
            ended: false,
        };
        let outcome = match &task.attach {
            Some(remote) => self.reattach(&task, remote, &updates, &id).await,
            None => {
                let message = json!({
                    "messageId": format!("{}-input", task.request_id),
                    "role": "ROLE_USER",
                    "parts": [{"text": task.input}],
                });
                let params = json!({"message": message});
                self.stream(&task, "SendStreamingMessage", params, &updates, &id)
                    .await
            }
        };
        guard.ended = true;
        outcome
    }
}

impl A2aClient {
    /// The request for `method` with `params`, with the document's headers.
    fn request(&self, task: &RemoteTask, method: &str, params: Value) -> reqwest::RequestBuilder {
        let body = json!({
            "jsonrpc": "2.0",
            "id": format!("{}-{method}", task.request_id),
            "method": method,
            "params": params,
        });
        let mut request = self
            .http
            .post(&task.backend.url)
            .header("A2A-Version", VERSION)
            .json(&body);
        for (name, value) in &task.backend.headers {
            request = request.header(name, value);
        }
        if let Some(timeout) = task.backend.timeout {
            request = request.timeout(timeout.0);
        }
        request
    }

    /// A whole JSON-RPC call: its result.
    async fn call(&self, task: &RemoteTask, method: &str, params: Value) -> Result<Value, String> {
        let response = self
            .request(task, method, params)
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("{method}: HTTP {status}, not JSON-RPC: {e}"))?;
        result_of(method, status, body)
    }

    /// Re-attaches to task `remote`: its rest as a stream, or its end when it has ended.
    async fn reattach(
        &self,
        task: &RemoteTask,
        remote: &str,
        updates: &mpsc::Sender<RemoteUpdate>,
        id: &Arc<Mutex<Option<String>>>,
    ) -> Result<RemoteEnd, String> {
        let now = self.call(task, "GetTask", json!({"id": remote})).await?;
        let mut seen = Seen::default();
        absorb_task(&now, &mut seen, updates).await;
        if is_final(&seen.state) {
            return Ok(end_of(seen));
        }
        self.stream(task, "SubscribeToTask", json!({"id": remote}), updates, id)
            .await
    }

    /// A streaming call: each SSE event's result reported, until the stream ends.
    async fn stream(
        &self,
        task: &RemoteTask,
        method: &str,
        params: Value,
        updates: &mpsc::Sender<RemoteUpdate>,
        id: &Arc<Mutex<Option<String>>>,
    ) -> Result<RemoteEnd, String> {
        let response = self
            .request(task, method, params)
            .header("Accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let status = response.status();
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error answered as one JSON-RPC response (or an HTTP error).
            let body: Value = response
                .json()
                .await
                .map_err(|e| format!("{method}: HTTP {status}: {e}"))?;
            return result_of(method, status, body)
                .map(|_| RemoteEnd::Failed(format!("{method} answered without a stream")));
        }
        let mut seen = Seen::default();
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("{method}: the stream broke: {e}"))?;
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some((event, rest)) = split_event(&buffer) {
                let data = event_data(&event);
                buffer = rest;
                if data.is_empty() {
                    continue;
                }
                let message: Value = serde_json::from_str(&data)
                    .map_err(|e| format!("{method}: an event is not JSON: {e}"))?;
                let result = result_of(method, status, message)?;
                if let Some(task_value) = result.get("task") {
                    if let Some(task_id) = task_value.get("id").and_then(Value::as_str)
                        && let Ok(mut id) = id.lock()
                    {
                        *id = Some(task_id.to_owned());
                    }
                    absorb_task(task_value, &mut seen, updates).await;
                } else if let Some(update) = result.get("statusUpdate") {
                    absorb_status(&update["status"], &mut seen, updates).await;
                } else if let Some(update) = result.get("artifactUpdate") {
                    absorb_artifact(&update["artifact"], &mut seen, updates).await;
                } else if let Some(message) = result.get("message") {
                    // A direct answer (no task).
                    seen.text.push_str(&texts(message));
                    seen.state = "TASK_STATE_COMPLETED".into();
                }
            }
        }
        if seen.state.is_empty() {
            return Err(format!(
                "{method}: the stream ended before the task was reported"
            ));
        }
        Ok(end_of(seen))
    }
}

/// The result of a JSON-RPC response, or its error in words.
fn result_of(method: &str, status: reqwest::StatusCode, body: Value) -> Result<Value, String> {
    if let Some(error) = body.get("error") {
        return Err(format!(
            "{method}: JSON-RPC error {}: {}",
            error.get("code").unwrap_or(&Value::Null),
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
        ));
    }
    if !status.is_success() {
        return Err(format!("{method}: HTTP {status}: {body}"));
    }
    body.get("result")
        .cloned()
        .ok_or_else(|| format!("{method}: a response without `result`"))
}

/// The first complete SSE event in `buffer` and what follows it.
fn split_event(buffer: &str) -> Option<(String, String)> {
    let normalized = buffer.find("\n\n").or_else(|| buffer.find("\r\n\r\n"));
    let at = normalized?;
    let skip = if buffer[at..].starts_with("\r\n\r\n") {
        4
    } else {
        2
    };
    Some((buffer[..at].to_owned(), buffer[at + skip..].to_owned()))
}

/// The joined `data:` lines of one SSE event (comments and other fields left out).
fn event_data(event: &str) -> String {
    event
        .lines()
        .filter_map(|line| line.trim_end_matches('\r').strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text parts of a message or an artifact, joined.
fn texts(holder: &Value) -> String {
    holder["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

async fn absorb_task(task: &Value, seen: &mut Seen, updates: &mpsc::Sender<RemoteUpdate>) {
    let id = task.get("id").and_then(Value::as_str).unwrap_or_default();
    let context = task
        .get("contextId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let _ = updates
        .send(RemoteUpdate::Task {
            id: id.to_owned(),
            context_id: context.to_owned(),
        })
        .await;
    for artifact in task["artifacts"].as_array().into_iter().flatten() {
        absorb_artifact(artifact, seen, updates).await;
    }
    absorb_status(&task["status"], seen, updates).await;
}

async fn absorb_status(status: &Value, seen: &mut Seen, updates: &mpsc::Sender<RemoteUpdate>) {
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or("TASK_STATE_UNSPECIFIED");
    let message = status.get("message").map(texts).filter(|t| !t.is_empty());
    seen.state = state.to_owned();
    if message.is_some() {
        seen.message.clone_from(&message);
    }
    let _ = updates
        .send(RemoteUpdate::Status {
            state: state.to_owned(),
            message,
        })
        .await;
}

async fn absorb_artifact(artifact: &Value, seen: &mut Seen, updates: &mpsc::Sender<RemoteUpdate>) {
    let text = texts(artifact);
    if seen.value.is_none() {
        seen.value = artifact["parts"]
            .as_array()
            .and_then(|parts| parts.iter().find_map(|p| p.get("data").cloned()));
    }
    if !text.is_empty() {
        seen.text.push_str(&text);
        let _ = updates.send(RemoteUpdate::Text(text)).await;
    }
}

fn is_final(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
    )
}

/// How a task that said `seen` ended.
fn end_of(seen: Seen) -> RemoteEnd {
    let why = || seen.message.clone().unwrap_or_else(|| seen.state.clone());
    match seen.state.as_str() {
        "TASK_STATE_COMPLETED" => RemoteEnd::Completed {
            output: if seen.text.is_empty() {
                seen.message.clone().unwrap_or_default()
            } else {
                seen.text.clone()
            },
            value: seen.value.clone(),
        },
        "TASK_STATE_CANCELED" => RemoteEnd::Cancelled(why()),
        "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => RemoteEnd::InputRequired(why()),
        "TASK_STATE_FAILED" | "TASK_STATE_REJECTED" => RemoteEnd::Failed(why()),
        other => RemoteEnd::Failed(format!("the stream ended while the task was `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_on_blank_lines_either_way() {
        let (first, rest) = split_event("data: {\"a\":1}\r\n\r\ndata: x").unwrap();
        assert_eq!(event_data(&first), "{\"a\":1}");
        assert_eq!(rest, "data: x");
        assert!(split_event(&rest).is_none());
        assert_eq!(event_data(": ping\ndata: a\ndata: b"), "a\nb");
    }
}
