//! The runtime/operator API under `/api`: requests (create, list, inspect, cancel, events as
//! JSON pages or resumable SSE) and approvals (list, approve, deny).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::types::StoreError;
use keel::{
    ApprovalScope, ApprovalStatus, Event, RequestId, RequestOptions, RunFilter, RunStatus, Runtime,
    SessionId,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::ApiError;
use crate::openai::start_error;

/// How often a live event stream looks for new events.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Who decided approvals made through the API.
const DECIDER: &str = "api";

/// Parses a JSON body; an empty body parses as `{}` when `empty_ok`.
pub(crate) fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    empty_ok: bool,
) -> Result<T, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge
        } else {
            ApiError::BadRequest {
                message: rejection.body_text(),
                param: None,
            }
        }
    })?;
    let body: &[u8] = if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &body
    };
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest {
        message: format!("invalid request body: {e}"),
        param: None,
    })
}

/// Parses a query string (`a=1&b=x`) into `T`: every value is a string, except that values
/// made only of digits also parse as numbers (for `limit`, `after`).
fn parse_query<T: DeserializeOwned>(query: Option<&str>) -> Result<T, ApiError> {
    let mut map = serde_json::Map::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (percent_decode(key)?, percent_decode(value)?);
        if value.is_empty() {
            continue;
        }
        let value = match value.parse::<u64>() {
            Ok(n) if is_numeric_param(&key) => Value::from(n),
            _ => Value::String(value),
        };
        map.insert(key, value);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| ApiError::BadRequest {
        message: format!("invalid query: {e}"),
        param: None,
    })
}

fn is_numeric_param(key: &str) -> bool {
    matches!(key, "limit" | "after")
}

