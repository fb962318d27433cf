//! Keel runs as A2A 1.0 tasks (the protobuf JSON mapping the SDKs speak): a task is a run
//! (task id = request id), its context the run's session; a run waiting on a human approval
//! is `TASK_STATE_INPUT_REQUIRED`; the answer and the run's stored artifacts are the task's
//! artifacts. [`Updates`] turns a run's events into a task's stream events.

use bytes::Bytes;
use keel::{Event, EventPayload, RunRecord, RunResponse, RunStatus, RuntimeError};
use keel_types::{ApprovalRecord, ArtifactRecord};
use serde_json::{Value, json};

use crate::ApiError;
use crate::openai::stream::{Dialect, Sink};

/// The id of the artifact that holds a task's answer.
pub(super) const ANSWER: &str = "answer";

/// The A2A task state of a run's status.
pub(super) fn state_of(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Queued => "TASK_STATE_SUBMITTED",
        // An interrupted run is resumed (by `keel runs resume` or another replica).
        RunStatus::Running | RunStatus::Interrupted => "TASK_STATE_WORKING",
        RunStatus::WaitingApproval => "TASK_STATE_INPUT_REQUIRED",
        RunStatus::Completed => "TASK_STATE_COMPLETED",
        RunStatus::Failed => "TASK_STATE_FAILED",
        RunStatus::Cancelled => "TASK_STATE_CANCELED",
    }
}

/// An agent's message of text parts (and a data part, if any).
pub(super) fn agent_message(
    task: &str,
    context: &str,
    id: &str,
    text: &str,
    data: Option<Value>,
) -> Value {
    let mut parts = vec![json!({"text": text})];
    if let Some(data) = data {
        parts.push(json!({"data": data}));
    }
    json!({
        "messageId": id,
        "taskId": task,
        "contextId": context,
        "role": "ROLE_AGENT",
        "parts": parts,
    })
}

/// What an approval asks, as the message of an input-required status: the question in words,
/// and its details as data a client can answer from.
pub(super) fn approval_message(task: &str, context: &str, approval: &ApprovalRecord) -> Value {
    let mut text = format!(
        "{} asks to approve the call of `{}` with {}.",
        approval.asked_by, approval.tool, approval.arguments
    );
    if let Some(reason) = &approval.ask_reason {
        text.push_str(&format!(" ({reason})"));
    }
    text.push_str(
        " Reply in this task with `approve` or `deny` (or data {\"approved\": true|false}).",
    );
    agent_message(
        task,
        context,
        &format!("{}-ask", approval.approval_id),
        &text,
        Some(json!({
            "approvalId": approval.approval_id,
            "tool": approval.tool,
            "arguments": approval.arguments,
            "askedBy": approval.asked_by,
        })),
    )
}

/// The answer artifact.
pub(super) fn answer_artifact(output: &str, value: Option<&Value>) -> Value {
    let mut parts = vec![json!({"text": output})];
    if let Some(value) = value {
        parts.push(json!({"data": value}));
    }
    json!({"artifactId": ANSWER, "name": ANSWER, "parts": parts})
}

/// A stored artifact (large output, a file a tool made) as an A2A artifact pointing at the
/// operator API's copy.
pub(super) fn stored_artifact(base: &str, artifact: &ArtifactRecord) -> Value {
    json!({
        "artifactId": artifact.id,
        "name": artifact.name,
        "parts": [{
            "url": format!("{base}/api/artifacts/{}", artifact.id),
            "mediaType": artifact.media_type,
            "filename": artifact.name,
        }],
        "metadata": {"uri": artifact.uri, "bytes": artifact.bytes, "sha256": artifact.sha256},
    })
}

/// A task as `GetTask` and `SendMessage` answer it: its status (with the approval asked when
/// it waits for one, or the answer or error when it has ended), the answer and stored
/// artifacts, and the conversation of the turn.
pub(super) fn task_of(
    run: &RunRecord,
    context: &str,
    waiting: Option<&ApprovalRecord>,
    artifacts: &[Value],
) -> Value {
    let id = run.request_id.as_str();
    let mut status = json!({
        "state": state_of(run.status),
        "timestamp": run.ended_at.as_deref().unwrap_or(&run.started_at),
    });
    let mut all = Vec::new();
    if let Some(output) = &run.output
        && run.status == RunStatus::Completed
    {
        all.push(answer_artifact(output, run.value.as_ref()));
        status["message"] = agent_message(id, context, &format!("{id}-answer"), output, None);
    }
    all.extend(artifacts.iter().cloned());
    if let Some(error) = &run.error {
        status["message"] =
            agent_message(id, context, &format!("{id}-error"), &error.message, None);
    }
    if let Some(approval) = waiting {
        status["message"] = approval_message(id, context, approval);
    }
    let mut history = vec![json!({
        "messageId": format!("{id}-input"),
        "taskId": id,
        "contextId": context,
        "role": "ROLE_USER",
        "parts": [{"text": run.input}],
    })];
    if let Some(message) = status.get("message") {
        history.push(message.clone());
    }
    json!({
        "id": id,
        "contextId": context,
        "status": status,
        "artifacts": all,
        "history": history,
        "metadata": {"agent": run.agent},
    })
}

