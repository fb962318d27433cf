//! The OpenAI-compatible facade: `GET /v1/models` (agents as models) and
//! `POST /v1/chat/completions` (stream and non-stream; `model` is the agent id, the last user
//! message is the request's input).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use keel::types::event::AdapterEvent;
use keel::types::run::FinishReason;
use keel::{
    Event, EventPayload, Message, RequestOptions, RunHandle, RunResponse, RunStatus, RuntimeError,
    SessionId, ToolCall,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::DropGuard;

use crate::ApiError;
use crate::requests::{sse_response, start_run, wait_for};
use crate::state::{AppState, Principal, Ticket};

/// `GET /v1/models`: every agent of the workspace, as an OpenAI model.
pub(crate) async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .runtime
        .workspace()
        .agents
        .keys()
        .map(|name| json!({ "id": name, "object": "model", "created": 0, "owned_by": "keel" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// The accepted part of a Chat Completions request; other fields (`tools`, `tool_choice`,
/// sampling parameters…) are ignored: the agent's own settings and workspace inventory apply.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    tool_calls: Vec<ChatToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatToolCall {
    id: String,
    function: ChatFunction,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ChatFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

/// A message's content: a string, or an array of parts (text parts only).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

fn bad_message(message: String) -> ApiError {
    ApiError::BadRequest {
        message,
        param: Some("messages"),
    }
}

impl Content {
    /// The text of the content; `index` names the message in errors.
    fn text(&self, index: usize) -> Result<String, ApiError> {
        match self {
            Self::Text(text) => Ok(text.clone()),
            Self::Parts(parts) => {
                let mut texts = Vec::with_capacity(parts.len());
                for (i, part) in parts.iter().enumerate() {
                    match (part.kind.as_str(), &part.text) {
                        ("text", Some(text)) => texts.push(text.as_str()),
                        ("text", None) => {
                            return Err(bad_message(format!(
                                "messages[{index}].content[{i}] is a text part without `text`"
                            )));
                        }
                        (kind, _) => {
                            return Err(bad_message(format!(
                                "messages[{index}].content[{i}] is a `{kind}` part; only `text` parts are supported"
                            )));
                        }
                    }
                }
                Ok(texts.join("\n"))
            }
        }
    }
}

/// The header naming the session of a facade request.
pub const SESSION_HEADER: &str = "x-keel-session";
/// The header opting a streamed facade request into Keel progress events.
pub const PROGRESS_HEADER: &str = "x-keel-progress";

/// The Keel options a client may add with headers (the body stays a standard request).
struct KeelOptions {
    /// `X-Keel-Session: ID` — the turn belongs to this session: its stored transcript is the
    /// history and only the last (user) message of `messages` is read.
    session: Option<String>,
    /// `X-Keel-Progress: true` — the stream also carries Keel progress events.
    progress: bool,
}

impl KeelOptions {
    fn from_headers(headers: &HeaderMap) -> Result<Self, ApiError> {
        let text = |name: &'static str| -> Result<Option<String>, ApiError> {
            headers
                .get(name)
                .map(|v| {
                    v.to_str()
                        .map(|s| s.trim().to_owned())
                        .map_err(|_| ApiError::BadRequest {
                            message: format!("header `{name}` must be visible ASCII"),
                            param: None,
                        })
                })
                .transpose()
        };
        let session = text(SESSION_HEADER)?.filter(|s| !s.is_empty());
        let progress = match text(PROGRESS_HEADER)?.as_deref() {
            None | Some("false" | "0") => false,
            Some("true" | "1") => true,
            Some(other) => {
                return Err(ApiError::BadRequest {
                    message: format!(
                        "header `{PROGRESS_HEADER}` must be true or false, not `{other}`"
                    ),
                    param: None,
                });
            }
        };
        Ok(Self { session, progress })
    }
}

/// Maps the client's messages: the last must be a user message (the run's input); the ones
/// before it become the run's history (unless a session supplies the history).
fn map_messages(
    messages: &[ChatMessage],
    with_session: bool,
) -> Result<(String, Vec<Message>), ApiError> {
    let Some((last, earlier)) = messages.split_last() else {
        return Err(bad_message("`messages` must be a non-empty array".into()));
    };
    let last_index = earlier.len();
    if last.role != "user" {
        return Err(bad_message(format!(
            "the last message (messages[{last_index}]) must have role `user`, not `{}`: Keel runs the workspace's tools itself and takes no tool results from clients",
            last.role
        )));
    }
    let input = match &last.content {
        Some(content) => content.text(last_index)?,
        None => String::new(),
    };
    if input.trim().is_empty() {
        return Err(bad_message(format!(
            "messages[{last_index}] (the user message) has no text"
        )));
    }
    if with_session {
        return Ok((input, Vec::new()));
    }
    let mut history = Vec::with_capacity(earlier.len());
    for (index, message) in earlier.iter().enumerate() {
        let text = match &message.content {
            Some(content) => content.text(index)?,
            None => String::new(),
        };
        let mapped = match message.role.as_str() {
            "system" | "developer" => Message::system(text),
            "user" => Message::user(text),
            "assistant" => Message::assistant(
                text,
                message
                    .tool_calls
                    .iter()
                    .map(|call| ToolCall {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                    })
                    .collect(),
            ),
            "tool" => {
                let Some(call_id) = &message.tool_call_id else {
                    return Err(bad_message(format!(
                        "messages[{index}] has role `tool` but no `tool_call_id`"
                    )));
                };
                Message::tool_result(call_id.clone(), text)
            }
            other => {
                return Err(bad_message(format!(
                    "messages[{index}] has unsupported role `{other}` (system, developer, user, assistant, tool)"
                )));
            }
        };
        history.push(mapped);
    }
    Ok((input, history))
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: ChatRequest = crate::body::parse_body(body, false)?;
    if !state
        .runtime
        .workspace()
        .agents
        .contains_key(&request.model)
    {
        return Err(ApiError::ModelNotFound(request.model));
    }
    let keel = KeelOptions::from_headers(&headers)?;
    let (input, history) = map_messages(&request.messages, keel.session.is_some())?;
    let options = RequestOptions {
        input,
        history,
        agent: Some(request.model.clone()),
        session_id: keel.session.map(SessionId::from),
        ..Default::default()
    };
    let (handle, ticket) = start_run(&state, &principal, options).await?;
    let completion = Completion {
        id: format!("chatcmpl-{}", handle.request_id()),
        model: request.model,
        created: unix_now(),
    };
    if request.stream.unwrap_or(false) {
        let include_usage = request
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        Ok(stream_response(
            completion,
            handle,
            ticket,
            include_usage,
            keel.progress,
        ))
    } else {
        let response = wait_for(handle, ticket).await?;
        completion.whole(response).map(IntoResponse::into_response)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What every answer object of one completion shares.
struct Completion {
    id: String,
    model: String,
    created: u64,
}

fn finish_reason(response: &RunResponse) -> &'static str {
    match response.finish_reason {
        FinishReason::Length => "length",
        _ => "stop",
    }
}

fn usage_json(response: &RunResponse) -> Value {
    json!({
        "prompt_tokens": response.usage.prompt_tokens,
        "completion_tokens": response.usage.completion_tokens,
        "total_tokens": response.usage.total_tokens,
    })
}

/// The error of a run that did not complete, if it did not.
fn run_error(response: &RunResponse) -> Option<ApiError> {
    match response.status {
        RunStatus::Completed => None,
        RunStatus::Cancelled => Some(ApiError::RunCancelled),
        RunStatus::Interrupted => Some(ApiError::RunInterrupted(response.request_id.to_string())),
        _ if response.finish_reason == FinishReason::Timeout => Some(ApiError::Timeout(
            response
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the run ran out of time".into()),
        )),
        _ => Some(ApiError::RunFailed(
            response
                .error
                .as_ref()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "the run failed".into()),
        )),
    }
}

impl Completion {
    /// The `chat.completion` object of a finished run.
    fn whole(&self, response: RunResponse) -> Result<Json<Value>, ApiError> {
        if let Some(error) = run_error(&response) {
            return Err(error);
        }
        Ok(Json(json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": response.output.clone().unwrap_or_default() },
                "finish_reason": finish_reason(&response),
            }],
            "usage": usage_json(&response),
        })))
    }

    /// One `chat.completion.chunk` SSE frame.
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        frame(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
        }))
    }

    /// The usage chunk (empty `choices`).
    fn usage_chunk(&self, response: &RunResponse) -> Bytes {
        frame(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage_json(response),
        }))
    }
}

