//! API-key authentication: keys come from `runtime.server.apiKeys` (each names an environment
//! variable, a role and optionally a name). When at least one key is configured, every route
//! but `/api/health` needs `Authorization: Bearer <key>` (or `x-api-key: <key>`, as
//! Anthropic's SDKs send it; 401 otherwise); `client` keys may
//! use the routes the route table marks [`Access::Client`] — the facade and their own requests
//! — and get 403 elsewhere; `operator` keys may use everything. Keys are compared in constant
//! time and never logged. The web console's sessions live here too: a cookie the console's
//! sign-in set stands for the operator key it was opened with, and a state-changing request
//! made with it must carry the session's CSRF token.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::ApiError;
use crate::state::Principal;

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

#[derive(Default)]
pub(crate) struct Keys {
    keys: Vec<(Vec<u8>, Principal)>,
    /// The web console's signed-in sessions (cookie → principal and CSRF token).
    pub(crate) sessions: Sessions,
}

impl Keys {
    /// The keys of `runtime`'s workspace; a key whose variable is unset (or empty) is absent.
    pub(crate) fn from_runtime(runtime: &keel::Runtime) -> Self {
        let workspace = runtime.workspace();
        let mut keys = Vec::new();
        for spec in &workspace.runtime.server.api_keys {
            match workspace.env.get(&spec.env) {
                Some(value) if !value.is_empty() => {
                    let principal = Principal::Key {
                        role: spec.role,
                        name: Arc::from(spec.principal()),
                        metadata: Arc::new(spec.metadata.clone()),
                    };
                    keys.push((value.as_bytes().to_vec(), principal));
                }
                _ => tracing::warn!(
                    env = %spec.env,
                    "API key variable is not set; that key is not configured"
                ),
            }
        }
        Self {
            keys,
            sessions: Sessions::default(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whose key `presented` is (the console's sign-in).
    pub(crate) fn principal_for(&self, presented: &[u8]) -> Option<Principal> {
        self.principal_of(presented).cloned()
    }

    /// Whose key `presented` is, comparing against every key in constant time.
    fn principal_of(&self, presented: &[u8]) -> Option<&Principal> {
        let mut found = None;
        for (key, principal) in &self.keys {
            if constant_time_eq(key, presented) && found.is_none() {
                found = Some(principal);
            }
        }
        found
    }
}

/// Whether `runtime`'s workspace configures at least one usable API key (the CLI allows a
/// non-loopback bind only then).
pub fn auth_configured(runtime: &keel::Runtime) -> bool {
    !Keys::from_runtime(runtime).is_empty()
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    let len = a.len().max(b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// The middleware of one route: enforces keys and the route's [`Access`], and leaves the
/// caller's [`Principal`] in the request's extensions.
pub(crate) async fn require_key(
    State((keys, access)): State<(Arc<Keys>, Access)>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if keys.is_empty() || access == Access::Public {
        request.extensions_mut().insert(Principal::Open);
        return Ok(next.run(request).await);
    }
    // Anthropic's SDKs send the key as `x-api-key`.
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .or_else(|| request.headers().get("x-api-key").map(|v| v.as_bytes()));
    let principal = match presented {
        Some(presented) => keys
            .principal_of(presented)
            .ok_or(ApiError::Unauthorized)?
            .clone(),
        // The web console's session cookie; a state-changing request must also carry the
        // session's CSRF token.
        None => {
            let token = cookie_token(request.headers()).ok_or(ApiError::Unauthorized)?;
            let (principal, csrf) = keys.sessions.get(token).ok_or(ApiError::Unauthorized)?;
            let safe = matches!(*request.method(), Method::GET | Method::HEAD);
            let sent = request
                .headers()
                .get(crate::error::CSRF_HEADER)
                .map(|v| v.as_bytes());
            if !safe && !sent.is_some_and(|sent| constant_time_eq(sent, csrf.as_bytes())) {
                return Err(ApiError::Csrf);
            }
            principal
        }
    };
    if access == Access::Operator && principal.is_client() {
        return Err(ApiError::Forbidden);
    }
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

// ---- the web console's sessions -------------------------------------------------------

/// The session cookie's name.
pub(crate) const COOKIE: &str = "keel_console";
/// How long a console session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

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
    pub(crate) fn open(&self, principal: Principal) -> Result<(String, String), ApiError> {
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

    pub(crate) fn close(&self, token: &str) {
        self.lock().remove(token);
    }
}

/// 32 random bytes from the operating system, as hex.
fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ApiError::Internal(format!("cannot read randomness: {e}")))?;
    Ok(keel_types::to_hex(&bytes))
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

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
