//! `POST /a2a/{agent}`: A2A's JSON-RPC methods over Keel runs. Every answer is HTTP 200 with a
//! JSON-RPC response (or an SSE stream of them), its `id` the request's, as sent.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::{
    ApprovalScope, ApprovalStatus, EventPayload, RequestId, RequestOptions, RunRecord, RunStatus,
};
use keel_types::ApprovalRecord;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::task::{TaskStream, stored_artifact, task_of};
use crate::follow::{Followed, Follower, approval_pending};
use crate::openai::stream::{Dialect, frames_response};
use crate::requests::{finish_in_background, start_run};
use crate::state::{AppState, Principal};

/// Who decided approvals answered through A2A.
const DECIDER: &str = "a2a";

/// A JSON-RPC error: its code and message.
struct RpcError(i64, String);

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL: i64 = -32603;
const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const PUSH_NOT_SUPPORTED: i64 = -32003;
const UNSUPPORTED: i64 = -32004;
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError(INVALID_PARAMS, message.into())
}

fn internal(error: impl std::fmt::Display) -> RpcError {
    RpcError(INTERNAL, error.to_string())
}

/// The call being answered.
struct Call {
    state: AppState,
    principal: Principal,
    agent: String,
    id: Value,
    base: String,
}

/// `POST /a2a/{agent}`.
pub(crate) async fn rpc(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // A request that is not a JSON-RPC request of a method A2A has (a broken envelope) is an
    // HTTP 400 in Keel's error shape; a method's own errors are JSON-RPC errors, with 200.
    let reply = |id: &Value, outcome: Result<Value, RpcError>| -> Response {
        match outcome {
            Err(RpcError(code @ (PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND), message)) => {
                crate::ApiError::BadRequest {
                    message: format!(
                        "not an A2A JSON-RPC request (JSON-RPC error {code}): {message}"
                    ),
                    param: None,
                }
                .into_response()
            }
            Ok(result) => {
                Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
            }
            Err(RpcError(code, message)) => Json(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
            )
            .into_response(),
        }
    };
    let request: Value = match body.ok().map(|b| serde_json::from_slice::<Value>(&b)) {
        Some(Ok(request)) => request,
        Some(Err(error)) => {
            return reply(
                &Value::Null,
                Err(RpcError(
                    PARSE_ERROR,
                    format!("the body is not JSON: {error}"),
                )),
            );
        }
        None => {
            return reply(
                &Value::Null,
                Err(RpcError(
                    INVALID_REQUEST,
                    "the body could not be read".into(),
                )),
            );
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    if !matches!(id, Value::String(_) | Value::Number(_) | Value::Null) {
        return reply(
            &Value::Null,
            Err(RpcError(
                INVALID_REQUEST,
                "`id` must be a string or a number".into(),
            )),
        );
    }
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return reply(
            &id,
            Err(RpcError(
                INVALID_REQUEST,
                "`jsonrpc` must be \"2.0\"".into(),
            )),
        );
    }
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return reply(
            &id,
            Err(RpcError(
                INVALID_REQUEST,
                "`method` must be a string".into(),
            )),
        );
    };
    let params = match request.get("params") {
        None => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => {
            return reply(
                &id,
                Err(RpcError(
                    INVALID_REQUEST,
                    "`params` must be an object".into(),
                )),
            );
        }
    };
    if !state.runtime.workspace().agents.contains_key(&agent) {
        return crate::ApiError::ResourceNotFound(format!("no agent `{agent}`")).into_response();
    }
    let call = Call {
        state,
        principal,
        agent,
        id: id.clone(),
        base: super::base_url(&headers),
    };
    let outcome = match method {
        "SendMessage" => call.send(&params, false).await,
        "SendStreamingMessage" => match call.send(&params, true).await {
            Ok(Sent::Stream(response)) => return response,
            other => other.map(Sent::into_value),
        }
        .map(Sent::Value),
        "GetTask" => call.get(&params).await.map(Sent::Value),
        "CancelTask" => call.cancel(&params).await.map(Sent::Value),
        "SubscribeToTask" => match call.subscribe(&params).await {
            Ok(response) => return response,
            Err(error) => Err(error),
        },
        "ListTasks" => call.list(&params).await.map(Sent::Value),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(RpcError(
            PUSH_NOT_SUPPORTED,
            "push notifications are not offered: stream the task (SendStreamingMessage, SubscribeToTask) or poll it (GetTask)".into(),
        )),
        "GetExtendedAgentCard" => Err(RpcError(UNSUPPORTED, "there is no extended agent card: the public card is the whole card".into())),
        other => Err(RpcError(METHOD_NOT_FOUND, format!("no method `{other}` (A2A 1.0: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, ListTasks)"))),
    };
    match outcome {
        Ok(Sent::Stream(response)) => response,
        Ok(Sent::Value(value)) => reply(&id, Ok(value)),
        Err(error) => reply(&id, Err(error)),
    }
}