fn frame(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

const DONE: &[u8] = b"data: [DONE]\n\n";

/// What a stream holds for a client that reads slower than the run writes, at most. Output
/// text merges into one chunk while it waits, so only frames that cannot merge count up; a
/// client so far behind loses the rest of the stream (it ends with an error naming the
/// request, whose answer stays in the store) and the run goes on.
const MAX_PENDING_BYTES: usize = 1024 * 1024;

/// A frame waiting for the client.
enum Item {
    /// Output text (consecutive deltas merge).
    Text(String),
    Frame(Bytes),
}

impl Item {
    fn len(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Frame(frame) => frame.len(),
        }
    }
}

/// Frames from the run to the client. The run side never waits for the client.
#[derive(Default)]
struct Outbox {
    items: VecDeque<Item>,
    bytes: usize,
    /// The run side is done: nothing is added after what is queued.
    closed: bool,
    /// The client fell more than [`MAX_PENDING_BYTES`] behind.
    overflowed: bool,
}

struct Shared {
    outbox: Mutex<Outbox>,
    ready: Notify,
}

impl Shared {
    fn push(&self, item: Item) {
        let Ok(mut outbox) = self.outbox.lock() else {
            return;
        };
        if outbox.overflowed {
            return;
        }
        outbox.bytes += item.len();
        match (outbox.items.back_mut(), item) {
            (Some(Item::Text(queued)), Item::Text(text)) => queued.push_str(&text),
            (_, item) => outbox.items.push_back(item),
        }
        if outbox.bytes > MAX_PENDING_BYTES {
            outbox.overflowed = true;
            outbox.items.clear();
            outbox.bytes = 0;
        }
        drop(outbox);
        self.ready.notify_one();
    }