/// Decodes `%XX` escapes and `+` (space) of a query component.
fn percent_decode(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::BadRequest {
        message: format!("invalid query encoding: `{text}`"),
        param: None,
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// A store or runtime failure, without internals beyond the error's own message.
fn internal(error: keel::Error) -> ApiError {
    ApiError::Internal(error.to_string())
}

/// Parses a snake_case enum value (`status=`) through its serde name.
fn parse_enum<T: DeserializeOwned>(value: &str, param: &'static str) -> Result<T, ApiError> {
    serde_json::from_value(Value::String(value.to_owned())).map_err(|_| ApiError::BadRequest {
        message: format!("invalid `{param}`: `{value}`"),
        param: Some(param),
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateRequest {
    input: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    wait: bool,
}

/// `POST /api/requests`: 202 `{requestId}` (the run goes on in the background), or with
/// `wait: true` 200 and the final `RunResponse`.
pub(crate) async fn create_request(
    State(runtime): State<Runtime>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CreateRequest = parse_body(body, false)?;
    let mut handle = runtime
        .request(RequestOptions {
            input: request.input,
            agent: request.agent,
            session_id: request.session_id.map(SessionId::from),
            ..Default::default()
        })
        .await
        .map_err(start_error)?;
    let request_id = handle.request_id().clone();
    if request.wait {
        let guard = handle.cancel_token().drop_guard();
        let response = handle
            .wait()
            .await
            .map_err(|_| ApiError::RunFailed("the run ended abnormally".into()))?;
        guard.disarm();
        return Ok(Json(response).into_response());
    }
    tokio::spawn(async move {
        while handle.next_event().await.is_some() {}
        if let Err(error) = handle.wait().await {
            tracing::warn!(%error, "a background run ended abnormally");
        }
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "requestId": request_id })),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/requests?status=&agent=&session=&limit=` → `{data: [RunRecord…]}`.
pub(crate) async fn list_requests(
    State(runtime): State<Runtime>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ListQuery = parse_query(query.as_deref())?;
    let status = match query.status.as_deref() {
        Some(status) => Some(parse_enum::<RunStatus>(status, "status")?),
        None => None,
    };
    let filter = RunFilter {
        status,
        agent: query.agent,
        session: query.session.map(SessionId::from),
        limit: query.limit,
        ..Default::default()
    };
    let runs = runtime.list_requests(&filter).await.map_err(internal)?;
    Ok(Json(json!({ "data": runs })))
}

/// 404 unless the run exists.
async fn require_run(runtime: &Runtime, id: &RequestId) -> Result<keel::RunRecord, ApiError> {
    runtime
        .get_run(id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no request `{id}`")))
}

/// `GET /api/requests/{id}` → the RunRecord.
pub(crate) async fn get_request(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
) -> Result<Json<keel::RunRecord>, ApiError> {
    Ok(Json(require_run(&runtime, &RequestId::from(id)).await?))
}

/// `POST /api/requests/{id}/cancel` → `{cancelled}` (whether a live run was signalled).
pub(crate) async fn cancel_request(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = RequestId::from(id);
    require_run(&runtime, &id).await?;
    Ok(Json(json!({ "cancelled": runtime.cancel(&id) })))
}

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    #[serde(default)]
    after: Option<u64>,
}

/// `GET /api/requests/{id}/events?after=SEQ`: a JSON page `{data: [Event…]}`, or with
/// `Accept: text/event-stream` a live SSE stream (`id:` is the event's `seq`; resumable with
/// `Last-Event-ID`) that ends after the terminal event.
pub(crate) async fn request_events(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query: EventsQuery = parse_query(query.as_deref())?;
    let id = RequestId::from(id);
    require_run(&runtime, &id).await?;
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !wants_sse {
        let events = runtime
            .events(&id, query.after.unwrap_or(0))
            .await
            .map_err(internal)?;
        return Ok(Json(json!({ "data": events })).into_response());
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
    let state = EventStream {
        runtime,
        id,
        last_seq: last_event_id.or(query.after).unwrap_or(0),
        pending: VecDeque::new(),
        done: false,
    };
    let frames = futures_util::stream::unfold(state, |mut state| async move {
        let frame = state.next().await?;
        Some((Ok::<_, Infallible>(frame), state))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}

/// The state of a live event stream.
struct EventStream {
    runtime: Runtime,
    id: RequestId,
    /// The newest `seq` sent (or skipped by the client).
    last_seq: u64,
    pending: VecDeque<Event>,
    /// A terminal event was sent, or the run ended without one; nothing more comes.
    done: bool,
}

impl EventStream {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.last_seq = event.seq;
                if event.payload.is_terminal() {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(sse_frame(&event));
            }
            if self.done {
                return None;
            }
            match self.runtime.events(&self.id, self.last_seq).await {
                Ok(events) if !events.is_empty() => {
                    self.pending
                        .extend(events.into_iter().filter(|e| e.seq > self.last_seq));
                }
                Ok(_) => {
                    // Nothing new: stop if the run ended without a terminal event (e.g.
                    // interrupted), otherwise wait and look again.
                    match self.runtime.get_run(&self.id).await {
                        Ok(Some(run)) if !run.status.is_terminal() => {
                            tokio::time::sleep(POLL_INTERVAL).await;
                        }
                        Ok(Some(_)) => {
                            // Read once more: the terminal event may have landed meanwhile.
                            let rest = self.runtime.events(&self.id, self.last_seq).await;
                            self.done = true;
                            if let Ok(rest) = rest {
                                self.pending.extend(rest);
                            }
                        }
                        Ok(None) | Err(_) => return None,
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reading events for a live stream failed");
                    return None;
                }
            }
        }
    }
}

/// One SSE frame: `id:` is the seq, `event:` the type name, `data:` the event JSON.
fn sse_frame(event: &Event) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        event.seq,
        event.type_name()
    ))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApprovalsQuery {
    #[serde(default)]
    status: Option<String>,
}

/// `GET /api/approvals?status=pending` → `{data: [ApprovalRecord…]}`.
pub(crate) async fn list_approvals(
    State(runtime): State<Runtime>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ApprovalsQuery = parse_query(query.as_deref())?;
    let status = match query.status.as_deref() {
        Some(status) => Some(parse_enum::<ApprovalStatus>(status, "status")?),
        None => None,
    };
    let approvals = runtime.list_approvals(status).await.map_err(internal)?;
    Ok(Json(json!({ "data": approvals })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/approvals/{id}/approve`.
pub(crate) async fn approve(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    decide(runtime, id, true, body).await
}

/// `POST /api/approvals/{id}/deny`.
pub(crate) async fn deny(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    decide(runtime, id, false, body).await
}

/// Decides an approval once: the decided record, 404 for an unknown id, 409 when it was
/// already decided.
async fn decide(
    runtime: Runtime,
    id: String,
    approve: bool,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    let decision: Decision = parse_body(body, true)?;
    if runtime.get_approval(&id).await.map_err(internal)?.is_none() {
        return Err(ApiError::ResourceNotFound(format!("no approval `{id}`")));
    }
    runtime
        .decide_approval(
            &id,
            approve,
            ApprovalScope::Once,
            DECIDER,
            decision.reason.as_deref(),
        )
        .await
        .map(Json)
        .map_err(|error| match error {
            keel::Error::Store(StoreError::Invalid(message)) if message.contains("was already") => {
                ApiError::Conflict(message)
            }
            keel::Error::Store(StoreError::Invalid(message))
                if message.starts_with("no approval") =>
            {
                ApiError::ResourceNotFound(message)
            }
            other => internal(other),
        })
}
