//! The route table: every route with its handler, who may call it and what it takes. The
//! router and the OpenAPI 3.1 document (`GET /api/openapi.json`) are both built from it, so
//! the document cannot list a route the server lacks or miss one it has. Request bodies are
//! described by JSON Schemas generated from the very types the handlers parse.

use std::collections::BTreeMap;

use axum::Json;
use axum::http::Method;
use axum::routing::{self, MethodRouter};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::state::AppState;
use crate::{approvals, inventory, metrics, openai, requests, sessions, tasks};

/// Who may call a route when API keys are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone, without a key.
    Public,
    /// `client` keys (their own requests only) and `operator` keys.
    Client,
    /// `operator` keys only.
    Operator,
}

/// One route.
pub(crate) struct Route {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    pub access: Access,
    /// Query parameters: name and meaning.
    pub query: &'static [(&'static str, &'static str)],
    /// The JSON Schema of the body, if the route takes one.
    pub body: Option<fn(&mut SchemaGenerator) -> schemars::Schema>,
    /// What a success answers.
    pub answers: &'static str,
    pub handler: fn() -> MethodRouter<AppState>,
}

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

const RUN_FILTERS: &[(&str, &str)] = &[
    ("status", "only runs with this status"),
    ("agent", "only runs of this agent"),
    ("session", "only runs of this session"),
    ("since", "only runs started at or after this RFC 3339 time"),
    ("limit", "page size (1–1000, default 50)"),
    ("cursor", "the `nextCursor` of the previous page"),
];

