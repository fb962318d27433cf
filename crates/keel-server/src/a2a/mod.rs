//! A2A (Agent2Agent, protocol 1.0, JSON-RPC binding): every agent of the workspace is an A2A
//! agent at `/a2a/{agent}`, with its Agent Card at `/a2a/{agent}/.well-known/agent-card.json`
//! (and the default agent's at `/.well-known/agent-card.json`).
//!
//! - `SendMessage` starts a task — a Keel run of the agent, its context the run's session
//!   (a new one when the message names none) — and answers when it has ended or waits for a
//!   human (`returnImmediately`: at once); `SendStreamingMessage` streams it as SSE
//!   (the task, status updates, artifact updates);
//! - a run waiting on an approval is `TASK_STATE_INPUT_REQUIRED`, its status message the
//!   question; a message to that task (`taskId`) with `approve`/`deny` (or data
//!   `{approved, scope?, reason?}`) decides it, as the console, the API or the CLI can;
//! - `GetTask`, `CancelTask`, `SubscribeToTask` (a task that has not ended), `ListTasks`
//!   (this principal's runs of the agent); push notifications are not offered (the card
//!   says so, and their methods answer `-32003`).
//!
//! Calls are authenticated like `/v1` (`Authorization: Bearer`); client keys see their own
//! tasks. The card is public and names the bearer scheme when keys are configured.

mod rpc;
mod task;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::ApiError;
use crate::state::AppState;

pub(crate) use rpc::rpc;

/// The A2A protocol version served.
const PROTOCOL_VERSION: &str = "1.0";

/// `GET /.well-known/agent-card.json`: the default agent's card.
pub(crate) async fn default_card(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let workspace = state.runtime.workspace();
    let agent = workspace
        .default_agent()
        .map(str::to_owned)
        .or_else(|| workspace.agents.keys().next().cloned())
        .ok_or_else(|| ApiError::ResourceNotFound("the workspace has no agent".into()))?;
    card_of(&state, &agent, &headers).map(Json)
}

/// `GET /a2a/{agent}/.well-known/agent-card.json`.
pub(crate) async fn card(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    card_of(&state, &agent, &headers).map(Json)
}

/// The server's own address as the caller reached it (`X-Forwarded-Proto` and `Host`), for
/// the absolute URLs a card and artifacts carry.
pub(super) fn base_url(headers: &HeaderMap) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let scheme = header("x-forwarded-proto").unwrap_or("http");
    let host = header("host").unwrap_or("127.0.0.1");
    format!("{scheme}://{host}")
}

fn card_of(state: &AppState, agent: &str, headers: &HeaderMap) -> Result<Value, ApiError> {
    let workspace = state.runtime.workspace();
    let spec = workspace
        .agents
        .get(agent)
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no agent `{agent}`")))?;
    let description = spec
        .instructions
        .split("\n\n")
        .next()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map_or_else(|| format!("The Keel agent `{agent}`."), str::to_owned);
    let mut skills = vec![json!({
        "id": agent,
        "name": agent,
        "description": description,
        "tags": ["keel", "agent"],
    })];
    for tool in &spec.tools {
        let about = workspace.tools.get(tool).map_or_else(
            || format!("Uses the tool `{tool}`."),
            |t| t.description.clone(),
        );
        skills.push(json!({"id": format!("tool:{tool}"), "name": tool, "description": about, "tags": ["tool"]}));
    }
    for skill in &spec.skills {
        let about = state.runtime.skills().current().get(skill).map_or_else(
            || format!("The skill `{skill}`."),
            |s| s.description.clone(),
        );
        skills.push(json!({"id": format!("skill:{skill}"), "name": skill, "description": about, "tags": ["skill"]}));
    }
    let base = base_url(headers);
    let mut card = json!({
        "name": agent,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}/a2a/{agent}"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "provider": {"organization": "Keel", "url": base},
        "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    });
    if !workspace.runtime.server.api_keys.is_empty() {
        card["securitySchemes"] = json!({"keel": {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "A Keel API key (`server.apiKeys`), client or operator",
        }}});
        card["securityRequirements"] = json!([{"schemes": {"keel": {"list": []}}}]);
    }
    Ok(card)
}

/// The JSON Schema of a JSON-RPC 2.0 request (A2A's methods and their params are A2A's own
/// specification's).
pub(crate) fn request_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = json!({
        "type": "object",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "method": {"enum": [
                "SendMessage", "SendStreamingMessage", "GetTask", "CancelTask",
                "SubscribeToTask", "ListTasks", "CreateTaskPushNotificationConfig",
                "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard"
            ]},
            "params": {"type": "object"},
        },
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}
