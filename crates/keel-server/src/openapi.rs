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
use crate::{approvals, inventory, metrics, reload, requests, sessions, tasks};

mod console;
mod facades;
mod knowledge;
mod protocols;

pub(crate) use crate::auth::Access;

/// One route.
pub(crate) struct Route {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    pub access: Access,
    /// Query parameters: checked by [`check_query`] before the handler runs, and described
    /// by the document, from this one list.
    pub query: &'static [Param],
    /// What the path's `{id}`/`{name}` accepts.
    pub path_param: Accepts,
    /// The JSON Schema of the body, if the route takes one.
    pub body: Option<fn(&mut SchemaGenerator) -> schemars::Schema>,
    /// Whether the body may be left out (it then reads as `{}`).
    pub body_optional: bool,
    /// What a success answers.
    pub answers: &'static str,
    pub handler: fn() -> MethodRouter<AppState>,
    /// Whether the OpenAPI document describes the route. Only `/mcp` is left out, on
    /// purpose: it speaks another protocol (MCP's streamable HTTP, with its own
    /// specification, media types and errors), which an OpenAPI document cannot state; the
    /// document's description names it instead.
    pub documented: bool,
}

/// A query parameter.
pub(crate) struct Param {
    pub name: &'static str,
    pub description: &'static str,
    pub accepts: Accepts,
}

/// What a parameter's value may be. An empty value (`?agent=`) of a [`Accepts::Text`]
/// parameter counts as absent; every other kind rejects it.
#[derive(Clone, Copy)]
pub(crate) enum Accepts {
    /// Any text.
    Text,
    /// A decimal integer in `min..=max`.
    Integer { min: u64, max: u64 },
    /// One of these names.
    OneOf(&'static [&'static str]),
    /// `true` or `false`.
    Boolean,
    /// A session id (`SessionId::parse`); a bad one is a 400 `invalid_session_id`.
    SessionId,
    /// Text matching `pattern` (the document's), as `check` (the server's) decides.
    Format {
        pattern: &'static str,
        check: fn(&str) -> bool,
    },
}

impl Accepts {
    /// Whether the server takes `value`.
    fn accepts(self, value: &str) -> bool {
        match self {
            Self::Text => true,
            Self::Integer { min, max } => {
                value.bytes().all(|b| b.is_ascii_digit())
                    && value.parse::<u64>().is_ok_and(|n| (min..=max).contains(&n))
            }
            Self::OneOf(names) => names.contains(&value),
            Self::Boolean => matches!(value, "true" | "false"),
            Self::SessionId => keel::SessionId::parse(value).is_ok(),
            Self::Format { check, .. } => check(value),
        }
    }

    /// The JSON Schema of a value.
    fn schema(self) -> Value {
        match self {
            Self::Text => json!({ "type": "string" }),
            Self::Integer { min, max } => {
                json!({ "type": "integer", "minimum": min, "maximum": max })
            }
            Self::OneOf(names) => json!({ "type": "string", "enum": names }),
            Self::Boolean => json!({ "type": "boolean" }),
            Self::SessionId => {
                json!({ "type": "string", "pattern": keel_types::ids::SESSION_ID_PATTERN })
            }
            Self::Format { pattern, .. } => json!({ "type": "string", "pattern": pattern }),
        }
    }

    /// What a valid value looks like, for the 400's message.
    fn expected(self) -> String {
        match self {
            Self::Text => "text".into(),
            Self::Integer { min, max } => format!("an integer between {min} and {max}"),
            Self::OneOf(names) => format!("one of {}", names.join(", ")),
            Self::Boolean => "true or false".into(),
            Self::SessionId => "a session id".into(),
            Self::Format { pattern, .. } => format!("text matching {pattern}"),
        }
    }
}

const fn param(name: &'static str, accepts: Accepts, description: &'static str) -> Param {
    Param {
        name,
        description,
        accepts,
    }
}

