//! One configured MCP server: its supervisor (connect with a startup timeout, list the tools,
//! publish them, follow `tools/list_changed`, restart with backoff after a crash, stop on
//! shutdown) and its state, which callers read and wait on.

use keel_types::SourceLifecycle;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use keel_tools::gateway::{Catalog, SourceEvent, ToolSource};
use keel_types::{Tool, now_rfc3339};
use keel_workspace::{McpServerSpec, mcp_filter_allows};
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::connect::{self, Session, Signals};
use super::{LifecycleEvent, ServerState, ServerStatus};

mod names;
mod result;
mod tool;

pub use names::ToolRename;

use tool::{McpTool, RemoteTool};

/// First and largest delay between restarts.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How many lifecycle events each server keeps for `keel mcp list` and health.
const HISTORY: usize = 32;

/// The connection callers use while the server is ready.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) signals: Arc<Signals>,
    /// Set when this connection ends (crash or stop).
    pub(crate) closed: CancellationToken,
}

/// The server's state as the supervisor publishes it.
#[derive(Clone)]
pub(crate) enum Phase {
    /// Not started yet (nothing asked for its tools).
    Idle,
    Starting,
    Ready(Live),
    /// The last attempt failed; the supervisor retries after a backoff.
    Down(String),
    Stopped,
    Disabled,
}

pub(crate) struct Server {
    pub(crate) name: String,
    /// `mcp__<prefix>__`.
    pub(crate) tool_prefix: String,
    pub(crate) spec: McpServerSpec,
    root: PathBuf,
    env: BTreeMap<String, String>,
    /// The gateway catalog its tools go to (a workspace reload gives it the new gateway's).
    catalog: Mutex<Catalog>,
    phase: watch::Sender<Phase>,
    /// Whether the first connection attempt has ended (successfully or not).
    settled: watch::Sender<bool>,
    started: OnceLock<()>,
    stop: CancellationToken,
    record: Mutex<Record>,
}

/// What the server keeps about itself for status reports.
#[derive(Default)]
struct Record {
    /// The offered tools with the names models see.
    tools: names::Named,
    restarts: u32,
    last_error: Option<String>,
    history: VecDeque<LifecycleEvent>,
    /// Entries not yet recorded in a run (bounded like `history`).
    unreported: VecDeque<LifecycleEvent>,
}

impl Server {
    pub(crate) fn new(
        name: &str,
        spec: &McpServerSpec,
        root: PathBuf,
        env: BTreeMap<String, String>,
        catalog: Catalog,
    ) -> Arc<Self> {
        let prefix = spec.effective_prefix(name);
        let initial = match spec.enabled {
            true => Phase::Idle,
            false => Phase::Disabled,
        };
        Arc::new(Self {
            name: name.to_owned(),
            tool_prefix: format!("{}{prefix}__", keel_workspace::MCP_TOOL_PREFIX),
            spec: spec.clone(),
            root,
            env,
            catalog: Mutex::new(catalog),
            phase: watch::channel(initial).0,
            settled: watch::channel(!spec.enabled).0,
            started: OnceLock::new(),
            stop: CancellationToken::new(),
            record: Mutex::default(),
        })
    }

    pub(crate) fn startup_timeout(&self) -> Duration {
        self.spec
            .startup_timeout
            .map_or(McpServerSpec::DEFAULT_STARTUP_TIMEOUT, |d| d.0)
    }

    pub(crate) fn call_timeout(&self) -> Duration {
        self.spec
            .call_timeout
            .map_or(McpServerSpec::DEFAULT_CALL_TIMEOUT, |d| d.0)
    }

    /// Starts the supervisor once (needs a Tokio runtime). A disabled server never starts.
    pub(crate) fn start(self: &Arc<Self>) {
        if !self.spec.enabled || self.stop.is_cancelled() {
            return;
        }
        if self.started.set(()).is_ok() {
            let server = self.clone();
            tokio::spawn(async move { server.supervise().await });
        }
    }

    /// Waits until the first connection attempt has ended (bounded by the startup timeout).
    pub(crate) async fn settled(self: &Arc<Self>) {
        self.start();
        let mut settled = self.settled.subscribe();
        let limit = self.startup_timeout() + Duration::from_secs(5);
        let _ = tokio::time::timeout(limit, settled.wait_for(|done| *done)).await;
    }

    /// The live connection, waiting up to `limit` for one while the server (re)starts.
    pub(crate) async fn live(self: &Arc<Self>, limit: Duration) -> Result<Live, String> {
        self.start();
        let mut phase = self.phase.subscribe();
        let wait =
            phase.wait_for(|p| matches!(p, Phase::Ready(_) | Phase::Stopped | Phase::Disabled));
        match tokio::time::timeout(limit, wait).await {
            Ok(Ok(phase)) => match &*phase {
                Phase::Ready(live) => Ok(live.clone()),
                Phase::Disabled => Err(format!("MCP server `{}` is disabled", self.name)),
                _ => Err(format!("MCP server `{}` has stopped", self.name)),
            },
            Ok(Err(_)) => Err(format!("MCP server `{}` has stopped", self.name)),
            Err(_) => Err(match self.last_error() {
                Some(error) => format!("MCP server `{}` is unavailable: {error}", self.name),
                None => format!(
                    "MCP server `{}` did not become ready within {limit:?}",
                    self.name
                ),
            }),
        }
    }