/// A method's answer: a result, or a stream already made.
enum Sent {
    Value(Value),
    Stream(Response),
}

impl Sent {
    fn into_value(self) -> Value {
        match self {
            Self::Value(value) => value,
            Self::Stream(_) => Value::Null,
        }
    }
}

/// What a message asks: new work, or an answer to the task waiting on a human.
struct Asked {
    text: String,
    data: Option<Value>,
    context: Option<String>,
    task: Option<String>,
}

fn read_message(params: &Value) -> Result<Asked, RpcError> {
    let message = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| invalid("`params.message` is required"))?;
    if let Some(role) = message.get("role").and_then(Value::as_str)
        && role != "ROLE_USER"
        && role != "user"
    {
        return Err(invalid(format!(
            "`message.role` must be ROLE_USER, not {role}"
        )));
    }
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("`message.parts` must be an array"))?;
    let mut texts = Vec::new();
    let mut data = None;
    for (index, part) in parts.iter().enumerate() {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            texts.push(text.to_owned());
        } else if let Some(value) = part.get("data") {
            data = Some(value.clone());
            texts.push(value.to_string());
        } else {
            return Err(RpcError(
                CONTENT_TYPE_NOT_SUPPORTED,
                format!(
                    "message.parts[{index}]: only text and data parts are taken (files and URLs are not)"
                ),
            ));
        }
    }
    let text = texts.join("\n");
    let string = |key: &str| {
        message
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(Asked {
        text,
        data,
        context: string("contextId"),
        task: string("taskId"),
    })
}

impl Call {
    /// The run behind task `id`, if this principal may see it and it is this agent's.
    async fn run(&self, id: &str) -> Result<RunRecord, RpcError> {
        let not_found = || RpcError(TASK_NOT_FOUND, format!("no task `{id}`"));
        let run = self
            .state
            .runtime
            .runs()
            .get(&RequestId::from(id.to_owned()))
            .await
            .map_err(internal)?
            .ok_or_else(not_found)?;
        if self.principal.may_see(&run).is_err() || run.agent != self.agent {
            return Err(not_found());
        }
        Ok(run)
    }

    fn context_of(run: &RunRecord) -> String {
        run.session_id
            .as_ref()
            .map_or_else(|| run.request_id.to_string(), ToString::to_string)
    }

    /// The approval run `id` waits for, if any.
    async fn waiting(&self, id: &RequestId) -> Result<Option<ApprovalRecord>, RpcError> {
        let pending = self
            .state
            .runtime
            .approvals()
            .list(Some(ApprovalStatus::Pending))
            .await
            .map_err(internal)?;
        Ok(pending.into_iter().find(|a| a.request_id == *id))
    }

