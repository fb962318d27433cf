//! MCP servers as tool sources (`kind: McpServer`, `docs/workspace.md#mcpserver`).
//!
//! An [`McpHub`] holds one supervised connection per configured server. Nothing starts when
//! the hub is built: a server starts when a run first needs its tools (the gateway's
//! `settle`), or when [`McpHub::start`] is called (`keel serve` does at boot). Each server's
//! tools are published into the gateway's catalog as `mcp__<prefix>__<tool>`, so every call
//! takes the same path as a built-in tool's: gateway (the server's `inputSchema`), policy,
//! hooks, approval, audit. A server that is down does not stop the runtime: its tools are
//! unavailable, and a call says why.

mod connect;
mod resource;
mod server;

use std::sync::Arc;

use keel_tools::gateway::{Catalog, ToolSource};
use keel_types::Tool;
use keel_workspace::{McpTransport, Workspace};
use serde::Serialize;

use resource::ReadResource;
pub use resource::{PromptArgument, PromptInfo, ResourceInfo};
pub use server::ToolRename;
use server::{Server, ServerSource};

/// Why a request to a server could not be answered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// No server of that name is configured.
    #[error("no MCP server `{name}` (configured: {known})")]
    UnknownServer { name: String, known: String },
    /// The server is down, disabled or failed the request.
    #[error("{0}")]
    Unavailable(String),
}

/// The MCP servers of a workspace. Clones share them; when the last clone is dropped the
/// servers stop (a program that drops its runtime leaves no server process behind).
#[derive(Clone, Default)]
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    _stop: Arc<StopOnDrop>,
}

/// Stops the servers when the last [`McpHub`] clone goes (but not those a reloaded hub took
/// over).
#[derive(Default)]
struct StopOnDrop(std::sync::Mutex<Vec<Arc<Server>>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let servers = self.0.get_mut().map_or_else(
            |poisoned| std::mem::take(poisoned.into_inner()),
            std::mem::take,
        );
        for server in servers {
            server.stop_soon();
        }
    }
}

/// What a hub's reload did, by server name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HubReload {
    /// Servers whose document and environment did not change: kept running.
    pub kept: Vec<String>,
    /// Servers new or changed: started afresh (a changed one's old process stops once the
    /// runs that use it have ended).
    pub restarted: Vec<String>,
    /// Servers no longer in the workspace: stopped once the runs that use them have ended.
    pub removed: Vec<String>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.servers.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("McpHub").field("servers", &names).finish()
    }
}

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Nothing has needed it yet.
    NotStarted,
    Starting,
    Ready,
    /// The last attempt failed or the server crashed; it is retried with backoff.
    Unavailable,
    Stopped,
    /// `enabled: false`.
    Disabled,
}

impl ServerState {
    /// The state's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not_started",
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Unavailable => "unavailable",
            Self::Stopped => "stopped",
            Self::Disabled => "disabled",
        }
    }
}

/// One entry of a server's lifecycle history (`starting`, `ready`, `down`, `restarting`,
/// `tools_changed`, `stopped`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LifecycleEvent {
    pub at: String,
    pub kind: keel_types::SourceLifecycle,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A server's state for `keel mcp list`, `/api/inventory` and health.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    #[serde(serialize_with = "transport_name")]
    pub transport: McpTransport,
    /// The start of its tools' names, `mcp__<prefix>__`.
    pub tool_prefix: String,
    pub state: ServerState,
    /// The inventory names of its offered tools (after the include/exclude filter).
    pub tools: Vec<String>,
    /// The tools offered under another name than the server's, because theirs is not a valid
    /// model tool name (`docs/mcp.md#tool-names`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub renamed: Vec<ToolRename>,
    /// Why a tool of the server is not offered at all (an empty name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    pub restarts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub history: Vec<LifecycleEvent>,
}

fn transport_name<S: serde::Serializer>(t: &McpTransport, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match t {
        McpTransport::Stdio => "stdio",
        McpTransport::Http => "http",
    })
}

/// A server's document with its `sandbox:` over the Runtime's (a stdio server's process
/// starts in it).
fn with_sandbox(
    spec: &keel_workspace::McpServerSpec,
    workspace: &Workspace,
) -> keel_workspace::McpServerSpec {
    let own = spec.sandbox.clone().unwrap_or_default();
    keel_workspace::McpServerSpec {
        sandbox: Some(own.over(&workspace.runtime.sandbox)),
        ..spec.clone()
    }
}