    fn close(&self, last: Vec<Bytes>) {
        if let Ok(mut outbox) = self.outbox.lock() {
            if !outbox.overflowed {
                for frame in last {
                    outbox.bytes += frame.len();
                    outbox.items.push_back(Item::Frame(frame));
                }
            }
            outbox.closed = true;
        }
        self.ready.notify_one();
    }
}

/// Feeds the run's events into the outbox until the run ends; holds the run's admission
/// place until then.
async fn pump(
    mut handle: RunHandle,
    ticket: Ticket,
    shared: Arc<Shared>,
    completion: Arc<Completion>,
    include_usage: bool,
    progress: bool,
) {
    while let Some(event) = handle.next_event().await {
        match &event.payload {
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { text, .. },
            } if !text.is_empty() => shared.push(Item::Text(text.clone())),
            payload if progress && is_progress(payload) => {
                shared.push(Item::Frame(progress_frame(&event)));
            }
            _ => {}
        }
    }
    let response = handle.wait().await;
    drop(ticket);
    shared.close(closing_frames(&completion, response, include_usage));
}

/// The Keel events an opted-in stream carries: narration, tool progress, approvals and
/// model retries.
fn is_progress(payload: &EventPayload) -> bool {
    matches!(
        payload,
        EventPayload::Narration { .. }
            | EventPayload::Adapter {
                event: AdapterEvent::ToolStart { .. } | AdapterEvent::ToolResult { .. }
            }
            | EventPayload::ApprovalRequested { .. }
            | EventPayload::ApprovalResolved { .. }
            | EventPayload::ModelRetry { .. }
    )
}