    /// The task of run `id` as it is now.
    async fn task(&self, id: &str) -> Result<Value, RpcError> {
        let run = self.run(id).await?;
        let waiting = match run.status {
            RunStatus::WaitingApproval => self.waiting(&run.request_id).await?,
            _ => None,
        };
        let events = self
            .state
            .runtime
            .runs()
            .events(&run.request_id, 0)
            .await
            .map_err(internal)?;
        let artifacts: Vec<Value> = events
            .iter()
            .filter_map(|e| match &e.payload {
                EventPayload::ArtifactCreated { artifact, .. } => {
                    Some(stored_artifact(&self.base, artifact))
                }
                _ => None,
            })
            .collect();
        Ok(task_of(
            &run,
            &Self::context_of(&run),
            waiting.as_ref(),
            &artifacts,
        ))
    }

    async fn get(&self, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(params, "id")?;
        self.task(&id).await
    }

    async fn cancel(&self, params: &Value) -> Result<Value, RpcError> {
        let id = task_id(params, "id")?;
        let run = self.run(&id).await?;
        if run.status.is_terminal() && run.status != RunStatus::Interrupted {
            return Err(RpcError(
                TASK_NOT_CANCELABLE,
                format!("task `{id}` has ended (`{}`)", run.status.as_str()),
            ));
        }
        self.state
            .runtime
            .cancel(&run.request_id)
            .await
            .map_err(internal)?;
        // Cancelling is asynchronous: wait for the run's record to say so.
        let mut follower = Follower::new(self.state.clone(), run.request_id.clone(), 0);
        while let Some(next) = follower.next().await {
            if let Followed::Event(event) = next
                && event.payload.is_final()
            {
                break;
            }
        }
        self.task(&id).await
    }

    async fn list(&self, params: &Value) -> Result<Value, RpcError> {
        let mut filter = keel::RunFilter {
            agent: Some(self.agent.clone()),
            owner: self.principal.owner(),
            ..keel::RunFilter::default()
        };
        if let Some(context) = params.get("contextId").and_then(Value::as_str) {
            filter.session = Some(
                keel::SessionId::parse(context).map_err(|e| invalid(format!("contextId: {e}")))?,
            );
        }
        let runs = self
            .state
            .runtime
            .runs()
            .list(&filter)
            .await
            .map_err(internal)?;
        let tasks: Vec<Value> = runs
            .iter()
            .map(|run| task_of(run, &Self::context_of(run), None, &[]))
            .collect();
        Ok(
            json!({"tasks": tasks, "nextPageToken": "", "pageSize": tasks.len(), "totalSize": tasks.len()}),
        )
    }

