//! The web console (`/console`): a page, a script and a style sheet embedded in the binary
//! (no Node.js, CDN or network at run time), which read and act through the `/api` routes.
//!
//! Sign-in: with API keys configured, the console asks for an operator key once
//! (`POST /console/login {key}`) and keeps a session in an HttpOnly, `SameSite=Strict` cookie;
//! a client key is refused. A session also has a CSRF token (`GET /console/session` gives it
//! to the page), which every state-changing `/api` request made with the cookie must carry in
//! `X-Keel-CSRF`. Sessions live in this process's memory for 12 hours (a restart signs
//! everyone out). Without keys (loopback only) the console needs no sign-in.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;

use crate::ApiError;
use crate::auth::{COOKIE, Keys, SESSION_TTL, cookie_token};
use crate::body::parse_body;
use crate::state::AppState;

const INDEX: &str = include_str!("../console/index.html");

/// The console's files by name, with their media types: what `GET /console/{file}` serves.
pub(crate) const ASSETS: &[(&str, &str, &str)] = &[
    (
        "core.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/core.js"),
    ),
    (
        "run.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/run.js"),
    ),
    (
        "graph.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/graph.js"),
    ),
    (
        "pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/pages.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../console/app.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../console/icon.svg"),
    ),
];

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
                ),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}

/// `GET /console`: the page.
pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /console/{file}`: one of the console's scripts, its style sheet or its icon; 404 for
/// any other name.
pub(crate) async fn file(
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(file, _, _)| *file == name)
        .map(|(_, content_type, body)| asset(content_type, body))
        .ok_or(ApiError::NotFound)
}

/// `GET /favicon.ico`: the console's icon, for browsers that ask for it by that name.
pub(crate) async fn favicon() -> Result<Response, ApiError> {
    file(axum::extract::Path("icon.svg".to_owned())).await
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Login {
    /// An operator API key.
    key: String,
}

/// `POST /console/login {key}`: an operator key opens a session (cookie + CSRF token); a
/// client key is refused (403), anything else is 401.
pub(crate) async fn login(
    Extension(keys): Extension<Arc<Keys>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let login: Login = parse_body(body, false)?;
    if keys.is_empty() {
        return Ok(Json(json!({"authRequired": false})).into_response());
    }
    let principal = keys
        .principal_for(login.key.as_bytes())
        .ok_or(ApiError::Unauthorized)?;
    if principal.is_client() {
        return Err(ApiError::Forbidden);
    }
    let (token, csrf) = keys.sessions.open(principal)?;
    let cookie = format!(
        "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    );
    let mut response = Json(json!({"authRequired": true, "csrf": csrf})).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `POST /console/logout`: ends the session of the cookie (if any) and clears the cookie.
pub(crate) async fn logout(Extension(keys): Extension<Arc<Keys>>, headers: HeaderMap) -> Response {
    if let Some(token) = cookie_token(&headers) {
        keys.sessions.close(token);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("keel_console=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    response
}

/// `GET /console/session` → `{authRequired, signedIn, csrf?}`: whether the page must ask for
/// a key, and the CSRF token of the cookie's session.
pub(crate) async fn session(
    Extension(keys): Extension<Arc<Keys>>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    if keys.is_empty() {
        return Json(json!({"authRequired": false, "signedIn": true}));
    }
    match cookie_token(&headers).and_then(|t| keys.sessions.get(t)) {
        Some((_, csrf)) => Json(json!({"authRequired": true, "signedIn": true, "csrf": csrf})),
        None => Json(json!({"authRequired": true, "signedIn": false})),
    }
}

/// `GET /api/overview` → what the console's first page shows: runs by status, live runs,
/// pending approvals, the error rate of ended runs, the last hour minute by minute
/// (`lastHour`), model and tool latency (since this process started, from the metrics'
/// observer: means and the percentiles of the latest samples), the cluster's replicas and
/// queue depth on a shared store, agents and workflows.
pub(crate) async fn overview(
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let runtime = &state.runtime;
    let counts = runtime
        .runs()
        .counts()
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let by_status: serde_json::Map<String, serde_json::Value> = counts
        .iter()
        .map(|(status, n)| (status.as_str().to_owned(), json!(n)))
        .collect();
    let count = |status: keel::RunStatus| {
        counts
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n)
    };
    let ended = count(keel::RunStatus::Completed) + count(keel::RunStatus::Failed);
    let error_rate = match ended {
        0 => 0.0,
        n => count(keel::RunStatus::Failed) as f64 / n as f64,
    };
    let pending = runtime
        .approvals()
        .list(Some(keel::ApprovalStatus::Pending))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .len();
    let workspace = runtime.workspace();
    let last_hour = last_hour(runtime).await?;
    let cluster = runtime
        .cluster_status()
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map(|c| json!({"replicas": c.replicas, "queueDepth": c.queue_depth, "ownedRuns": c.owned_runs}));
    Ok(Json(json!({
        "runs": by_status,
        "lastHour": last_hour,
        "cluster": cluster,
        "live": runtime.runs().active(),
        "pendingApprovals": pending,
        "errorRate": error_rate,
        "latency": state.telemetry.latencies(),
        "agents": workspace.agents.keys().collect::<Vec<_>>(),
        "workflows": workspace.workflows.keys().collect::<Vec<_>>(),
    })))
}

/// The runs started in the last hour, minute by minute (oldest first, the current minute
/// last): `{minutes: [{minute, started, completed, failed}], started, ended, failed,
/// errorRate}` — `minute` is `YYYY-MM-DDTHH:MM` (UTC); the error rate is failed over ended
/// among them. One grouped query of the store.
async fn last_hour(runtime: &keel::Runtime) -> Result<serde_json::Value, ApiError> {
    let minutes: Vec<String> = (0..60u64)
        .rev()
        .map(|ago| keel_types::rfc3339_ago(ago * 60).chars().take(16).collect())
        .collect();
    let mut counts = vec![[0u64; 3]; minutes.len()];
    let since = minutes
        .first()
        .map(|m| format!("{m}:00.000Z"))
        .unwrap_or_default();
    let rows = runtime
        .runs()
        .started_by_minute(&since)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    for (minute, status, count) in rows {
        let Ok(at) = minutes.binary_search(&minute) else {
            continue;
        };
        if let Some(slot) = counts.get_mut(at) {
            slot[0] += count;
            match status {
                keel::RunStatus::Completed => slot[1] += count,
                keel::RunStatus::Failed => slot[2] += count,
                _ => {}
            }
        }
    }
    let total = |i: usize| counts.iter().map(|c| c[i]).sum::<u64>();
    let (started, completed, failed) = (total(0), total(1), total(2));
    let ended = completed + failed;
    Ok(json!({
        "minutes": minutes.iter().zip(&counts).map(|(minute, c)| json!({
            "minute": minute, "started": c[0], "completed": c[1], "failed": c[2],
        })).collect::<Vec<_>>(),
        "started": started,
        "ended": ended,
        "failed": failed,
        "errorRate": if ended == 0 { 0.0 } else { failed as f64 / ended as f64 },
    }))
}
