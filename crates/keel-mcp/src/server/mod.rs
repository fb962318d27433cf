//! Keel as an MCP server: a workspace's tools, its agents, staged tool calls (tasks) and
//! read-only views of runs and approvals, to any MCP client.
//!
//! The promise: an MCP call does nothing a run could not. A workspace tool's call is a direct
//! call, governed exactly as in a run (gateway, policy, hooks; an `ask` waits for a human's
//! decision from `keel approvals` or the HTTP API, within `limits.approvalTimeout`) and
//! recorded as a run of its own; `agent__<name>` starts an ordinary recorded run and answers
//! its final answer and request id. A refused or failed call is a tool result with
//! `isError: true` and the reason; only a call the server cannot route (an unknown tool,
//! arguments that do not parse) is a JSON-RPC error.
//!
//! Start reading at [`Backend`] (`backend.rs`): the seam, in Keel's own types, that a
//! runtime implements (keel-server does, for `keel mcp` and `keel serve`'s `/mcp`). Then
//! `catalog.rs` (what is listed, and the one table of the server's own `keel__` tools;
//! `portable.rs` keeps the schemas free of nullable `type` arrays),
//! `handler.rs` (rmcp's `ServerHandler`: listing and routing), `control.rs` (the `keel__`
//! tools at work), `answer.rs` (how every outcome goes on the wire) and `transport.rs`
//! ([`serve_stdio`], [`HttpService`]). rmcp's types stay inside this module.

mod answer;
mod ask;
mod backend;
mod catalog;
mod control;
mod handler;
mod portable;
mod transport;

pub use ask::Asker;
pub use backend::{
    AgentRequest, Backend, BackendError, CallContext, Caller, ExposedTool, NewTask, RunOutcome,
};
pub use transport::{
    HttpBody, HttpOptions, HttpService, ServeError, http_service, serve_io, serve_stdio,
};

/// The name the server gives itself in the MCP handshake.
pub const SERVER_NAME: &str = "keel";