/// The route layer that answers 400 when a declared query parameter has a value its
/// [`Accepts`] refuses (undeclared parameters are ignored).
pub(crate) async fn check_query(
    axum::extract::State(params): axum::extract::State<&'static [Param]>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let pairs = match crate::body::query_pairs(request.uri().query()) {
        Ok(pairs) => pairs,
        Err(error) => return error.into_response(),
    };
    for (key, value) in &pairs {
        let Some(param) = params.iter().find(|p| p.name == key) else {
            continue;
        };
        let absent = value.is_empty() && matches!(param.accepts, Accepts::Text);
        if let (Accepts::SessionId, Err(error)) =
            (param.accepts, crate::body::session_id(value, param.name))
        {
            return error.into_response();
        }
        if !absent && !param.accepts.accepts(value) {
            return crate::ApiError::BadRequest {
                message: format!(
                    "invalid `{}`: `{value}` (expected {})",
                    param.name,
                    param.accepts.expected()
                ),
                param: Some(param.name),
            }
            .into_response();
        }
    }
    next.run(request).await
}

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

/// A page size of `1..=max`.
const fn page(max: u64) -> Accepts {
    Accepts::Integer { min: 1, max }
}

/// A run-list cursor: printable ASCII, a newline, printable ASCII, as lowercase or uppercase
/// hex — what `nextCursor` holds.
const CURSOR: Accepts = Accepts::Format {
    pattern: "^(?:[2-6][0-9a-fA-F]|7[0-9a-eA-E])+0[aA](?:[2-6][0-9a-fA-F]|7[0-9a-eA-E])+$",
    check: is_cursor,
};

fn is_cursor(value: &str) -> bool {
    let printable = |pair: &[u8]| match pair {
        [high, low] => {
            let low_ok = low.is_ascii_hexdigit();
            match high {
                b'2'..=b'6' => low_ok,
                b'7' => low_ok && !matches!(low, b'f' | b'F'),
                _ => false,
            }
        }
        _ => false,
    };
    let bytes = value.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return false;
    }
    let pairs: Vec<&[u8]> = bytes.chunks(2).collect();
    let newlines: Vec<usize> = pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p, [b'0', b'a' | b'A']))
        .map(|(i, _)| i)
        .collect();
    match newlines.as_slice() {
        [at] => {
            *at > 0
                && *at + 1 < pairs.len()
                && pairs
                    .iter()
                    .enumerate()
                    .all(|(i, p)| i == *at || printable(p))
        }
        _ => false,
    }
}

/// An artifact id, bare or as its whole `keel://artifacts/<id>` URI.
const ARTIFACT_ID: Accepts = Accepts::Format {
    pattern: "^(keel://artifacts/)?[A-Za-z0-9_-]{1,128}$",
    check: |id| keel_types::artifact_id(id).is_some(),
};

/// A skill's name: lowercase letters, digits and `-`, at most 64 characters.
const SKILL_NAME: Accepts = Accepts::Format {
    pattern: "^[a-z0-9-]{1,64}$",
    check: |name| keel_workspace::skills::name_problem(name).is_none(),
};

/// A session id: the one rule of `SessionId::parse`.
const SESSION_ID: Accepts = Accepts::SessionId;

const RUN_FILTERS: &[Param] = &[
    param(
        "status",
        Accepts::OneOf(keel::RunStatus::NAMES),
        "only runs with this status",
    ),
    param("agent", Accepts::Text, "only runs of this agent"),
    param("session", SESSION_ID, "only runs of this session"),
    param(
        "since",
        Accepts::Text,
        "only runs started at or after this RFC 3339 time",
    ),
    param("limit", page(1000), "page size (default 50)"),
    param("cursor", CURSOR, "the `nextCursor` of the previous page"),
];

/// The largest `seq` the store keeps (a SQLite integer).
const MAX_SEQ: u64 = i64::MAX as u64;

/// A documented route with no query parameters or body, taking any path parameter.
fn route(
    method: Method,
    path: &'static str,
    access: Access,
    summary: &'static str,
    answers: &'static str,
    handler: fn() -> MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        summary,
        access,
        query: const { &[] },
        path_param: Accepts::Text,
        body: None,
        body_optional: false,
        answers,
        handler,
        documented: true,
    }
}

