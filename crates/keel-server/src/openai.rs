//! The OpenAI-compatible facade: `GET /v1/models` (agents as models) and
//! `POST /v1/chat/completions` (stream and non-stream; `model` is the agent id, the last user
//! message is the request's input).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::types::event::AdapterEvent;
use keel::types::run::FinishReason;
use keel::{
    EventPayload, RequestOptions, RunHandle, RunResponse, RunStatus, Runtime, RuntimeError,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::DropGuard;

use crate::ApiError;

/// `GET /v1/models`: every agent of the workspace, as an OpenAI model.
pub(crate) async fn models(State(runtime): State<Runtime>) -> Json<Value> {
    let data: Vec<Value> = runtime
        .workspace()
        .agents
        .keys()
        .map(|name| json!({ "id": name, "object": "model", "created": 0, "owned_by": "keel" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// The accepted part of a Chat Completions request; other fields are ignored.
#[derive(Debug, Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

/// A message's content: a string, or an array of parts (only `text` parts are read).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Parts(parts) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(runtime): State<Runtime>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: ChatRequest = crate::api::parse_body(body, false)?;
    if !runtime.workspace().agents.contains_key(&request.model) {
        return Err(ApiError::ModelNotFound(request.model));
    }
    if request.messages.is_empty() {
        return Err(ApiError::BadRequest {
            message: "`messages` must be a non-empty array".into(),
            param: Some("messages"),
        });
    }
    let input = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_ref())
        .map(Content::text)
        .ok_or_else(|| ApiError::BadRequest {
            message: "`messages` must contain a user message with content".into(),
            param: Some("messages"),
        })?;

    let handle = runtime
        .request(RequestOptions {
            input,
            agent: Some(request.model.clone()),
            ..Default::default()
        })
        .await
        .map_err(start_error)?;
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
        Ok(stream_response(completion, handle, include_usage))
    } else {
        let guard = handle.cancel_token().drop_guard();
        let response = handle
            .wait()
            .await
            .map_err(|_| ApiError::RunFailed("the run ended abnormally".into()))?;
        guard.disarm();
        completion.whole(response).map(IntoResponse::into_response)
    }
}

/// Maps a failure to start a run.
pub(crate) fn start_error(error: keel::Error) -> ApiError {
    match error {
        keel::Error::Runtime(RuntimeError::UnknownAgent { name, .. }) => {
            ApiError::ModelNotFound(name)
        }
        keel::Error::Runtime(RuntimeError::InvalidInput(message)) => ApiError::BadRequest {
            message,
            param: None,
        },
        keel::Error::Runtime(e @ RuntimeError::ModelUnavailable { .. }) => {
            ApiError::RunFailed(e.to_string())
        }
        _ => ApiError::RunFailed("the request could not be started".into()),
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
        RunStatus::Cancelled | RunStatus::Interrupted => Some(ApiError::RunCancelled),
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

/// The state of a streamed answer.
struct Streaming {
    completion: Completion,
    handle: Option<RunHandle>,
    /// Cancels the run if the client goes away before it ends.
    guard: Option<DropGuard>,
    include_usage: bool,
    pending: VecDeque<Bytes>,
}

impl Streaming {
    /// The next frame, or `None` once `[DONE]` was sent.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            let handle = self.handle.as_mut()?;
            match handle.next_event().await {
                Some(event) => {
                    if let EventPayload::Adapter {
                        event: AdapterEvent::OutputDelta { text, .. },
                    } = event.payload
                        && !text.is_empty()
                    {
                        let chunk = self.completion.chunk(json!({ "content": text }), None);
                        self.pending.push_back(chunk);
                    }
                }
                None => {
                    let handle = self.handle.take()?;
                    let response = handle.wait().await;
                    if let Some(guard) = self.guard.take() {
                        guard.disarm();
                    }
                    self.finish(response);
                }
            }
        }
    }

    /// Queues the closing frames: finish chunk, usage chunk, `[DONE]` — or an error object.
    fn finish(&mut self, response: Result<RunResponse, RuntimeError>) {
        let response = match response {
            Ok(response) => response,
            Err(_) => {
                let error = ApiError::RunFailed("the run ended abnormally".into());
                self.pending.push_back(frame(&error.body()));
                self.pending.push_back(Bytes::from_static(DONE));
                return;
            }
        };
        if let Some(error) = run_error(&response) {
            self.pending.push_back(frame(&error.body()));
        } else {
            let chunk = self
                .completion
                .chunk(json!({}), Some(finish_reason(&response)));
            self.pending.push_back(chunk);
            if self.include_usage {
                self.pending
                    .push_back(self.completion.usage_chunk(&response));
            }
        }
        self.pending.push_back(Bytes::from_static(DONE));
    }
}

/// A `text/event-stream` answer of `chat.completion.chunk` frames ending with `[DONE]`.
fn stream_response(completion: Completion, handle: RunHandle, include_usage: bool) -> Response {
    let first = completion.chunk(json!({ "role": "assistant", "content": "" }), None);
    let state = Streaming {
        guard: Some(handle.cancel_token().drop_guard()),
        handle: Some(handle),
        completion,
        include_usage,
        pending: VecDeque::from([first]),
    };
    let frames = futures_util::stream::unfold(state, |mut state| async move {
        let frame = state.next().await?;
        Some((Ok::<_, Infallible>(frame), state))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}
