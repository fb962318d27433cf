//! Requests (runs) under `/api/requests`: create (async or waiting), list with filters and
//! cursor pagination, inspect, events as JSON pages or resumable SSE, cancel, retry.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use keel::{
    Event, RequestId, RequestOptions, RunCursor, RunFilter, RunHandle, RunRecord, RunResponse,
    RunStatus, Runtime,
};
use keel_workspace::spec::{Duration as SpecDuration, PermissionMode};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{internal, parse_body, parse_opt_enum, parse_query, session_id};
use crate::error::runtime_error;
use crate::state::{AppState, Principal, Ticket};

/// Runs listed per page when the caller gives no `limit`, and the most it may ask for.
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 1000;

/// Events per JSON page when the caller gives no `limit`, and the most it may ask for.
const DEFAULT_EVENTS_PAGE: usize = 1000;
const MAX_EVENTS_PAGE: usize = 10_000;

/// Starts a run for `principal` under the server's limits: a place in the admission queue
/// (or 429), the caller as the run's owner, and the server's request timeout.
pub(crate) async fn start_run(
    state: &AppState,
    principal: &Principal,
    options: RequestOptions,
) -> Result<(RunHandle, Ticket), ApiError> {
    within_budget(state, principal).await?;
    let ticket = state.admission.admit()?;
    let mut options = bound(state, principal, options)?;
    options.trace = options.trace.or_else(crate::trace::incoming);
    let handle = state
        .runtime
        .request(options)
        .await
        .map_err(runtime_error)?;
    Ok((handle, ticket))
}

/// Refuses a request made with a key whose daily budget (`server.apiKeys[].budget`) its runs
/// have spent today (UTC), as the store records them (every replica's runs count).
async fn within_budget(state: &AppState, principal: &Principal) -> Result<(), ApiError> {
    let Some(owner) = principal.owner() else {
        return Ok(());
    };
    let workspace = state.runtime.workspace();
    let Some(keel_workspace::CostLimit(budget)) = workspace
        .runtime
        .server
        .api_keys
        .iter()
        .find(|key| key.principal() == owner)
        .and_then(|key| key.budget)
    else {
        return Ok(());
    };
    let now = keel_types::now_rfc3339();
    let today = format!("{}T00:00:00.000Z", now.get(..10).unwrap_or_default());
    let filter = RunFilter {
        owner: Some(owner.clone()),
        since: Some(today),
        ..RunFilter::default()
    };
    let rows = state
        .runtime
        .runs()
        .usage(keel::UsageBy::Key, &filter)
        .await
        .map_err(internal)?;
    let spent = rows
        .iter()
        .filter_map(|row| row.usage.cost)
        .find(|cost| cost.currency == budget.currency);
    match spent {
        Some(spent) if spent.amount >= budget.amount => Err(ApiError::BudgetExceeded {
            message: format!(
                "the API key `{owner}` has spent {spent} today, its daily budget is {budget}; it renews at 00:00 UTC"
            ),
            retry_after: seconds_to_midnight(&now),
        }),
        _ => Ok(()),
    }
}

/// Seconds from `now` (RFC 3339, UTC) to the next 00:00 UTC, at least 1.
fn seconds_to_midnight(now: &str) -> u64 {
    let part = |range: std::ops::Range<usize>| -> u64 {
        now.get(range).and_then(|p| p.parse().ok()).unwrap_or(0)
    };
    let elapsed = part(11..13) * 3600 + part(14..16) * 60 + part(17..19);
    (86_400 - elapsed.min(86_399)).max(1)
}

/// A request as the server runs it: owned by the caller, within the server's request timeout.
fn bound(
    state: &AppState,
    principal: &Principal,
    mut options: RequestOptions,
) -> Result<RequestOptions, ApiError> {
    principal.bind_metadata(&mut options.metadata)?;
    options.owner = principal.owner();
    options.timeout = Some(
        options
            .timeout
            .map_or(state.request_timeout, |t| t.min(state.request_timeout)),
    );
    Ok(options)
}

/// Lets a run go on after its HTTP request has been answered; its place is given back when
/// it ends.
pub(crate) fn finish_in_background(mut handle: RunHandle, ticket: Ticket) {
    tokio::spawn(async move {
        while handle.next_event().await.is_some() {}
        if let Err(error) = handle.wait().await {
            tracing::warn!(%error, "a background run ended abnormally");
        }
        drop(ticket);
    });
}