    fn last_error(&self) -> Option<String> {
        self.lock_record().last_error.clone()
    }

    fn lock_record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Tells the supervisor to stop without waiting for it.
    /// Whether this server runs as `spec` and `env` say (a reload keeps it then).
    pub(crate) fn same_as(&self, spec: &McpServerSpec, env: &BTreeMap<String, String>) -> bool {
        self.spec == *spec && self.env == *env
    }

    /// Publishes its tools into `catalog` (a reloaded workspace's gateway) from now on, and
    /// the tools it offers now at once.
    pub(crate) fn retarget(self: &Arc<Self>, catalog: &Catalog) {
        *self
            .catalog
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = catalog.clone();
        let tools: Vec<RemoteTool> = {
            let record = self.lock_record();
            let named = record.tools.tools.iter().map(|(_, remote)| remote.clone());
            // A tool left out for its empty name stays reported as left out.
            let left_out = record.tools.left_out.iter().map(|_| RemoteTool::unnamed());
            named.chain(left_out).collect()
        };
        if !tools.is_empty() {
            self.publish(tools);
        }
    }

    pub(crate) fn stop_soon(&self) {
        self.stop.cancel();
    }

    /// Stops the supervisor and the session (the stdio server's whole process group).
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        let mut phase = self.phase.subscribe();
        if self.started.get().is_some() {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                phase.wait_for(|p| matches!(p, Phase::Stopped)),
            )
            .await;
        }
    }

    pub(crate) fn status(&self) -> ServerStatus {
        let record = self.lock_record();
        let state = match &*self.phase.borrow() {
            Phase::Idle => ServerState::NotStarted,
            Phase::Starting => ServerState::Starting,
            Phase::Ready(_) => ServerState::Ready,
            Phase::Down(_) => ServerState::Unavailable,
            Phase::Stopped => ServerState::Stopped,
            Phase::Disabled => ServerState::Disabled,
        };
        ServerStatus {
            name: self.name.clone(),
            transport: self.spec.transport,
            tool_prefix: self.tool_prefix.clone(),
            state,
            tools: record
                .tools
                .tools
                .iter()
                .map(|(name, _)| name.clone())
                .collect(),
            renamed: record.tools.renamed.clone(),
            left_out: record.tools.left_out.clone(),
            restarts: record.restarts,
            last_error: record.last_error.clone(),
            history: record.history.iter().cloned().collect(),
        }
    }

    fn note(&self, kind: SourceLifecycle, detail: Option<String>) {
        match &detail {
            Some(detail) => {
                info!(server = %self.name, event = kind.as_str(), %detail, "MCP server lifecycle.")
            }
            None => info!(server = %self.name, event = kind.as_str(), "MCP server lifecycle."),
        }
        let mut record = self.lock_record();
        if record.history.len() == HISTORY {
            record.history.pop_front();
        }
        let event = LifecycleEvent {
            at: now_rfc3339(),
            kind,
            detail,
        };
        if record.unreported.len() == HISTORY {
            record.unreported.pop_front();
        }
        record.unreported.push_back(event.clone());
        record.history.push_back(event);
    }

    async fn supervise(self: Arc<Self>) {
        let mut backoff = BACKOFF_START;
        let mut attempt = 0u32;
        // The last failure noted: a server that keeps failing the same way is noted once,
        // not at every retry (its history and the runs that use it stay readable).
        let mut noted_failure: Option<String> = None;
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            // A retry leaves the server `Down` with why until it is ready again, so status and
            // a blocked call keep saying what failed rather than "starting".
            if attempt == 0 {
                let _ = self.phase.send_replace(Phase::Starting);
                self.note(SourceLifecycle::Starting, None);
            } else {
                self.lock_record().restarts += 1;
            }
            let restarting = attempt > 0;
            attempt += 1;
            let signals = Arc::new(Signals::default());
            let opened = tokio::select! {
                opened = tokio::time::timeout(self.startup_timeout(), self.connect(signals.clone())) => opened,
                () = self.stop.cancelled() => break,
            };
            let failure = match opened {
                Ok(Ok((session, tools))) => {
                    if restarting {
                        self.note(SourceLifecycle::Restarting, None);
                    }
                    backoff = BACKOFF_START;
                    attempt = 1;
                    noted_failure = None;
                    self.serve(session, signals, tools).await
                }
                Ok(Err(error)) => error,
                Err(_) => format!(
                    "no answer to initialize within {:?} (startupTimeout)",
                    self.startup_timeout()
                ),
            };
            if self.stop.is_cancelled() {
                break;
            }
            self.lock_record().last_error = Some(failure.clone());
            if noted_failure.as_deref() != Some(failure.as_str()) {
                warn!(server = %self.name, error = %failure, "MCP server is down; retrying with backoff.");
                if restarting {
                    self.note(SourceLifecycle::Restarting, None);
                }
                self.note(SourceLifecycle::Down, Some(failure.clone()));
                noted_failure = Some(failure.clone());
            } else {
                debug!(server = %self.name, error = %failure, attempt, "MCP server is still down.");
            }
            let _ = self.phase.send_replace(Phase::Down(failure));
            let _ = self.settled.send_replace(true);
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        let _ = self.phase.send_replace(Phase::Stopped);
        let _ = self.settled.send_replace(true);
        self.note(SourceLifecycle::Stopped, None);
    }

    /// Opens a session and lists its tools.
    async fn connect(&self, signals: Arc<Signals>) -> Result<(Session, Vec<RemoteTool>), String> {
        let session = connect::open(&self.spec, &self.root, &self.env, signals)
            .await
            .map_err(|e| e.to_string())?;
        let Some(service) = session.service.as_ref() else {
            return Err("the session ended before it started".into());
        };
        let tools = list_tools(service.peer()).await?;
        Ok((session, tools))
    }

    /// Runs a ready session until it ends; returns why it ended.
    async fn serve(
        self: &Arc<Self>,
        mut session: Session,
        signals: Arc<Signals>,
        tools: Vec<RemoteTool>,
    ) -> String {
        let Some(peer) = session.service.as_ref().map(|s| s.peer().clone()) else {
            return "the session ended before it started".to_owned();
        };
        self.publish(tools);
        let closed = CancellationToken::new();
        let _ = self.phase.send_replace(Phase::Ready(Live {
            peer: peer.clone(),
            signals: signals.clone(),
            closed: closed.clone(),
        }));
        let _ = self.settled.send_replace(true);
        self.note(SourceLifecycle::Ready, session.sandboxed.clone());
        let Some(service) = session.service.take() else {
            return "the session ended before it started".to_owned();
        };
        let cancel = service.cancellation_token();
        let mut ended = tokio::spawn(service.waiting());
        let reason = loop {
            tokio::select! {
                () = signals.tools_changed.notified() => match list_tools(&peer).await {
                    Ok(tools) => {
                        self.publish(tools);
                        self.note(SourceLifecycle::ToolsChanged, None);
                    }
                    Err(error) => warn!(server = %self.name, %error, "Listing the changed tools failed."),
                },
                _ = &mut ended => break session.end_reason().await,
                () = self.stop.cancelled() => {
                    cancel.cancel();
                    let _ = tokio::time::timeout(Duration::from_secs(5), &mut ended).await;
                    break "stopped".to_owned();
                }
            }
        };
        closed.cancel();
        drop(session);
        reason
    }

    /// Publishes the tools the filter lets through into the gateway.
    fn publish(self: &Arc<Self>, tools: Vec<RemoteTool>) {
        let offered: Vec<RemoteTool> = tools
            .into_iter()
            .filter(|t| mcp_filter_allows(&self.spec.tools, &t.name))
            .collect();
        let offered = names::name_tools(&self.tool_prefix, offered);
        for why in &offered.left_out {
            warn!(server = %self.name, "MCP tool left out: {why}.");
        }
        for rename in &offered.renamed {
            debug!(server = %self.name, original = %rename.original, name = %rename.name, "MCP tool offered under a valid model tool name.");
        }
        let published: Vec<Arc<dyn Tool>> = offered
            .tools
            .iter()
            .map(|(name, remote)| {
                Arc::new(McpTool::new(self.clone(), remote.clone(), name.clone())) as Arc<dyn Tool>
            })
            .collect();
        let catalog = self
            .catalog
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        for error in catalog.publish(&self.tool_prefix, published) {
            warn!(server = %self.name, %error, "MCP tool left out.");
        }
        self.lock_record().tools = offered;
    }
}