/// Every route of the service.
pub(crate) fn routes() -> Vec<Route> {
    use Access::{Client, Operator, Public};
    // MCP's streamable HTTP: one service answers its three methods.
    let mcp = |method: Method,
               summary: &'static str,
               answers: &'static str,
               handler: fn() -> MethodRouter<AppState>| Route {
        documented: false,
        ..route(method, "/mcp", Operator, summary, answers, handler)
    };
    vec![
        route(
            Method::GET,
            "/api/health",
            Public,
            "Health: the store (usable, schema version, writable; on PostgreSQL, `cluster`: this replica's lease, its runs, the replicas, the queue depth, runs taken over), the workspace (loaded at, document counts), each model's provider, each MCP server's state",
            "`{status: ok|degraded, store, workspace, models, mcpServers}`; 503 with `status: unavailable` when the store is not usable",
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
        Route {
            query: const {
                &[param(
                    "tree",
                    Accepts::Boolean,
                    "with the runs it started, recursively (`children`)",
                )]
            },
            ..route(
                Method::GET,
                "/api/requests/{id}",
                Client,
                "One request (with `tree=true`: and every run it started)",
                "the RunRecord (with `tree`: and its `children`)",
                || routing::get(requests::get_request),
            )
        },
        Route {
            query: const {
                &[
                    param(
                        "after",
                        Accepts::Integer {
                            min: 0,
                            max: MAX_SEQ,
                        },
                        "only events with a greater seq",
                    ),
                    param("limit", page(10_000), "JSON page size (default 1000)"),
                    param(
                        "narration",
                        Accepts::Boolean,
                        "SSE: also each event's narration (derived, never stored)",
                    ),
                ]
            },
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
            Method::GET,
            "/api/requests/{id}/trace",
            Client,
            "A request's spans and those of every run it started, computed from their events (docs/observability.md): what the OTLP export sends, without a collector",
            "`{requestId, traceId, semconv, spans: [{traceId, spanId, parentSpanId, name, kind, startUnixNanos, endUnixNanos, durationMs, status, attributes, links, requestId, seqs}]}`",
            || routing::get(requests::request_trace),
        ),
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
            body_optional: true,
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
            query: const { &[param("limit", page(1000), "how many (default: all)")] },
            ..route(
                Method::GET,
                "/api/sessions",
                Operator,
                "List sessions",
                "`{data: [SessionRecord]}`",
                || routing::get(sessions::list_sessions),
            )
        },
        Route {
            path_param: SESSION_ID,
            ..route(
                Method::GET,
                "/api/sessions/{id}",
                Operator,
                "A session and its transcript",
                "`{session, messages}`",
                || routing::get(sessions::get_session),
            )
        },
        Route {
            path_param: SESSION_ID,
            ..route(
                Method::DELETE,
                "/api/sessions/{id}",
                Operator,
                "Delete a session (its runs stay)",
                "`{deleted: true}`",
                || routing::delete(sessions::delete_session),
            )
        },
        Route {
            path_param: SESSION_ID,
            query: const {
                &[param(
                    "keep",
                    Accepts::Integer { min: 0, max: 10_000 },
                    "turns at the end kept word for word (default 4)",
                )]
            },
            ..route(
                Method::POST,
                "/api/sessions/{id}/compact",
                Operator,
                "Summarize a session's older turns: its runs then send the summary in their place (the transcript keeps every turn)",
                "`{summary: {text, throughSeq, at} | null}`",
                || routing::post(sessions::compact_session),
            )
        },
        Route {
            query: const {
                &[param(
                    "status",
                    Accepts::OneOf(keel_types::ApprovalStatus::NAMES),
                    "only approvals with this status",
                )]
            },
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
            body_optional: true,
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
            body_optional: true,
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
            query: const { &[param("limit", page(1000), "how many (default: all)")] },
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
        Route {
            body: Some(merge_patch),
            ..route(
                Method::PATCH,
                "/api/tasks/{id}",
                Operator,
                "Patch a task's arguments (JSON merge patch) and check it again",
                "the TaskRecord",
                || routing::patch(tasks::update_task),
            )
        },
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
            body_optional: true,
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
            query: const {
                &[param(
                    "agent",
                    Accepts::Text,
                    "whose inventory (default: the default agent)",
                )]
            },
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
            query: const {
                &[param(
                    "meta",
                    Accepts::Boolean,
                    "`true`: the ArtifactRecord instead of the content",
                )]
            },
            path_param: ARTIFACT_ID,
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
            Method::POST,
            "/api/workspace/reload",
            Operator,
            "Load the workspace again and swap it in; runs in flight finish on theirs (409 with every error when it is invalid: the loaded one keeps serving)",
            "`{digest, changed, changes, run, mcp: {kept, restarted, removed}}`",
            || routing::post(reload::reload),
        ),
        route(
            Method::GET,
            "/api/inventory",
            Operator,
            "The workspace's agents, models, tools, policies, hooks, MCP servers and skills (no secret values)",
            "`{agents, models, tools, policies, hooks, mcpServers, skills}`",
            || routing::get(inventory::inventory),
        ),
        mcp(
            Method::POST,
            "MCP (streamable HTTP): a JSON-RPC message of the session in `Mcp-Session-Id` (an `initialize` opens one)",
            "JSON, or an SSE stream ending with the answer",
            || routing::post(crate::mcp::handle),
        ),
        mcp(
            Method::GET,
            "MCP: the session's stream of server messages",
            "SSE",
            || routing::get(crate::mcp::handle),
        ),
        mcp(Method::DELETE, "MCP: end the session", "202", || {
            routing::delete(crate::mcp::handle)
        }),
    ]
    .into_iter()
    .chain(facades::routes())
    .chain(knowledge::routes())
    .chain(console::routes())
    .chain(protocols::routes())
    .collect()
}