/// Waits for a run while the HTTP request is alive: if the client goes away first, the run
/// is cancelled.
pub(crate) async fn wait_for(handle: RunHandle, ticket: Ticket) -> Result<RunResponse, ApiError> {
    let guard = handle.cancel_token().drop_guard();
    let response = handle
        .wait()
        .await
        .map_err(|_| ApiError::RunFailed("the run ended abnormally".into()))?;
    guard.disarm();
    drop(ticket);
    Ok(response)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// A workflow run is neither an agent's nor a session's turn.
#[schemars(extend("not" = {"anyOf": [
    {"required": ["agent", "workflow"]},
    {"required": ["sessionId", "workflow"]}
]}))]
pub(crate) struct CreateRequest {
    input: String,
    #[serde(default)]
    agent: Option<String>,
    /// A session to make the run a turn of: 1–128 letters, digits, `.`, `_` or `-`.
    #[serde(default)]
    #[schemars(regex(pattern = keel_types::ids::SESSION_ID_PATTERN))]
    session_id: Option<String>,
    /// Answer when the run has ended (200 and the `RunResponse`) instead of at once (202).
    #[serde(default)]
    wait: bool,
    /// A time limit for this run (`30s`, `5m`); the server's `requestTimeout` still applies.
    #[serde(default)]
    timeout: Option<SpecDuration>,
    /// The run's permission mode (`default`, `acceptEdits`, `dontAsk`, `plan`).
    #[serde(default)]
    mode: Option<PermissionMode>,
    /// Request metadata (string values), e.g. `{"user": "alice"}`: memory namespaces are
    /// rendered from it (`users/{metadata.user}`).
    #[serde(default)]
    metadata: std::collections::BTreeMap<String, String>,
    /// Run this workflow instead of an agent (its input: text, or JSON when its input
    /// schema asks for it). Not with `agent` or `sessionId`.
    #[serde(default)]
    workflow: Option<String>,
    /// Continue `sessionId` even though another principal created it (operator keys only,
    /// or a server without keys); the owner overridden is recorded in the run's
    /// `runtime.request.started`.
    #[serde(default)]
    override_session_owner: bool,
}

/// `POST /api/requests`: 202 `{requestId}` (the run goes on in the background), or with
/// `wait: true` 200 and the final `RunResponse`.
pub(crate) async fn create_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CreateRequest = parse_body(body, false)?;
    let session_id = request
        .session_id
        .as_deref()
        .map(|id| session_id(id, "sessionId"))
        .transpose()?;
    let agent = match (request.agent, request.workflow) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest {
                message: "give `agent` or `workflow`, not both".into(),
                param: Some("workflow"),
            });
        }
        (_, Some(workflow)) => {
            if !state.runtime.workflows().contains_key(&workflow) {
                return Err(ApiError::ResourceNotFound(format!(
                    "no workflow `{workflow}`"
                )));
            }
            Some(format!("{}{workflow}", keel_types::WORKFLOW_PREFIX))
        }
        (agent, None) => agent,
    };
    if request.override_session_owner && principal.is_client() {
        return Err(ApiError::Forbidden);
    }
    let options = RequestOptions {
        input: request.input,
        agent,
        session_id,
        mode: request.mode,
        timeout: request.timeout.map(|t| t.0),
        metadata: request.metadata,
        override_session_owner: request.override_session_owner,
        ..Default::default()
    };
    // On a shared store, a request nobody waits for is queued: the replica with room runs it.
    if !request.wait && state.runtime.is_shared() {
        return enqueue(&state, &principal, options).await;
    }
    let (handle, ticket) = start_run(&state, &principal, options).await?;
    answer_started(handle, ticket, request.wait).await
}

/// 202 `{requestId}` for a request queued in the shared store.
async fn enqueue(
    state: &AppState,
    principal: &Principal,
    options: RequestOptions,
) -> Result<Response, ApiError> {
    let mut options = bound(state, principal, options)?;
    options.trace = options.trace.or_else(crate::trace::incoming);
    let run = state
        .runtime
        .enqueue(options)
        .await
        .map_err(runtime_error)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "requestId": run.request_id })),
    )
        .into_response())
}

/// 202 `{requestId}` and the run in the background, or (waiting) 200 and its response.
pub(crate) async fn answer_started(
    handle: RunHandle,
    ticket: Ticket,
    wait: bool,
) -> Result<Response, ApiError> {
    let request_id = handle.request_id().clone();
    if wait {
        return Ok(Json(wait_for(handle, ticket).await?).into_response());
    }
    finish_in_background(handle, ticket);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "requestId": request_id })),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    cursor: Option<String>,
}

/// `GET /api/requests?status=&agent=&session=&since=&limit=&cursor=` →
/// `{data: [RunRecord…], nextCursor}`, newest first. `nextCursor` (absent on the last page)
/// is passed back as `cursor` for the next page. Client keys see their own requests only.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageQuery {
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

