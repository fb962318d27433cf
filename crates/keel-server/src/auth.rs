//! API-key authentication: keys come from `runtime.server.apiKeys` (each names an environment
//! variable, a role and optionally a name). When at least one key is configured, every route
//! but `/api/health` needs `Authorization: Bearer <key>` (401 otherwise); `client` keys may
//! use the routes the route table marks [`Access::Client`] — the facade and their own requests
//! — and get 403 elsewhere; `operator` keys may use everything. Keys are compared in constant
//! time and never logged.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::ApiError;
use crate::openapi::Access;
use crate::state::Principal;

#[derive(Default)]
pub(crate) struct Keys {
    keys: Vec<(Vec<u8>, Principal)>,
    /// The web console's signed-in sessions (cookie → principal and CSRF token).
    pub(crate) sessions: crate::console::Sessions,
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
            sessions: crate::console::Sessions::default(),
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
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let principal = match presented {
        Some(presented) => keys
            .principal_of(presented)
            .ok_or(ApiError::Unauthorized)?
            .clone(),
        // The web console's session cookie; a state-changing request must also carry the
        // session's CSRF token.
        None => {
            let token =
                crate::console::cookie_token(request.headers()).ok_or(ApiError::Unauthorized)?;
            let (principal, csrf) = keys.sessions.get(token).ok_or(ApiError::Unauthorized)?;
            let safe = matches!(*request.method(), Method::GET | Method::HEAD);
            let sent = request
                .headers()
                .get(crate::console::CSRF_HEADER)
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
