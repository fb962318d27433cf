//! The MCP server itself: rmcp's [`ServerHandler`] over a [`Backend`]. It declares only the
//! `tools` capability (the list does not change while a session lasts, so no
//! `listChanged`), lists [`catalog::listing`] and routes each call by its name: `keel__…` to
//! the server's own tools, `agent__…` to an agent run, anything else to a workspace tool.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::answer::{self, refused, unknown_tool};
use super::backend::{AgentRequest, Backend, CallContext, Caller};
use super::catalog::{self, AgentArgs};
use super::control;

/// What the server tells a client about itself when a session starts.
const INSTRUCTIONS: &str = "Keel serves a workspace: its tools under their own names (each \
call governed as in a run and recorded as a run; a call that needs a human's approval waits \
for it), each agent as agent__<name>, staged tool calls (tasks) and read-only views of runs \
and approvals under keel__.";

/// The MCP server over `backend`.
#[derive(Clone)]
pub(crate) struct Handler {
    backend: Arc<dyn Backend>,
}

impl Handler {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// Routes one call by its tool's name.
    async fn route(
        &self,
        request: CallToolRequestParams,
        cx: CallContext,
    ) -> Result<CallToolResult, ErrorData> {
        let name = request.name.as_ref();
        if let Some(control) = catalog::control(name) {
            if !self.backend.offers_control() {
                return Err(unknown_tool(name));
            }
            return control::call(&*self.backend, control, name, request.arguments, &cx).await;
        }
        if let Some(agent) = catalog::agent_of(name) {
            if !self.backend.agents().iter().any(|a| a == agent) {
                return Err(unknown_tool(name));
            }
            let args: AgentArgs = control::parse(name, request.arguments)?;
            let run = AgentRequest {
                agent: agent.to_owned(),
                input: args.input,
                session: args.session,
            };
            return match self.backend.run_agent(run, &cx).await {
                Ok(outcome) => Ok(answer::outcome(outcome)),
                Err(error) => refused(error),
            };
        }
        if catalog::is_reserved(name) || !self.is_workspace_tool(name)? {
            return Err(unknown_tool(name));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        match self.backend.call_tool(name, &arguments, &cx).await {
            Ok(outcome) => Ok(answer::outcome(outcome)),
            Err(error) => refused(error),
        }
    }

    fn is_workspace_tool(&self, name: &str) -> Result<bool, ErrorData> {
        let tools = self
            .backend
            .tools()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(tools.iter().any(|tool| tool.spec.name == name))
    }
}

/// The context of a call: who calls (over HTTP, the [`Caller`] the mounting server put on
/// the request) and the request's cancellation.
fn call_context(context: &RequestContext<RoleServer>) -> CallContext {
    let owner = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .and_then(|caller| caller.owner.clone());
    let can_ask = context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some());
    let header = |name: &str| {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get(name))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let (traceparent, tracestate) = match context.meta.0.get_traceparent() {
        Some(parent) => (
            Some(parent.to_owned()),
            context.meta.0.get_tracestate().map(str::to_owned),
        ),
        None => (header("traceparent"), header("tracestate")),
    };
    CallContext {
        owner,
        cancel: context.ct.clone(),
        ask: can_ask.then(|| super::Asker::new(context.peer.clone())),
        traceparent,
        tracestate,
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().build();
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new(super::SERVER_NAME, env!("CARGO_PKG_VERSION"))
                    .with_title("Keel"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.backend.settle().await;
        let tools = self
            .backend
            .tools()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let listed = catalog::listing(tools, &self.backend.agents(), self.backend.offers_control());
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let cx = call_context(&context);
        let name = request.name.clone();
        tracing::debug!(tool = %name, "MCP tool call started.");
        let result = self.route(request, cx).await;
        if let Err(error) = &result {
            tracing::debug!(tool = %name, %error.message, "MCP tool call refused.");
        }
        result.map(CallToolResponse::from)
    }
}
