//! What every handler shares: the runtime, admission control, telemetry, the MCP service and
//! who is calling.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel::{RunRecord, Runtime};
use keel_mcp::server::HttpService;
use keel_workspace::spec::ApiKeyRole;

use crate::ApiError;
use crate::telemetry::Telemetry;

/// The state behind every route.
#[derive(Clone)]
pub(crate) struct AppState {
    pub runtime: Runtime,
    pub admission: Arc<Admission>,
    pub telemetry: Telemetry,
    /// The longest a run started over HTTP may take.
    pub request_timeout: Duration,
    /// The OpenAPI document, built once for this server's configuration.
    pub openapi: Arc<serde_json::Value>,
    /// MCP's streamable HTTP, mounted at `/mcp`.
    pub mcp: HttpService,
}

/// What a server's state is built from besides its runtime.
pub(crate) struct StateParts {
    pub telemetry: Telemetry,
    /// The document `GET /api/openapi.json` answers.
    pub openapi: serde_json::Value,
    /// The admission queue of [`Admission::for_runtime`].
    pub admission: Arc<Admission>,
    pub mcp: HttpService,
}

impl AppState {
    pub(crate) fn new(runtime: Runtime, parts: StateParts) -> Self {
        Self {
            request_timeout: request_timeout(&runtime),
            runtime,
            admission: parts.admission,
            telemetry: parts.telemetry,
            openapi: Arc::new(parts.openapi),
            mcp: parts.mcp,
        }
    }
}

/// The longest a run started over HTTP may take (`server.requestTimeout`).
pub(crate) fn request_timeout(runtime: &Runtime) -> Duration {
    runtime.workspace().runtime.server.request_timeout.0
}

/// Bounds the runs started over HTTP: those running plus those waiting for a run slot. When
/// every place is taken a new request is refused (429 with `Retry-After`) instead of queueing
/// without bound.
pub(crate) struct Admission {
    in_flight: AtomicUsize,
    capacity: usize,
}

/// A place held by one run; it is given back when dropped (when the run has ended).
pub(crate) struct Ticket(Arc<Admission>);

/// How long a refused client is asked to wait.
const RETRY_AFTER_SECS: u64 = 1;

impl Admission {
    /// Room for as many runs in flight as the runtime's slots hold (`limits.maxConcurrentRuns`,
    /// `Runs::capacity`) and `server.maxQueuedRequests` waiting for a slot.
    pub(crate) fn for_runtime(runtime: &keel::Runtime) -> Self {
        Self::new(
            runtime.runs().capacity()
                + runtime.workspace().runtime.server.max_queued_requests as usize,
        )
    }

    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            capacity,
        }
    }

    /// A place for one more run, or 429.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Ticket, ApiError> {
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Ticket(self.clone())),
            Err(_) => Err(ApiError::TooManyRequests {
                retry_after: RETRY_AFTER_SECS,
            }),
        }
    }

    /// Runs started over HTTP that have not ended.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Who is calling: set by the auth middleware on every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    /// No keys are configured (loopback only): the caller may do everything.
    Open,
    /// A key with a role and a name (recorded as the owner of the runs it starts).
    Key {
        role: ApiKeyRole,
        name: Arc<str>,
        /// `server.apiKeys[].metadata`: fixed for every request made with the key.
        metadata: Arc<std::collections::BTreeMap<String, String>>,
    },
}

impl Principal {
    /// The owner recorded on runs this caller starts.
    pub(crate) fn owner(&self) -> Option<String> {
        match self {
            Self::Open => None,
            Self::Key { name, .. } => Some(name.to_string()),
        }
    }

    /// Puts the key's fixed metadata (`server.apiKeys[].metadata`) into a request's: a
    /// request value that differs from the key's is refused (400 naming the field), never
    /// taken over the key's.
    pub(crate) fn bind_metadata(
        &self,
        metadata: &mut std::collections::BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let Self::Key {
            metadata: fixed, ..
        } = self
        else {
            return Ok(());
        };
        for (key, value) in fixed.iter() {
            match metadata.get(key) {
                Some(sent) if sent != value => {
                    return Err(ApiError::BadRequest {
                        message: format!(
                            "`metadata.{key}` is fixed for this API key (server.apiKeys[].metadata); \
                             send the key's value or none"
                        ),
                        param: Some("metadata"),
                    });
                }
                _ => {
                    metadata.insert(key.clone(), value.clone());
                }
            }
        }
        Ok(())
    }

    /// Whether this caller may only see its own requests.
    pub(crate) fn is_client(&self) -> bool {
        matches!(
            self,
            Self::Key {
                role: ApiKeyRole::Client,
                ..
            }
        )
    }

    /// 404 unless this caller may see `run`: operators see every run, client keys their own.
    /// (Another owner's run answers 404, not 403, so ids of others' runs are not confirmed.)
    pub(crate) fn may_see(&self, run: &RunRecord) -> Result<(), ApiError> {
        let own = match self {
            Self::Key {
                role: ApiKeyRole::Client,
                name,
                ..
            } => run.owner.as_deref() == Some(&**name),
            _ => true,
        };
        if own {
            Ok(())
        } else {
            Err(ApiError::ResourceNotFound(format!(
                "no request `{}`",
                run.request_id
            )))
        }
    }
}