impl McpHub {
    /// The workspace's servers, publishing into `catalog` (the gateway's) once started.
    pub fn new(workspace: &Workspace, catalog: &Catalog) -> Self {
        let servers: Vec<Arc<Server>> = workspace
            .mcp_servers
            .iter()
            .map(|(name, spec)| {
                Server::new(
                    name,
                    &with_sandbox(spec, workspace),
                    workspace.root.clone(),
                    workspace.env.clone(),
                    catalog.clone(),
                )
            })
            .collect();
        Self {
            _stop: Arc::new(StopOnDrop(std::sync::Mutex::new(servers.clone()))),
            servers,
        }
    }

    /// The servers of a reloaded `workspace`, publishing into `catalog` (the new gateway's):
    /// a server whose document and environment did not change is kept — running, its tools
    /// published into `catalog` at once — and no longer stopped with this hub; the others
    /// are new. This hub's remaining servers stop when its last clone goes (hold it while
    /// runs that use them live).
    pub fn reload(&self, workspace: &Workspace, catalog: &Catalog) -> (Self, HubReload) {
        let mut report = HubReload::default();
        let mut servers = Vec::new();
        for (name, spec) in &workspace.mcp_servers {
            let spec = &with_sandbox(spec, workspace);
            let old = self
                .servers
                .iter()
                .find(|s| s.name == *name && s.same_as(spec, &workspace.env));
            match old {
                Some(old) => {
                    old.retarget(catalog);
                    report.kept.push(name.clone());
                    servers.push(old.clone());
                }
                None => {
                    report.restarted.push(name.clone());
                    servers.push(Server::new(
                        name,
                        spec,
                        workspace.root.clone(),
                        workspace.env.clone(),
                        catalog.clone(),
                    ));
                }
            }
        }
        report.removed = self
            .servers
            .iter()
            .filter(|s| !workspace.mcp_servers.contains_key(&s.name))
            .map(|s| s.name.clone())
            .collect();
        if let Ok(mut stop) = self._stop.0.lock() {
            stop.retain(|s| !servers.iter().any(|kept| Arc::ptr_eq(kept, s)));
        }
        let hub = Self {
            _stop: Arc::new(StopOnDrop(std::sync::Mutex::new(servers.clone()))),
            servers,
        };
        (hub, report)
    }

    /// Whether the workspace declares no server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers as the gateway's tool sources.
    pub fn sources(&self) -> Vec<Arc<dyn ToolSource>> {
        self.servers
            .iter()
            .map(|s| Arc::new(ServerSource(s.clone())) as Arc<dyn ToolSource>)
            .collect()
    }

    /// Starts every enabled server (needs a Tokio runtime); returns at once.
    pub fn start(&self) {
        for server in &self.servers {
            server.start();
        }
    }

    /// Starts every enabled server and waits until each has answered or failed.
    pub async fn settle(&self) {
        self.start();
        futures_util::future::join_all(self.servers.iter().map(|s| s.settled())).await;
    }

    /// Every server's state, by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// The `read_mcp_resource` tool over these servers (none without servers).
    pub fn resource_tool(&self) -> Option<Arc<dyn Tool>> {
        (!self.servers.is_empty())
            .then(|| Arc::new(ReadResource::new(self.servers.clone())) as Arc<dyn Tool>)
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| McpError::UnknownServer {
                name: name.to_owned(),
                known: self
                    .servers
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The prompts server `name` offers (starting it if needed).
    pub async fn prompts(&self, name: &str) -> Result<Vec<PromptInfo>, McpError> {
        self.server(name)?
            .prompts()
            .await
            .map_err(McpError::Unavailable)
    }

    /// The resources server `name` lists (starting it if needed).
    pub async fn resources(&self, name: &str) -> Result<Vec<ResourceInfo>, McpError> {
        self.server(name)?
            .resources()
            .await
            .map_err(McpError::Unavailable)
    }

    /// Stops every server: the session ends and a stdio server's whole process group is
    /// killed.
    pub async fn shutdown(&self) {
        futures_util::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}