/// Every page of `tools/list`.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<RemoteTool>, String> {
    connect::list_pages("tools", |params| {
        let peer = peer.clone();
        async move {
            let page = peer
                .list_tools(Some(params))
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            connect::json_of(&page)
        }
    })
    .await
}

#[async_trait]
impl ToolSource for ServerSource {
    fn prefix(&self) -> &str {
        &self.0.tool_prefix
    }

    async fn settle(&self) {
        self.0.settled().await;
    }

    fn take_lifecycle(&self) -> Vec<SourceEvent> {
        let mut record = self.0.lock_record();
        record
            .unreported
            .drain(..)
            .map(|event| SourceEvent {
                source: self.0.name.clone(),
                kind: event.kind,
                at: event.at,
                detail: event.detail,
            })
            .collect()
    }

    fn unavailable(&self) -> Option<String> {
        match &*self.0.phase.borrow() {
            Phase::Ready(_) | Phase::Idle | Phase::Starting => None,
            Phase::Down(error) => Some(format!("MCP server `{}` is down: {error}", self.0.name)),
            Phase::Stopped => Some(format!("MCP server `{}` has stopped", self.0.name)),
            Phase::Disabled => Some(format!(
                "MCP server `{}` is disabled (`enabled: false`)",
                self.0.name
            )),
        }
    }
}

/// A server as the gateway sees it.
pub(crate) struct ServerSource(pub(crate) Arc<Server>);
