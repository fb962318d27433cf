//! The Anthropic-compatible facade: `POST /v1/messages` (streamed and whole; `model` is the
//! agent), so applications written against Anthropic's SDKs use Keel agents unchanged. Same
//! auth as `/v1` (the SDKs' `x-api-key` header is read like `Authorization: Bearer`), same
//! strict field table (`fields.rs`), same recorded runs, same `X-Keel-Session` header
//! (`X-Keel-Progress` is refused: the SDKs fail on stream events they do not know). Every error on this route, the auth layer's included, is written
//! in Anthropic's error shape (`{"type": "error", "error": {"type", "message"}}`) by
//! [`error_shape`].
//!
//! The agent's tool rounds happen inside the run: the client sees the final answer, as one
//! `text` block, with the run's usage (cache reads and writes apart, as the API reports them).

mod fields;
mod wire;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::RequestOptions;
use serde_json::{Value, json};

use crate::ApiError;
use crate::openai::params::Requested;
use crate::openai::stream::{StreamOptions, stream_response};
use crate::openai::{KeelOptions, granted_params};
use crate::requests::{start_run, wait_for};
use crate::state::{AppState, Principal};

use fields::FIELDS;
use wire::MessageStream;

/// The route's path.
pub(crate) const PATH: &str = "/v1/messages";

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if let Some(beta) = headers.get("anthropic-beta") {
        return Err(ApiError::BadRequest {
            message: format!(
                "beta features (`anthropic-beta: {}`) are not offered by Keel's facade; send the \
                 request without the header",
                beta.to_str().unwrap_or("…")
            ),
            param: None,
        });
    }
    let body: Value = crate::body::parse_body(body, false)?;
    let keel = KeelOptions::from_headers(&headers)?;
    if keel.progress {
        return Err(ApiError::BadRequest {
            message: format!(
                "`{}` is not offered on {PATH}: Anthropic's SDKs fail on stream events they do \
                 not know; follow the run at /api/requests/{{id}}/events instead (its id is the \
                 message id without `msg_`)",
                crate::openai::PROGRESS_HEADER
            ),
            param: None,
        });
    }
    let workspace = state.runtime.workspace();
    let asked = fields::read(body, keel.session.is_some(), |agent| {
        workspace.agents.contains_key(agent)
    })?;
    let granted = granted_params(
        &state,
        &asked.model,
        false,
        Requested::new(asked.params, asked.output_schema, asked.set),
    )?;
    let structured = granted.output_schema.is_some();
    let mut metadata = std::collections::BTreeMap::new();
    if let Some(user) = asked.user {
        metadata.insert("user".to_owned(), user);
    }
    let options = RequestOptions {
        input: asked.input,
        history: asked.history,
        agent: Some(asked.model.clone()),
        session_id: keel.session,
        metadata,
        params: granted.params,
        output_schema: granted.output_schema,
        ..Default::default()
    };
    let (handle, ticket) = start_run(&state, &principal, options).await?;
    let message = wire::MessageHead {
        id: format!("msg_{}", handle.request_id()),
        model: asked.model,
    };
    if asked.stream {
        // A structured output is sent once it is checked.
        let whole_answer = structured
            || state
                .runtime
                .workspace()
                .agents
                .get(&message.model)
                .is_some_and(|agent| agent.output.is_some());
        Ok(stream_response(
            MessageStream { head: message },
            handle,
            ticket,
            StreamOptions {
                progress: false,
                whole_answer,
                value_as_content: structured,
            },
        ))
    } else {
        let mut response = wait_for(handle, ticket).await?;
        if structured {
            crate::openai::stream::value_as_content(&mut response);
        }
        message.whole(&response).map(IntoResponse::into_response)
    }
}

/// The Anthropic error `type` of an HTTP status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 409 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// An error in Anthropic's shape.
fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// Rewrites every error answer of the route (written as the OpenAI-style `{"error": {..}}`
/// by [`ApiError`]) into Anthropic's shape, keeping the status and headers (`Retry-After`,
/// `WWW-Authenticate`). A field's name goes into the message, where Anthropic puts it.
pub(crate) async fn error_shape(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let error = &value["error"];
    let message = match (error["message"].as_str(), error["param"].as_str()) {
        (Some(message), Some(param)) if !message.contains(param) => {
            format!("{param}: {message}")
        }
        (Some(message), _) => message.to_owned(),
        (None, _) => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
    };
    let body = error_body(status, &message).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The JSON Schema of a Messages request as the facade accepts it, from [`FIELDS`]: refused
/// fields are left out, and so is anything else.
pub(crate) fn request_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use crate::openai::fields::Treatment;
    let mut properties = serde_json::Map::new();
    for field in FIELDS {
        if matches!(field.treatment, Treatment::Refused(_)) {
            continue;
        }
        let mut types: Vec<&str> = field.kinds.iter().map(|k| k.schema_type()).collect();
        if !fields::REQUIRED.contains(&field.name) {
            types.push("null");
        }
        let mut schema = match field.treatment {
            Treatment::OnlyValue(only, _) => {
                json!({ "enum": [serde_json::from_str::<Value>(only).unwrap_or(Value::Null), null] })
            }
            _ => json!({ "type": types }),
        };
        match field.name {
            "max_tokens" => {
                schema["minimum"] = json!(1);
                schema["maximum"] = json!(u32::MAX);
            }
            "temperature" | "top_p" => {
                schema["minimum"] = json!(0);
                schema["maximum"] = json!(1);
            }
            _ => {}
        }
        properties.insert(field.name.to_owned(), schema);
    }
    properties.insert(
        "messages".into(),
        json!({
            "type": "array",
            "minItems": 1,
            "description": "User and assistant turns; content a string or blocks (`text`, `tool_use`, `tool_result`, `thinking`, `redacted_thinking`). The last is a user turn of text: the run's input.",
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"enum": ["user", "assistant"]},
                    "content": {"type": ["string", "array"]},
                },
                "additionalProperties": false,
            },
        }),
    );
    let schema = json!({
        "type": "object",
        "description": "An Anthropic Messages request. `model` is the agent; `max_tokens`, `temperature`, `top_p` and `stop_sequences` apply to the run's model rounds within the agent's `facade`; `output_config.format` (`json_schema`) is the run's structured output; fields Keel cannot honour are refused with a 400 and so are not listed.",
        "required": fields::REQUIRED,
        "properties": properties,
        "additionalProperties": false,
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}
