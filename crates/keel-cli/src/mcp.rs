//! `keel mcp`: the workspace as an MCP server over stdio, for MCP clients that launch their
//! servers (Claude Desktop's `mcpServers`, IDEs, agents). Stdout carries only JSON-RPC
//! messages; everything else (logs, notices) goes to stderr. It serves one agent's tools
//! (`--agent`, default the workspace's default agent), every agent as `agent__<name>`, tasks
//! and read-only views of runs and approvals (see docs/mcp.md). It stops when the client
//! closes stdin, or on Ctrl-C or SIGTERM; the session's calls in flight are then cancelled
//! (nobody is left to read their answers), and it exits once their runs have recorded their
//! end.

use std::path::Path;

use clap::Subcommand;
use tokio_util::sync::CancellationToken;

use crate::error::CliError;
use crate::follow::OutputArgs;
use crate::serve::StopSignals;
use crate::{out, workspace};

/// `keel mcp [COMMAND]`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// What `keel mcp` alone serves.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the workspace over stdio (what `keel mcp` alone does).
    Serve(ServeArgs),
}

/// What `keel mcp` serves.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// The agent whose tools are served, governed by its policies (default: the workspace's
    /// default agent).
    #[arg(long)]
    pub agent: Option<String>,
}

pub async fn mcp(root: &Path, args: McpArgs) -> Result<(), CliError> {
    match args.command {
        None => serve(root, args.serve).await,
        Some(McpCommand::Serve(serve_args)) => serve(root, serve_args).await,
    }
}

/// Serves the workspace over stdio until the client leaves or a signal arrives.
async fn serve(root: &Path, args: ServeArgs) -> Result<(), CliError> {
    let (runtime, _) = workspace::start(root, &OutputArgs::default()).await?;
    let backend = keel_server::McpBackend::new(runtime.clone(), args.agent.as_deref())
        .map_err(CliError::usage)?;
    let signals = StopSignals::install().map_err(|e| {
        CliError::failed(format!(
            "cannot install the Ctrl-C and SIGTERM handlers: {e}"
        ))
    })?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let watcher = tokio::spawn(async move {
        signals.wait().await;
        stop.cancel();
    });
    let served = keel_server::serve_mcp_stdio(backend, shutdown).await;
    watcher.abort();
    let grace = runtime.workspace().runtime.server.shutdown_grace;
    let report = runtime.shutdown(grace.0).await;
    if report.interrupted > 0 {
        out::status(&format!(
            "» Stopped: {} run(s) interrupted (keel runs resume ID).",
            report.interrupted
        ));
    }
    served.map_err(CliError::failed)
}