/// A Keel event on the facade stream: a named SSE event (`event: keel`), so standard chunk
/// parsers that dispatch on the event name leave it alone.
fn progress_frame(event: &Event) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("event: keel\ndata: {data}\n\n"))
}

/// The closing frames: finish chunk, usage chunk, `[DONE]` — or an error object and `[DONE]`.
fn closing_frames(
    completion: &Completion,
    response: Result<RunResponse, RuntimeError>,
    include_usage: bool,
) -> Vec<Bytes> {
    let mut frames = Vec::with_capacity(3);
    match response {
        Err(_) => {
            let error = ApiError::RunFailed("the run ended abnormally".into());
            frames.push(frame(&error.body()));
        }
        Ok(response) => {
            if let Some(error) = run_error(&response) {
                frames.push(frame(&error.body()));
            } else {
                frames.push(completion.chunk(json!({}), Some(finish_reason(&response))));
                if include_usage {
                    frames.push(completion.usage_chunk(&response));
                }
            }
        }
    }
    frames.push(Bytes::from_static(DONE));
    frames
}

/// The client side of a streamed answer.
struct Streaming {
    shared: Arc<Shared>,
    completion: Arc<Completion>,
    request_id: String,
    /// Cancels the run if the client goes away before the stream ends.
    guard: Option<DropGuard>,
    finished: bool,
}

impl Streaming {
    /// The next frame, or `None` once `[DONE]` was sent.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if self.finished {
                return None;
            }
            let item = {
                let mut outbox = self.shared.outbox.lock().ok()?;
                if outbox.overflowed {
                    self.finished = true;
                    if let Some(guard) = self.guard.take() {
                        // The run goes on; its answer is in the store.
                        guard.disarm();
                    }
                    let error = ApiError::RunFailed(format!(
                        "the client read too slowly and the stream was cut; the run goes on as request `{}`",
                        self.request_id
                    ));
                    let mut bytes = frame(&error.body()).to_vec();
                    bytes.extend_from_slice(DONE);
                    return Some(Bytes::from(bytes));
                }
                match outbox.items.pop_front() {
                    Some(item) => {
                        outbox.bytes -= item.len();
                        Some(item)
                    }
                    None if outbox.closed => {
                        self.finished = true;
                        if let Some(guard) = self.guard.take() {
                            guard.disarm();
                        }
                        return None;
                    }
                    None => None,
                }
            };
            match item {
                Some(Item::Text(text)) => {
                    return Some(self.completion.chunk(json!({ "content": text }), None));
                }
                Some(Item::Frame(frame)) => return Some(frame),
                None => self.shared.ready.notified().await,
            }
        }
    }
}

/// A `text/event-stream` answer of `chat.completion.chunk` frames ending with `[DONE]`.
/// A task feeds the run's events into a bounded outbox, so a slow reader never holds up the
/// run; the client going away cancels the run.
fn stream_response(
    completion: Completion,
    handle: RunHandle,
    ticket: Ticket,
    include_usage: bool,
    progress: bool,
) -> Response {
    let completion = Arc::new(completion);
    let first = completion.chunk(json!({ "role": "assistant", "content": "" }), None);
    let shared = Arc::new(Shared {
        outbox: Mutex::new(Outbox {
            bytes: first.len(),
            items: VecDeque::from([Item::Frame(first)]),
            ..Outbox::default()
        }),
        ready: Notify::new(),
    });
    let streaming = Streaming {
        shared: shared.clone(),
        completion: completion.clone(),
        request_id: handle.request_id().to_string(),
        guard: Some(handle.cancel_token().drop_guard()),
        finished: false,
    };
    tokio::spawn(pump(
        handle,
        ticket,
        shared,
        completion,
        include_usage,
        progress,
    ));
    sse_response(futures_util::stream::unfold(
        streaming,
        |mut streaming| async move {
            let frame = streaming.next().await?;
            Some((Ok::<_, Infallible>(frame), streaming))
        },
    ))
}
