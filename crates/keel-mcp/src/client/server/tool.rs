//! An MCP server's tool in Keel's inventory, `mcp__<prefix>__<tool>`: its spec is the
//! server's `inputSchema` (so the gateway validates and repairs calls before the server sees
//! them), its annotations decide whether it only reads, and a call's result is mapped to what
//! the model reads (text; images, audio and blobs as attachments the runtime stores as
//! artifacts; embedded text resources; `structuredContent`; `isError` as a tool error).

use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{Tool, ToolContext, ToolError, ToolOutput, ToolProgress, ToolSpec};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Phase, Server};
use crate::client::connect::{Signals, token_key};

/// A tool as `tools/list` describes it (the fields Keel reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RemoteTool {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) title: Option<String>,
    #[serde(default)]
    pub(crate) description: Option<String>,
    pub(crate) input_schema: Value,
    #[serde(default)]
    pub(crate) annotations: Option<Annotations>,
}

/// The hints Keel uses. Hints come from the server: they make a tool read-only for policy's
/// defaults, never more trusted than a policy rule says.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Annotations {
    #[serde(default)]
    pub(crate) read_only_hint: Option<bool>,
    #[serde(default)]
    pub(crate) destructive_hint: Option<bool>,
    #[serde(default)]
    pub(crate) idempotent_hint: Option<bool>,
}

impl RemoteTool {
    /// A tool with an empty name (such a tool is left out, but stays reported).
    pub(crate) fn unnamed() -> Self {
        Self {
            name: String::new(),
            title: None,
            description: None,
            input_schema: Value::Null,
            annotations: None,
        }
    }

    pub(crate) fn read_only(&self) -> bool {
        self.annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true) && a.destructive_hint != Some(true))
    }
}

pub(crate) struct McpTool {
    server: Arc<Server>,
    remote: RemoteTool,
    spec: ToolSpec,
}

impl McpTool {
    /// `remote` offered as `name` (`mcp__<prefix>__…`, see `names.rs`); the server is
    /// called with `remote.name`.
    pub(crate) fn new(server: Arc<Server>, remote: RemoteTool, name: String) -> Self {
        let description = remote
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .or_else(|| remote.title.clone())
            .unwrap_or_else(|| format!("Tool `{}` of MCP server `{}`.", remote.name, server.name));
        let mut parameters = remote.input_schema.clone();
        if !parameters.is_object() {
            parameters = serde_json::json!({ "type": "object" });
        }
        let spec = ToolSpec {
            name,
            description,
            parameters,
        };
        Self {
            server,
            remote,
            spec,
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        self.remote.read_only()
    }

    fn destructive(&self) -> Option<bool> {
        self.remote
            .annotations
            .as_ref()
            .and_then(|a| a.destructive_hint)
    }

    fn reports_progress(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        self.read_only()
            || self
                .remote
                .annotations
                .as_ref()
                .is_some_and(|a| a.idempotent_hint == Some(true))
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let server = &self.server;
        let live = server
            .live(server.startup_timeout())
            .await
            .map_err(ToolError::Failed)?;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "MCP tool arguments must be an object, not {other}"
                )));
            }
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(self.remote.name.clone()).with_arguments(arguments),
        ));
        // The call's span travels in `_meta` (W3C trace context in MCP, SEP-414).
        let mut options = PeerRequestOptions::no_options();
        if let Some(parent) = &ctx.traceparent {
            let mut meta = rmcp::model::MetaObject::new();
            meta.set_traceparent(parent.clone());
            options.meta = Some(rmcp::model::RequestMetaObject(meta));
        }
        let handle = live
            .peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| self.failure(&e))?;
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<ToolProgress>();
        let token = token_key(&handle.progress_token.0);
        live.signals
            .progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .register(token.clone(), progress_tx);
        let mut pending = Pending {
            peer: live.peer.clone(),
            id: Some(handle.id.clone()),
            token,
            signals: live.signals.clone(),
        };
        let response = handle.await_response();
        tokio::pin!(response);
        let timeout = tokio::time::sleep(server.call_timeout());
        tokio::pin!(timeout);
        let outcome = loop {
            tokio::select! {
                response = &mut response => break response,
                () = &mut timeout => {
                    return Err(ToolError::Timeout(server.call_timeout()));
                }
                () = live.closed.cancelled() => {
                    pending.id = None;
                    self.noted_down(&live).await;
                    return Err(ToolError::Failed(format!(
                        "MCP server `{}` stopped during the call (it is being restarted); the call may or may not have taken effect",
                        server.name
                    )));
                }
                Some(progress) = progress_rx.recv() => {
                    if let Some(sink) = &ctx.progress {
                        sink.report(progress);
                    }
                }
            }
        };
        pending.id = None;
        // The SDK hands each notification to a task of its own, so a report sent just before
        // the answer may still be on its way: when someone listens, give those tasks a turn,
        // then pass on what came.
        if let Some(sink) = &ctx.progress {
            for _ in 0..2 {
                tokio::task::yield_now().await;
                while let Ok(progress) = progress_rx.try_recv() {
                    sink.report(progress);
                }
            }
        }
        match outcome {
            Ok(ServerResult::CallToolResult(result)) => super::result::render(result),
            Ok(_) => Err(ToolError::Failed(format!(
                "MCP server `{}` answered tools/call with something other than a tool result",
                server.name
            ))),
            Err(error) => {
                if matches!(
                    error,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    self.noted_down(&live).await;
                }
                Err(self.failure(&error))
            }
        }
    }
}

impl McpTool {
    /// Waits (at most the startup timeout) until the supervisor has noted that the session
    /// of `live` ended (`down`), so the run whose call it interrupted records it.
    async fn noted_down(&self, live: &super::Live) {
        let mut phase = self.server.phase.subscribe();
        let noted = async {
            live.closed.cancelled().await;
            // The supervisor notes `down` before it leaves the phase of the ended session.
            let _ = phase
                .wait_for(|p| !matches!(p, Phase::Ready(l) if l.closed.is_cancelled()))
                .await;
        };
        let _ = tokio::time::timeout(self.server.startup_timeout(), noted).await;
    }
    fn failure(&self, error: &ServiceError) -> ToolError {
        match error {
            ServiceError::McpError(data) => ToolError::Failed(format!(
                "MCP server `{}` refused the call: {} (code {})",
                self.server.name, data.message, data.code.0
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                ToolError::Failed(format!(
                    "MCP server `{}` closed the connection during the call (it is being restarted); the call may or may not have taken effect",
                    self.server.name
                ))
            }
            other => ToolError::Failed(format!("MCP server `{}`: {other}", self.server.name)),
        }
    }
}

/// A call in flight: dropping it before the answer (the run was cancelled, the call timed
/// out) sends `notifications/cancelled`; either way its progress channel is removed.
struct Pending {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    token: String,
    signals: Arc<Signals>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.signals
            .progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&self.token);
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(id), Some("cancelled by Keel".to_owned())),
        ));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = peer.send_notification(notification).await;
            });
        }
    }
}