/// The OpenAPI 3.1 document of [`routes`]; `secured` (API keys are configured) adds the
/// security schemes and each operation's requirement, which the server then enforces.
pub(crate) fn openapi(secured: bool) -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for route in routes().into_iter().filter(|route| route.documented) {
        let mut parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({ "name": name, "in": "path", "required": true, "schema": route.path_param.schema() })
            })
            .collect();
        parameters.extend(route.query.iter().map(|param| {
            json!({ "name": param.name, "in": "query", "required": false, "description": param.description, "schema": param.accepts.schema() })
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
                "required": !route.body_optional,
                "content": { "application/json": { "schema": body(&mut generator) } }
            });
        }
        if secured {
            operation["security"] = match route.access {
                Access::Public => json!([]),
                Access::Client => json!([{ "client": [] }, { "operator": [] }]),
                Access::Operator => json!([{ "operator": [] }]),
            };
        }
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
    let mut components = json!({ "schemas": schemas });
    if secured {
        components["securitySchemes"] = json!({
            "client": { "type": "http", "scheme": "bearer", "description": "an API key with role `client`" },
            "operator": { "type": "http", "scheme": "bearer", "description": "an API key with role `operator`" }
        });
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Keel",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Keel's HTTP service: the OpenAI-compatible facade under /v1 and the runtime and operator API under /api. Errors answer `{error: {message, type, param, code}}`. Not described here: /mcp, the Model Context Protocol over streamable HTTP (operator keys), which follows the MCP specification."
        },
        "paths": paths,
        "components": components,
    })
}

/// `GET /api/openapi.json`: the document built when the router was (it depends on the code
/// and on whether keys are configured).
async fn document(axum::extract::State(state): axum::extract::State<AppState>) -> Json<Value> {
    Json(Value::clone(&state.openapi))
}

/// A JSON merge patch (RFC 7396) of a task's arguments.
fn merge_patch(_: &mut SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "a JSON merge patch of the task's arguments"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_the_server_issues_passes_the_check_and_others_do_not() {
        let cursor = keel::RunCursor {
            started_at: "2026-01-02T03:04:05.678Z".into(),
            request_id: keel::RequestId::from("run_0123".to_owned()),
        }
        .encode();
        assert!(CURSOR.accepts(&cursor), "{cursor}");
        for bad in [
            "", "0a", "410a", "0a41", "41", "410a41zz", "c3a90a41", "417f0a41",
        ] {
            assert!(!CURSOR.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn integers_are_plain_digits_within_the_declared_range() {
        let limit = page(1000);
        assert!(limit.accepts("1") && limit.accepts("1000"));
        for bad in [
            "",
            "0",
            "1001",
            "+5",
            "-1",
            "1.0",
            "abc",
            "99999999999999999999",
        ] {
            assert!(!limit.accepts(bad), "{bad}");
        }
    }
}