/// Every route of the service.
pub(crate) fn routes() -> Vec<Route> {
    use Access::{Client, Operator, Public};
    let route = |method: Method,
                 path: &'static str,
                 access: Access,
                 summary: &'static str,
                 answers: &'static str,
                 handler: fn() -> MethodRouter<AppState>| Route {
        method,
        path,
        summary,
        access,
        query: &[],
        body: None,
        answers,
        handler,
    };
    vec![
        route(
            Method::GET,
            "/api/health",
            Public,
            "Health: the store (usable, schema version, writable), the workspace (loaded at, document counts), each model's provider",
            "`{status: ok|degraded, store, workspace, models}`; 503 with `status: unavailable` when the store is not usable",
            || routing::get(crate::health::health),
        ),
        route(
            Method::GET,
            "/api/openapi.json",
            Operator,
            "This document",
            "the OpenAPI 3.1 document",
            || routing::get(document),
        ),
        route(
            Method::GET,
            "/metrics",
            Operator,
            "Prometheus metrics (OpenMetrics text): runs by status, model and tool latency, tokens, approvals pending",
            "OpenMetrics text",
            || routing::get(metrics::metrics),
        ),
        route(
            Method::GET,
            "/v1/models",
            Client,
            "The workspace's agents as OpenAI models",
            "an OpenAI model list",
            || routing::get(openai::models),
        ),
        route(
            Method::GET,
            "/v1/capabilities",
            Client,
            "What this server offers (streaming, tools, progress opt-in, session header)",
            "a capabilities object",
            || routing::get(crate::capabilities),
        ),
        Route {
            body: Some(schema::<openai::ChatRequest>),
            ..route(
                Method::POST,
                "/v1/chat/completions",
                Client,
                "OpenAI Chat Completions; `model` is the agent. Headers: `X-Keel-Session` (a turn of that session), `X-Keel-Progress: true` (Keel events as SSE events named `keel`)",
                "`chat.completion`, or with `stream: true` SSE `chat.completion.chunk` frames ending with `[DONE]`",
                || routing::post(openai::chat_completions),
            )
        },
        Route {
            body: Some(schema::<requests::CreateRequest>),
            ..route(
                Method::POST,
                "/api/requests",
                Client,
                "Start a request (a run)",
                "202 `{requestId}`, or with `wait: true` 200 and the RunResponse",
                || routing::post(requests::create_request),
            )
        },
        Route {
            query: RUN_FILTERS,
            ..route(
                Method::GET,
                "/api/requests",
                Client,
                "List requests, newest first (client keys: their own)",
                "`{data: [RunRecord], nextCursor}`",
                || routing::get(requests::list_requests),
            )
        },
        route(
            Method::GET,
            "/api/requests/{id}",
            Client,
            "One request",
            "the RunRecord",
            || routing::get(requests::get_request),
        ),
        Route {
            query: &[
                ("after", "only events with a greater seq"),
                ("limit", "JSON page size (1–10000, default 1000)"),
            ],
            ..route(
                Method::GET,
                "/api/requests/{id}/events",
                Client,
                "A request's events: a JSON page, or with `Accept: text/event-stream` a live SSE stream (`id:` = seq) resumable with `Last-Event-ID`",
                "`{data: [Event], nextAfter}` or SSE",
                || routing::get(requests::request_events),
            )
        },
        route(
            Method::POST,
            "/api/requests/{id}/cancel",
            Client,
            "Cancel a live request",
            "`{cancelled}`",
            || routing::post(requests::cancel_request),
        ),
        Route {
            body: Some(schema::<requests::RetryBody>),
            ..route(
                Method::POST,
                "/api/requests/{id}/retry",
                Client,
                "Run an ended request again (same agent, input, session, history; `links.retryOf`)",
                "202 `{requestId}` or the RunResponse; 409 while the original runs",
                || routing::post(requests::retry_request),
            )
        },
        Route {
            query: &[("limit", "how many")],
            ..route(
                Method::GET,
                "/api/sessions",
                Operator,
                "List sessions",
                "`{data: [SessionRecord]}`",
                || routing::get(sessions::list_sessions),
            )
        },
        route(
            Method::GET,
            "/api/sessions/{id}",
            Operator,
            "A session and its transcript",
            "`{session, messages}`",
            || routing::get(sessions::get_session),
        ),
        route(
            Method::DELETE,
            "/api/sessions/{id}",
            Operator,
            "Delete a session (its runs stay)",
            "`{deleted: true}`",
            || routing::delete(sessions::delete_session),
        ),
        Route {
            query: &[("status", "pending, approved, denied or expired")],
            ..route(
                Method::GET,
                "/api/approvals",
                Operator,
                "List approvals",
                "`{data: [ApprovalRecord]}`",
                || routing::get(approvals::list_approvals),
            )
        },
        Route {
            body: Some(schema::<approvals::Decision>),
            ..route(
                Method::POST,
                "/api/approvals/{id}/approve",
                Operator,
                "Approve a pending call (once, or for the session)",
                "the decided ApprovalRecord; 409 if already decided",
                || routing::post(approvals::approve),
            )
        },
        Route {
            body: Some(schema::<approvals::Decision>),
            ..route(
                Method::POST,
                "/api/approvals/{id}/deny",
                Operator,
                "Deny a pending call",
                "the decided ApprovalRecord; 409 if already decided",
                || routing::post(approvals::deny),
            )
        },
        Route {
            query: &[("limit", "how many")],
            ..route(
                Method::GET,
                "/api/tasks",
                Operator,
                "List tasks (staged tool calls)",
                "`{data: [TaskRecord]}`",
                || routing::get(tasks::list_tasks),
            )
        },
        Route {
            body: Some(schema::<tasks::NewTask>),
            ..route(
                Method::POST,
                "/api/tasks",
                Operator,
                "Stage a tool call: checked by the gateway and recorded with its decision",
                "201 and the TaskRecord",
                || routing::post(tasks::create_task),
            )
        },
        route(
            Method::GET,
            "/api/tasks/{id}",
            Operator,
            "One task",
            "the TaskRecord",
            || routing::get(tasks::get_task),
        ),
        route(
            Method::PATCH,
            "/api/tasks/{id}",
            Operator,
            "Patch a task's arguments (JSON merge patch) and check it again",
            "the TaskRecord",
            || routing::patch(tasks::update_task),
        ),
        route(
            Method::DELETE,
            "/api/tasks/{id}",
            Operator,
            "Delete a task",
            "`{deleted: true}`",
            || routing::delete(tasks::delete_task),
        ),
        Route {
            body: Some(schema::<tasks::RunBody>),
            ..route(
                Method::POST,
                "/api/tasks/{id}/run",
                Operator,
                "Run an allowed task as a run of its own",
                "the RunResponse, or 202 `{requestId}` with `wait: false`",
                || routing::post(tasks::run_task),
            )
        },
        Route {
            query: &[("agent", "whose inventory (default: the default agent)")],
            ..route(
                Method::GET,
                "/api/tools",
                Operator,
                "The tools an agent may call, as the model sees them",
                "`{data: [ToolSpec]}`",
                || routing::get(tasks::list_tools),
            )
        },
        route(
            Method::GET,
            "/api/tools/stats",
            Operator,
            "Usage per tool: calls, errors, repairs, blocks, latency",
            "`{data: [ToolStats]}`",
            || routing::get(tasks::tool_stats),
        ),
        Route {
            body: Some(schema::<tasks::ToolCallBody>),
            ..route(
                Method::POST,
                "/api/tools/{name}/call",
                Operator,
                "Call a tool directly through the gateway (validation, repair, policy, hooks, approval), as a run of its own",
                "the RunResponse, or 202 `{requestId}` with `wait: false`",
                || routing::post(tasks::call_tool),
            )
        },
        Route {
            query: &[("meta", "`true`: the ArtifactRecord instead of the content")],
            ..route(
                Method::GET,
                "/api/artifacts/{id}",
                Operator,
                "A stored artifact (large tool output …)",
                "the content with its media type",
                || routing::get(inventory::artifact),
            )
        },
        route(
            Method::GET,
            "/api/inventory",
            Operator,
            "The workspace's agents, models, tools, policies and hooks (no secret values)",
            "`{agents, models, tools, policies, hooks}`",
            || routing::get(inventory::inventory),
        ),
    ]
}