/// A JSON-RPC result as one SSE frame.
pub(super) fn result_frame(id: &Value, result: Value) -> Bytes {
    let data = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    Bytes::from(format!("data: {data}\n\n"))
}

/// A JSON-RPC error as one SSE frame.
pub(super) fn error_frame(id: &Value, code: i64, message: &str) -> Bytes {
    let data = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string();
    Bytes::from(format!("data: {data}\n\n"))
}

/// A task's stream: its frames (through `openai::stream`'s bounded outbox) and the state
/// that turns the run's events into them.
pub(super) struct TaskStream {
    pub rpc_id: Value,
    pub task: String,
    pub context: String,
    pub base: String,
    /// The first frame: the task as it is when the stream opens.
    pub first: Value,
}

impl Dialect for TaskStream {
    fn opening(&self) -> Vec<Bytes> {
        vec![result_frame(&self.rpc_id, json!({"task": self.first}))]
    }

    fn text(&self, _: u64, _: String) -> Bytes {
        // The answer is sent whole, as the task's answer artifact.
        Bytes::new()
    }

    fn closing(&self, response: Result<RunResponse, RuntimeError>) -> Vec<Bytes> {
        let message = match response {
            Ok(response) => format!(
                "the run ended `{}` without its final event",
                json!(response.status)
            ),
            Err(error) => format!("the run ended abnormally: {error}"),
        };
        vec![self.status("TASK_STATE_FAILED", Some(&message))]
    }

    fn cut_off(&self, error: ApiError) -> Bytes {
        error_frame(
            &self.rpc_id,
            -32603,
            error.body()["error"]["message"]
                .as_str()
                .unwrap_or("cut off"),
        )
    }
}

impl TaskStream {
    fn status(&self, state: &str, text: Option<&str>) -> Bytes {
        let mut status = json!({"state": state, "timestamp": keel_types::now_rfc3339()});
        if let Some(text) = text {
            status["message"] = agent_message(
                &self.task,
                &self.context,
                &format!("{}-{}", self.task, state.to_lowercase()),
                text,
                None,
            );
        }
        self.update(json!({"statusUpdate": {
            "taskId": self.task, "contextId": self.context, "status": status,
        }}))
    }

    fn update(&self, result: Value) -> Bytes {
        result_frame(&self.rpc_id, result)
    }

    fn artifact(&self, artifact: Value) -> Bytes {
        self.update(json!({"artifactUpdate": {
            "taskId": self.task, "contextId": self.context, "artifact": artifact,
            "lastChunk": true,
        }}))
    }

    /// Pushes the frames of `event`; `pending` says whether an approval asked still waits.
    /// Whether the stream has ended (closed): the run ended or waits for a human.
    pub(super) fn on_event(&self, event: &Event, sink: &Sink, pending: bool) -> bool {
        match &event.payload {
            EventPayload::ApprovalRequested { approval } if pending => {
                let status = json!({
                    "state": "TASK_STATE_INPUT_REQUIRED",
                    "timestamp": keel_types::now_rfc3339(),
                    "message": approval_message(&self.task, &self.context, approval),
                });
                sink.close(vec![self.update(json!({"statusUpdate": {
                    "taskId": self.task, "contextId": self.context, "status": status,
                }}))]);
                return true;
            }
            EventPayload::ApprovalResolved { .. } => {
                sink.frame(self.status("TASK_STATE_WORKING", None))
            }
            EventPayload::ArtifactCreated { artifact, .. } => {
                sink.frame(self.artifact(stored_artifact(&self.base, artifact)));
            }
            EventPayload::RequestCompleted { output, value, .. } => {
                sink.close(vec![
                    self.artifact(answer_artifact(output, value.as_ref())),
                    self.status("TASK_STATE_COMPLETED", Some(output)),
                ]);
                return true;
            }
            EventPayload::RequestFailed { error, .. } => {
                sink.close(vec![self.status("TASK_STATE_FAILED", Some(&error.message))]);
                return true;
            }
            EventPayload::RequestCancelled { reason, .. } => {
                sink.close(vec![self.status("TASK_STATE_CANCELED", Some(reason))]);
                return true;
            }
            EventPayload::RequestInterrupted { reason, .. } => {
                // The run is resumable: the task goes on; this stream ends (subscribe again).
                sink.close(vec![self.status(
                    "TASK_STATE_WORKING",
                    Some(&format!(
                        "the run stopped ({reason}) and resumes; subscribe to the task again"
                    )),
                )]);
                return true;
            }
            _ => {}
        }
        false
    }
}