/// `GET /api/usage`: what runs used and cost, summed by agent (default), session, key or day,
/// or by several of them (`by=day,agent`: each agent's per day, rows with `groups`); a client
/// key sees its own runs only.
pub(crate) async fn usage(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: UsageQuery = parse_query(query.as_deref())?;
    let by =
        keel::UsageBy::parse_list(query.by.as_deref().unwrap_or("agent")).map_err(|message| {
            ApiError::BadRequest {
                message,
                param: Some("by"),
            }
        })?;
    let filter = RunFilter {
        since: query.since,
        owner: principal.is_client().then(|| principal.owner()).flatten(),
        ..RunFilter::default()
    };
    let rows = state
        .runtime
        .runs()
        .usage_grouped(&by, &filter)
        .await
        .map_err(internal)?;
    Ok(Json(serde_json::json!({ "data": rows })))
}

pub(crate) async fn list_requests(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ListQuery = parse_query(query.as_deref())?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest {
            message: format!("`limit` must be between 1 and {MAX_PAGE}"),
            param: Some("limit"),
        });
    }
    let before = match query.cursor.as_deref() {
        Some(cursor) => Some(RunCursor::decode(cursor).map_err(|e| ApiError::BadRequest {
            message: format!("invalid `cursor`: {e}"),
            param: Some("cursor"),
        })?),
        None => None,
    };
    let filter = RunFilter {
        status: parse_opt_enum::<RunStatus>(query.status.as_deref(), "status")?,
        agent: query.agent,
        session: query
            .session
            .as_deref()
            .map(|id| session_id(id, "session"))
            .transpose()?,
        since: query.since,
        owner: principal.is_client().then(|| principal.owner()).flatten(),
        parent: None,
        before,
        // One more than asked tells whether another page follows.
        limit: Some(limit + 1),
    };
    let mut runs = state.runtime.runs().list(&filter).await.map_err(internal)?;
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(|run| RunCursor::of(run).encode())
    } else {
        None
    };
    Ok(Json(json!({ "data": runs, "nextCursor": next_cursor })))
}

/// The run `id`, if `principal` may see it; 404 otherwise.
pub(crate) async fn visible_run(
    runtime: &Runtime,
    principal: &Principal,
    id: &RequestId,
) -> Result<RunRecord, ApiError> {
    let run = runtime
        .runs()
        .get(id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no request `{id}`")))?;
    principal.may_see(&run)?;
    Ok(run)
}

#[derive(Debug, Deserialize)]
struct GetQuery {
    #[serde(default)]
    tree: Option<String>,
}

/// `GET /api/requests/{id}[?tree=true]` → the RunRecord; with `tree`, also `children`: the
/// runs it started (subagents, workflow nodes), recursively, oldest first.
pub(crate) async fn get_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: GetQuery = parse_query(query.as_deref())?;
    let id = RequestId::from(id);
    let run = visible_run(&state.runtime, &principal, &id).await?;
    let json = |value: serde_json::Result<Value>| {
        value
            .map(Json)
            .map_err(|e| ApiError::Internal(e.to_string()))
    };
    if query.tree.as_deref() != Some("true") {
        return json(serde_json::to_value(run));
    }
    let tree = state
        .runtime
        .run_tree(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no request `{id}`")))?;
    json(serde_json::to_value(tree))
}

/// `POST /api/requests/{id}/cancel` → `{cancelled}` (whether a live run was signalled — here,
/// still queued, or on another replica of a shared store; a run that already ended is left as
/// it is).
pub(crate) async fn cancel_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = RequestId::from(id);
    visible_run(&state.runtime, &principal, &id).await?;
    let cancelled = state.runtime.cancel(&id).await.map_err(internal)?;
    Ok(Json(json!({ "cancelled": cancelled })))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    #[serde(default)]
    wait: bool,
}