/// The OpenAPI 3.1 document of [`routes`].
pub(crate) fn openapi() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for route in routes() {
        let mut parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } })
            })
            .collect();
        parameters.extend(route.query.iter().map(|(name, description)| {
            json!({ "name": name, "in": "query", "required": false, "description": description, "schema": { "type": "string" } })
        }));
        let mut operation = json!({
            "summary": route.summary,
            "parameters": parameters,
            "responses": {
                "2XX": { "description": route.answers },
                "default": {
                    "description": "an error",
                    "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
                }
            },
        });
        if let Some(body) = route.body {
            operation["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": body(&mut generator) } }
            });
        }
        operation["security"] = match route.access {
            Access::Public => json!([]),
            Access::Client => json!([{ "client": [] }, { "operator": [] }]),
            Access::Operator => json!([{ "operator": [] }]),
        };
        paths
            .entry(route.path.to_owned())
            .or_default()
            .insert(route.method.as_str().to_ascii_lowercase(), operation);
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": { "error": {
                "type": "object",
                "required": ["message", "type"],
                "properties": {
                    "message": { "type": "string" },
                    "type": { "type": "string" },
                    "param": { "type": ["string", "null"] },
                    "code": { "type": ["string", "null"] }
                }
            } }
        }),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Keel",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Keel's HTTP service: the OpenAI-compatible facade under /v1 and the runtime and operator API under /api. Errors answer `{error: {message, type, param, code}}`."
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "client": { "type": "http", "scheme": "bearer", "description": "an API key with role `client`" },
                "operator": { "type": "http", "scheme": "bearer", "description": "an API key with role `operator`" }
            }
        }
    })
}

/// `GET /api/openapi.json`. The document depends on the code only, so it is built once.
async fn document() -> Json<Value> {
    static DOCUMENT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(openapi);
    Json(DOCUMENT.clone())
}