    /// `SendMessage` / `SendStreamingMessage`.
    async fn send(&self, params: &Value, stream: bool) -> Result<Sent, RpcError> {
        let asked = read_message(params)?;
        if let Some(task) = &asked.task {
            return self.answer(task, &asked, stream).await;
        }
        if asked.text.trim().is_empty() {
            return Err(invalid("the message has no text"));
        }
        let session = match &asked.context {
            Some(context) => keel::SessionId::parse(context).map_err(|e| {
                invalid(format!(
                    "contextId `{context}` cannot be a Keel session id: {e}"
                ))
            })?,
            None => keel::SessionId::parse(&format!("a2a-{}", RequestId::generate()))
                .map_err(internal)?,
        };
        let options = RequestOptions {
            input: asked.text,
            agent: Some(self.agent.clone()),
            session_id: Some(session.clone()),
            ..Default::default()
        };
        let (handle, ticket) = start_run(&self.state, &self.principal, options)
            .await
            .map_err(|error| {
                RpcError(
                    INTERNAL,
                    error.body()["error"]["message"]
                        .as_str()
                        .unwrap_or("refused")
                        .to_owned(),
                )
            })?;
        let task = handle.request_id().to_string();
        let immediately = params
            .pointer("/configuration/returnImmediately")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if stream {
            handle.skip_narration();
            let first = json!({
                "id": task,
                "contextId": session.to_string(),
                "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": keel_types::now_rfc3339()},
            });
            let dialect = Arc::new(self.stream_of(&task, &session.to_string(), first));
            let (response, sink) = frames_response(
                dialect.clone(),
                task.clone(),
                handle.cancel_token().drop_guard(),
            );
            tokio::spawn(async move {
                let mut handle = handle;
                let mut open = true;
                while let Some(event) = handle.next_event().await {
                    if open && dialect.on_event(&event, &sink, true) {
                        open = false;
                    }
                }
                let response = handle.wait().await;
                drop(ticket);
                if open {
                    sink.close(dialect.closing(response));
                }
            });
            return Ok(Sent::Stream(response));
        }
        if immediately {
            finish_in_background(handle, ticket);
            return self
                .task(&task)
                .await
                .map(|task| Sent::Value(json!({"task": task})));
        }
        // Wait until the task ends or needs a human, then answer. A run waits on a human with
        // its record saying so already; one that ended has its record written once its
        // handle's wait returns.
        let mut handle = handle;
        let guard = handle.cancel_token().drop_guard();
        let mut waiting = false;
        while let Some(event) = handle.next_event().await {
            if matches!(event.payload, EventPayload::ApprovalRequested { .. }) {
                waiting = true;
                break;
            }
        }
        guard.disarm();
        if waiting {
            // The run goes on (waiting for the decision) after this answer.
            finish_in_background(handle, ticket);
        } else {
            let _ = handle.wait().await;
            drop(ticket);
        }
        self.task(&task)
            .await
            .map(|task| Sent::Value(json!({"task": task})))
    }

    /// The task once its record has caught up with its last event (ended, or waiting).
    async fn settled(&self, task: &str) -> Result<Value, RpcError> {
        let id = RequestId::from(task.to_owned());
        for _ in 0..200 {
            let run = self.run(task).await?;
            if run.status != RunStatus::Running {
                break;
            }
            // The record is written just after the event; look again when it is.
            let mut wake = Follower::new(self.state.clone(), id.clone(), u64::MAX);
            let _ = tokio::time::timeout(std::time::Duration::from_millis(20), wake.next()).await;
        }
        self.task(task).await
    }

    fn stream_of(&self, task: &str, context: &str, first: Value) -> TaskStream {
        TaskStream {
            rpc_id: self.id.clone(),
            task: task.to_owned(),
            context: context.to_owned(),
            base: self.base.clone(),
            first,
        }
    }

    /// A message to a task: the answer to the approval it waits for.
    async fn answer(&self, task: &str, asked: &Asked, stream: bool) -> Result<Sent, RpcError> {
        let run = self.run(task).await?;
        let approval = match run.status {
            RunStatus::WaitingApproval => self.waiting(&run.request_id).await?,
            _ => None,
        };
        let Some(approval) = approval else {
            return Err(invalid(format!(
                "task `{task}` does not wait for input (it is {}); send a message without `taskId` in context `{}` to go on with the conversation",
                super::task::state_of(run.status),
                Self::context_of(&run)
            )));
        };
        let (approve, scope, reason) = decision(asked)?;
        if let Err(error) = self
            .state
            .runtime
            .approvals()
            .decide(
                &approval.approval_id,
                approve,
                scope,
                DECIDER,
                reason.as_deref(),
            )
            .await
        {
            tracing::debug!(%error, "an A2A answer found its approval decided");
        }
        let events = self
            .state
            .runtime
            .runs()
            .events(&run.request_id, 0)
            .await
            .map_err(internal)?;
        let after = events
            .iter()
            .find(|e| matches!(&e.payload, EventPayload::ApprovalRequested { approval: a } if a.approval_id == approval.approval_id))
            .map_or(0, |e| e.seq);
        let context = Self::context_of(&run);
        if !stream {
            let mut follower = Follower::new(self.state.clone(), run.request_id.clone(), after);
            while let Some(next) = follower.next().await {
                if let Followed::Event(event) = next {
                    let asks_again =
                        matches!(&event.payload, EventPayload::ApprovalRequested { .. });
                    if asks_again || event.payload.is_final() {
                        break;
                    }
                }
            }
            return self
                .settled(task)
                .await
                .map(|task| Sent::Value(json!({"task": task})));
        }
        let first = self.task(task).await?;
        let dialect = self.stream_of(task, &context, first);
        let response = follow_task(self.state.clone(), run.request_id.clone(), after, dialect);
        Ok(Sent::Stream(response))
    }

    /// `SubscribeToTask`: the rest of a task that has not ended, as a stream.
    async fn subscribe(&self, params: &Value) -> Result<Response, RpcError> {
        let id = task_id(params, "id")?;
        let run = self.run(&id).await?;
        if run.status.is_terminal() && run.status != RunStatus::Interrupted {
            return Err(RpcError(
                UNSUPPORTED,
                format!(
                    "task `{id}` has ended (`{}`): GetTask reads it",
                    run.status.as_str()
                ),
            ));
        }
        let first = self.task(&id).await?;
        let dialect = self.stream_of(&id, &Self::context_of(&run), first);
        let response = follow_task(self.state.clone(), run.request_id, run.event_count, dialect);
        Ok(response)
    }
}

