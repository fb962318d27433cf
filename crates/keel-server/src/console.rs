//! The web console (`/console`): a page, a script and a style sheet embedded in the binary
//! (no Node.js, CDN or network at run time), which read and act through the `/api` routes.
//!
//! Sign-in: with API keys configured, the console asks for an operator key once
//! (`POST /console/login {key}`) and keeps a session in an HttpOnly, `SameSite=Strict` cookie;
//! a client key is refused. A session also has a CSRF token (`GET /console/session` gives it
//! to the page), which every state-changing `/api` request made with the cookie must carry in
//! `X-Keel-CSRF`. Sessions live in this process's memory for 12 hours (a restart signs
//! everyone out). Without keys (loopback only) the console needs no sign-in.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::ApiError;
use crate::body::parse_body;
use crate::state::{AppState, Principal};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "keel_console";
/// The header a state-changing request made with the cookie carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-keel-csrf";
/// How long a console session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

const INDEX: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/app.js");
const STYLE: &str = include_str!("../console/app.css");

/// Console sessions: token → who signed in, its CSRF token, when it ends.
#[derive(Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

#[derive(Clone)]
struct Session {
    principal: Principal,
    csrf: String,
    until: Instant,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        match self.open.lock() {
            Ok(open) => open,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// A new session for `principal`: its token and CSRF token.
    fn open(&self, principal: Principal) -> Result<(String, String), ApiError> {
        let (token, csrf) = (random_token()?, random_token()?);
        let mut open = self.lock();
        let now = Instant::now();
        open.retain(|_, s| s.until > now);
        open.insert(
            token.clone(),
            Session {
                principal,
                csrf: csrf.clone(),
                until: now + SESSION_TTL,
            },
        );
        Ok((token, csrf))
    }

    /// The live session of `token`: its principal and CSRF token.
    pub(crate) fn get(&self, token: &str) -> Option<(Principal, String)> {
        let open = self.lock();
        let session = open.get(token).filter(|s| s.until > Instant::now())?;
        Some((session.principal.clone(), session.csrf.clone()))
    }

    fn close(&self, token: &str) {
        self.lock().remove(token);
    }
}

/// 32 random bytes from the operating system, as hex.
fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ApiError::Internal(format!("cannot read randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The session token in a request's `Cookie` header.
pub(crate) fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
}

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

/// `GET /console/app.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /console/app.css`.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
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
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let login: Login = parse_body(body, false)?;
    let keys = &state.keys;
    if keys.is_empty() {
        return Ok(Json(json!({"authRequired": false})).into_response());
    }
    let principal = keys
        .principal_for(login.key.as_bytes())
        .ok_or(ApiError::Unauthorized)?;
    if principal.is_client() {
        return Err(ApiError::Forbidden);
    }
    let (token, csrf) = state.keys.sessions.open(principal)?;
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
pub(crate) async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(token) = cookie_token(&headers) {
        state.keys.sessions.close(token);
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
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    if state.keys.is_empty() {
        return Json(json!({"authRequired": false, "signedIn": true}));
    }
    match cookie_token(&headers).and_then(|t| state.keys.sessions.get(t)) {
        Some((_, csrf)) => Json(json!({"authRequired": true, "signedIn": true, "csrf": csrf})),
        None => Json(json!({"authRequired": true, "signedIn": false})),
    }
}

/// `GET /api/overview` → what the console's first page shows: runs by status, live runs,
/// pending approvals, the error rate of ended runs, model and tool latency (means since this
/// process started, from the metrics' observer), agents and workflows.
pub(crate) async fn overview(
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let runtime = &state.runtime;
    let counts = runtime
        .run_counts()
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
        .list_approvals(Some(keel::ApprovalStatus::Pending))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .len();
    let workspace = runtime.workspace();
    Ok(Json(json!({
        "runs": by_status,
        "live": runtime.active_runs(),
        "pendingApprovals": pending,
        "errorRate": error_rate,
        "latency": state.telemetry.latencies(),
        "agents": workspace.agents.keys().collect::<Vec<_>>(),
        "workflows": workspace.workflows.keys().collect::<Vec<_>>(),
    })))
}
