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
pub(crate) struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// What `keel mcp` alone serves.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Serve the workspace over stdio (what `keel mcp` alone does).
    Serve(ServeArgs),
    /// The workspace's MCP servers (the clients' side): state, tool counts, restarts, the
    /// last error. Starts each server and waits until it answers or fails.
    List {
        /// JSON lines, one per server, with its tools and lifecycle history.
        #[arg(long)]
        json: bool,
    },
    /// The tools an MCP server offers, as agents see them (`mcp__<prefix>__<tool>`).
    Tools {
        /// The `McpServer` document's name.
        server: String,
        /// JSON lines: name, description, parameters, read-only.
        #[arg(long)]
        json: bool,
    },
    /// The prompts an MCP server offers.
    Prompts {
        /// The `McpServer` document's name.
        server: String,
        /// JSON lines.
        #[arg(long)]
        json: bool,
    },
}

/// What `keel mcp` serves.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ServeArgs {
    /// The agent whose tools are served, governed by its policies (default: the workspace's
    /// default agent).
    #[arg(long)]
    pub agent: Option<String>,
}

pub(crate) async fn mcp(root: &Path, args: McpArgs) -> Result<(), CliError> {
    match args.command {
        None => serve(root, args.serve).await,
        Some(McpCommand::Serve(serve_args)) => serve(root, serve_args).await,
        Some(command) => {
            let (runtime, _) = workspace::start(root, &OutputArgs::default()).await?;
            let result = inspect(&runtime, command).await;
            runtime.stop_mcp().await;
            result
        }
    }
}

/// `list`, `tools` and `prompts`: the client side, read from live servers.
async fn inspect(runtime: &keel::Runtime, command: McpCommand) -> Result<(), CliError> {
    match command {
        McpCommand::Serve(_) => Ok(()),
        McpCommand::List { json } => {
            runtime.settle_mcp().await;
            let servers = runtime.mcp_servers();
            if json {
                for server in &servers {
                    out::line(&serde_json::to_string(server)?);
                }
                return Ok(());
            }
            out::line(&format!(
                "{:<20}  {:<9}  {:<12}  {:>5}  {:>8}  ERROR",
                "SERVER", "TRANSPORT", "STATE", "TOOLS", "RESTARTS"
            ));
            for s in &servers {
                let transport = match s.transport {
                    keel_workspace::McpTransport::Stdio => "stdio",
                    keel_workspace::McpTransport::Http => "http",
                };
                out::line(&format!(
                    "{:<20}  {:<9}  {:<12}  {:>5}  {:>8}  {}",
                    s.name,
                    transport,
                    s.state.as_str(),
                    s.tools.len(),
                    s.restarts,
                    s.last_error.as_deref().unwrap_or("")
                ));
            }
            Ok(())
        }
        McpCommand::Tools { server, json } => {
            runtime.settle_mcp().await;
            let Some(status) = runtime.mcp_servers().into_iter().find(|s| s.name == server) else {
                return Err(CliError::usage(unknown_server(runtime, &server)));
            };
            if status.state != keel::ServerState::Ready {
                return Err(CliError::failed(format!(
                    "MCP server `{server}` is {}: {}",
                    status.state.as_str(),
                    status.last_error.as_deref().unwrap_or("no tools listed")
                )));
            }
            for name in &status.tools {
                let Some(spec) = runtime.tools().spec(name) else {
                    continue;
                };
                let read_only = runtime.tools().read_only(name);
                // A tool whose own name is not a valid model tool name is offered under a
                // mapped one (docs/mcp.md#tool-names); the server knows it by its own.
                let original = status
                    .renamed
                    .iter()
                    .find(|r| r.name == *name)
                    .map(|r| r.original.as_str());
                match json {
                    true => out::line(&serde_json::to_string(&serde_json::json!({
                        "name": spec.name,
                        "originalName": original,
                        "description": spec.description,
                        "parameters": spec.parameters,
                        "readOnly": read_only,
                    }))?),
                    false => {
                        let mut description = spec.description.clone();
                        if let Some(original) = original {
                            description = format!("[server's name: {original:?}] {description}");
                        }
                        out::line(&format!(
                            "{:<30}  {:<9}  {}",
                            spec.name,
                            if read_only { "read-only" } else { "" },
                            description
                        ))
                    }
                }
            }
            for why in &status.left_out {
                match json {
                    true => out::line(&serde_json::to_string(
                        &serde_json::json!({ "leftOut": why }),
                    )?),
                    false => out::line(&format!("left out: {why}")),
                }
            }
            Ok(())
        }
        McpCommand::Prompts { server, json } => {
            let prompts = runtime.mcp_prompts(&server).await.map_err(|e| match e {
                keel::McpError::UnknownServer { .. } => CliError::usage(e),
                keel::McpError::Unavailable(_) => CliError::failed(e),
            })?;
            for prompt in &prompts {
                match json {
                    true => out::line(&serde_json::to_string(prompt)?),
                    false => {
                        let arguments: Vec<String> = prompt
                            .arguments
                            .iter()
                            .map(|a| match a.required {
                                Some(true) => a.name.clone(),
                                _ => format!("[{}]", a.name),
                            })
                            .collect();
                        out::line(&format!(
                            "{:<24}  {:<24}  {}",
                            prompt.name,
                            arguments.join(" "),
                            prompt.description.as_deref().unwrap_or("")
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}

fn unknown_server(runtime: &keel::Runtime, name: &str) -> String {
    let known: Vec<String> = runtime.mcp_servers().into_iter().map(|s| s.name).collect();
    format!(
        "no MCP server `{name}` in this workspace (configured: {})",
        match known.is_empty() {
            true => "none".to_owned(),
            false => known.join(", "),
        }
    )
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