/// A task's stream from the store, from after event `after` of run `id`: the caller going
/// away ends the stream, not the task (cancelling is `CancelTask`'s).
fn follow_task(state: AppState, id: RequestId, after: u64, dialect: TaskStream) -> Response {
    let dialect = Arc::new(dialect);
    let stop = CancellationToken::new();
    let (response, sink) =
        frames_response(dialect.clone(), id.to_string(), stop.clone().drop_guard());
    tokio::spawn(async move {
        let mut follower = Follower::new(state.clone(), id, after);
        loop {
            let next = tokio::select! {
                next = follower.next() => next,
                () = stop.cancelled() => return,
            };
            match next {
                Some(Followed::Event(event)) => {
                    let pending = approval_pending(&state, &event).await;
                    if dialect.on_event(&event, &sink, pending) {
                        return;
                    }
                }
                Some(Followed::Idle) => {}
                None => break,
            }
        }
        sink.close(dialect.closing(Err(keel::RuntimeError::Internal("its events ended".into()))));
    });
    response
}

/// The task id parameter `key`.
fn task_id(params: &Value, key: &str) -> Result<String, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("`params.{key}` (the task id) is required")))
}

/// The decision a message gives: data `{approved, scope?, reason?}`, or text that starts with
/// approve/yes or deny/no.
fn decision(asked: &Asked) -> Result<(bool, ApprovalScope, Option<String>), RpcError> {
    if let Some(data) = &asked.data {
        let approved = data
            .get("approved")
            .and_then(Value::as_bool)
            .ok_or_else(|| invalid("the data part must hold `approved` (true or false)"))?;
        let scope = match data.get("scope").and_then(Value::as_str) {
            None | Some("once") => ApprovalScope::Once,
            Some("session") => ApprovalScope::Session,
            Some(other) => {
                return Err(invalid(format!(
                    "`scope` must be once or session, not {other}"
                )));
            }
        };
        let reason = data
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Ok((approved, scope, reason));
    }
    let text = asked.text.trim();
    let word = text
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_lowercase();
    let approved = match word.as_str() {
        "approve" | "approved" | "yes" | "allow" => true,
        "deny" | "denied" | "no" | "reject" => false,
        _ => {
            return Err(invalid(
                "the task waits for an approval: answer `approve` or `deny` (or data {\"approved\": true|false})",
            ));
        }
    };
    let reason = text
        .split_once(|c: char| c.is_whitespace())
        .map(|(_, rest)| rest.trim().to_owned())
        .filter(|r| !r.is_empty());
    Ok((approved, ApprovalScope::Once, reason))
}
