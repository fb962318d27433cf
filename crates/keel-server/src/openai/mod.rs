//! The OpenAI-compatible facade: `GET /v1/models` (agents as models) and
//! `POST /v1/chat/completions` (stream and non-stream; `model` is the agent id, the last user
//! message is the request's input).
//!
//! This file holds the handlers and the Keel headers; `fields.rs` checks a request as a
//! whole (every field's type, and what Keel does with it); `wire.rs` the request and answer
//! shapes, `messages.rs` the mapping of chat messages to the run's input and history, and
//! `stream.rs` the streamed answer.

pub(crate) mod fields;
pub(crate) mod messages;
pub(crate) mod params;
pub(crate) mod stream;
pub(crate) mod wire;

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use keel::{RequestOptions, SessionId};
use serde_json::{Value, json};

pub(crate) use wire::ChatRequest;

use self::messages::map_messages;
use self::stream::{ChatDialect, StreamOptions, stream_response};
use self::wire::Completion;
use crate::ApiError;
use crate::requests::{start_run, wait_for};
use crate::state::{AppState, Principal};

/// `GET /v1/models`: every agent of the workspace, and every workflow as
/// `workflow/<name>`, as an OpenAI model.
pub(crate) async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .runtime
        .workspace()
        .agents
        .keys()
        .cloned()
        .chain(
            state
                .runtime
                .workflows()
                .keys()
                .map(|name| format!("{}{name}", keel_types::WORKFLOW_PREFIX)),
        )
        .map(|name| json!({ "id": name, "object": "model", "created": 0, "owned_by": "keel" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// The header naming the session of a facade request.
pub const SESSION_HEADER: &str = "x-keel-session";
/// The header opting a streamed facade request into Keel progress events.
pub const PROGRESS_HEADER: &str = "x-keel-progress";

/// The Keel options a client may add with headers (the body stays a standard request).
pub(crate) struct KeelOptions {
    /// `X-Keel-Session: ID` — the turn belongs to this session: its stored transcript is the
    /// history and only the last (user) message of `messages` is read.
    pub session: Option<SessionId>,
    /// `X-Keel-Progress: true` — the stream also carries Keel progress events.
    pub progress: bool,
}

impl KeelOptions {
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Self, ApiError> {
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
        let session = text(SESSION_HEADER)?
            .map(|id| crate::body::session_id(&id, "X-Keel-Session"))
            .transpose()?;
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

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let mut request: Value = crate::body::parse_body(body, false)?;
    fields::check(&mut request)?;
    let requested = match request.as_object() {
        Some(body) => params::Requested::read(body)?,
        None => params::Requested::default(),
    };
    let request: ChatRequest =
        serde_json::from_value(request).map_err(|e| ApiError::BadRequest {
            message: format!("invalid request body: {e}"),
            param: None,
        })?;
    let workflow = request
        .model
        .strip_prefix(keel_types::WORKFLOW_PREFIX)
        .filter(|name| state.runtime.workflows().contains_key(*name))
        .map(str::to_owned);
    if workflow.is_none()
        && !state
            .runtime
            .workspace()
            .agents
            .contains_key(&request.model)
    {
        return Err(ApiError::ModelNotFound(request.model));
    }
    let granted = granted_params(&state, &request.model, workflow.is_some(), requested)?;
    let structured = granted.output_schema.is_some();
    let keel = KeelOptions::from_headers(&headers)?;
    let (input, history) = map_messages(&request.messages, keel.session.is_some())?;
    if workflow.is_some() && !history.is_empty() {
        return Err(ApiError::BadRequest {
            message: "a workflow model takes one user message, its input (no earlier messages)"
                .into(),
            param: Some("messages"),
        });
    }
    let options = RequestOptions {
        input,
        history,
        agent: Some(request.model.clone()),
        session_id: keel.session,
        metadata: request_metadata(&request)?,
        params: granted.params,
        output_schema: granted.output_schema,
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
        let whole_answer = workflow.is_some()
            || structured
            || state
                .runtime
                .workspace()
                .agents
                .get(&completion.model)
                .is_some_and(|agent| agent.output.is_some());
        Ok(stream_response(
            ChatDialect {
                completion,
                include_usage,
            },
            handle,
            ticket,
            StreamOptions {
                progress: keel.progress,
                whole_answer,
                value_as_content: structured,
            },
        ))
    } else {
        let mut response = wait_for(handle, ticket).await?;
        if structured {
            stream::value_as_content(&mut response);
        }
        completion.whole(response).map(IntoResponse::into_response)
    }
}

/// The request's model parameters for its model: held to an agent's `facade`; a workflow
/// takes none (its agent nodes run on their own agents' models).
pub(crate) fn granted_params(
    state: &AppState,
    model: &str,
    workflow: bool,
    requested: params::Requested,
) -> Result<params::Granted, ApiError> {
    match (workflow, requested.first()) {
        (true, Some(param)) => Err(ApiError::UnsupportedParameter {
            param: param.to_owned(),
            reason: format!(
                "cannot be honoured for workflow model `{model}`: its nodes run on their own \
                 agents' models; send the request without it"
            ),
        }),
        (true, None) => Ok(params::Granted::default()),
        (false, _) => match state.runtime.workspace().agents.get(model) {
            Some(agent) => requested.grant(model, &agent.facade),
            None => Err(ApiError::ModelNotFound(model.to_owned())),
        },
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The run's metadata: the request's `metadata`, with `user` as `metadata.user`. Two
/// different users (`user` and `metadata.user`) are refused rather than one picked.
fn request_metadata(
    request: &wire::ChatRequest,
) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
    let mut metadata = request.metadata.clone();
    match (&request.user, metadata.get("user")) {
        (Some(user), Some(other)) if user != other => Err(ApiError::BadRequest {
            message: "`user` and `metadata.user` name different users; send one of them, or \
                      the same value in both"
                .into(),
            param: Some("user"),
        }),
        (Some(user), _) => {
            metadata.insert("user".to_owned(), user.clone());
            Ok(metadata)
        }
        (None, _) => Ok(metadata),
    }
}

/// The JSON type of `value`, as the messages name it.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