/// `POST /api/requests/{id}/retry` (`{wait?}`): a new run with the same agent, input,
/// session and history, linked by `links.retryOf`; 202 `{requestId}` or, waiting, the
/// `RunResponse`. 409 while the original is still running.
pub(crate) async fn retry_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let retry: RetryBody = parse_body(body, true)?;
    let id = RequestId::from(id);
    visible_run(&state.runtime, &principal, &id).await?;
    let ticket = state.admission.admit()?;
    let handle = state
        .runtime
        .retry(&id, principal.owner())
        .await
        .map_err(runtime_error)?;
    answer_started(handle, ticket, retry.wait).await
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    #[serde(default)]
    after: Option<u64>,
    /// SSE only: also send each event's narration (derived, never stored).
    #[serde(default)]
    narration: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/requests/{id}/events?after=SEQ&limit=N`: a JSON page `{data: [Event…],
/// nextAfter}` (`nextAfter` is set when more events follow), or with
/// `Accept: text/event-stream` a live SSE stream (`id:` is the event's `seq`; resumable with
/// `Last-Event-ID`) that ends after the final event (`completed`, `failed`, `cancelled`; an
/// interrupted run is followed on through its resume, until this server shuts down); with
/// `narration=true` each event is followed by its narration, if it has one (no `id:`).
pub(crate) async fn request_events(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query: EventsQuery = parse_query(query.as_deref())?;
    let id = RequestId::from(id);
    visible_run(&state.runtime, &principal, &id).await?;
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !wants_sse {
        let limit = query.limit.unwrap_or(DEFAULT_EVENTS_PAGE);
        if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
            return Err(ApiError::BadRequest {
                message: format!("`limit` must be between 1 and {MAX_EVENTS_PAGE}"),
                param: Some("limit"),
            });
        }
        let mut events = state
            .runtime
            .runs()
            .events(&id, query.after.unwrap_or(0))
            .await
            .map_err(internal)?;
        let next_after = if events.len() > limit {
            events.truncate(limit);
            events.last().map(|e| e.seq)
        } else {
            None
        };
        return Ok(Json(json!({ "data": events, "nextAfter": next_after })).into_response());
    }
    let last_event_id = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::BadRequest {
                    message: "`Last-Event-ID` must be an event seq".into(),
                    param: None,
                })?,
        ),
        None => None,
    };
    let narrator = (query.narration.as_deref() == Some("true")).then(|| {
        std::sync::Arc::new(keel::Narrator::new(
            &state.runtime.workspace().runtime.progress.narration,
        ))
    });
    let stream = EventStream {
        narrator,
        follower: crate::follow::Follower::new(
            state,
            id,
            last_event_id.or(query.after).unwrap_or(0),
        ),
    };
    Ok(sse_response(futures_util::stream::unfold(
        stream,
        |mut stream| async move {
            let frame = stream.next().await?;
            Some((Ok::<_, Infallible>(frame), stream))
        },
    )))
}

/// A `text/event-stream` response over `frames`.
pub(crate) fn sse_response(
    frames: impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}

/// A live event stream: the run's stored events as SSE frames, each followed by its
/// narration when asked for.
struct EventStream {
    follower: crate::follow::Follower,
    /// Also sends each event's narration after it (`?narration=true`).
    narrator: Option<std::sync::Arc<keel::Narrator>>,
}

impl EventStream {
    async fn next(&mut self) -> Option<Bytes> {
        let event = match self.follower.next().await? {
            crate::follow::Followed::Event(event) => event,
            crate::follow::Followed::Idle => return Some(Bytes::from_static(b": keepalive\n\n")),
        };
        let frame = sse_frame(&event);
        Some(
            match self.narrator.as_ref().and_then(|n| n.narration_of(&event)) {
                // No `id:`, so `Last-Event-ID` keeps naming stored events only.
                Some(narration) => {
                    let data = serde_json::to_string(&narration).unwrap_or_else(|_| "{}".into());
                    let mut both = frame.to_vec();
                    both.extend_from_slice(
                        format!("event: {}\ndata: {data}\n\n", narration.type_name()).as_bytes(),
                    );
                    Bytes::from(both)
                }
                None => frame,
            },
        )
    }
}

/// One SSE frame: `id:` is the seq, `event:` the type name, `data:` the event JSON.
pub(crate) fn sse_frame(event: &Event) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        event.seq,
        event.type_name()
    ))
}

/// `GET /api/requests/{id}/trace` → `{requestId, traceId, spans}`: the spans of the run and of
/// every run it started, computed from their events.
pub(crate) async fn request_trace(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = RequestId::from(id);
    let run = visible_run(&state.runtime, &principal, &id).await?;
    let spans = state
        .runtime
        .trace(&id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no request `{id}`")))?;
    let trace = keel::trace::trace_of(&run).trace_id.to_string();
    let spans: Vec<Value> = spans
        .iter()
        .map(|span| {
            let mut value = serde_json::to_value(span).unwrap_or(Value::Null);
            if let Some(object) = value.as_object_mut() {
                object.insert("durationMs".into(), json!(span.duration_ms()));
            }
            value
        })
        .collect();
    Ok(Json(json!({
        "requestId": id,
        "traceId": trace,
        "semconv": keel::trace::SEMCONV_VERSION,
        "spans": spans,
    })))
}
