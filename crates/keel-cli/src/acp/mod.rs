//! `keel acp`: the workspace's agent for code editors, over the Agent Client Protocol (ACP
//! v1) on stdio — the editor (Zed and others) starts `keel acp -w DIR` and drives it.
//!
//! | ACP | Keel |
//! |---|---|
//! | `session/new`, a `sessionId` | a Keel session (its id is the `sessionId`) |
//! | `session/load` | the session's stored transcript, replayed as `session/update`s |
//! | `session/prompt` | one run of the agent in the session; updates stream as it goes |
//! | `session/update` | the run's answer text, tool calls with their status and output, plans |
//! | `session/request_permission` | an approval the run asks for; the answer decides it |
//! | `session/cancel` | cancels the run; the prompt answers `cancelled` |
//!
//! The promise: stdout carries ACP messages only (logs and notices go to stderr); bad input
//! — a line that is not JSON, an unknown method, params that do not fit — is answered with a
//! JSON-RPC error naming what is wrong, never a panic. Every prompt runs the agent the
//! command names (`--agent`, default the workspace's default agent), governed as any run is:
//! the gateway, policy and hooks decide, and what asks a person asks the editor's user.
//!
//! When the client offers its file system (`clientCapabilities.fs`), the run's file tools
//! read and write through it ([`fs`]). Approvals that subagents' runs ask for are asked of the
//! editor too ([`children`]).
//!
//! Start with [`server`] (the connection and the session methods), then [`prompt`] (one turn)
//! and [`updates`] (events as updates); [`rpc`] is JSON-RPC over stdio, [`wire`] the
//! protocol's types.

mod children;
mod fs;
mod prompt;
mod rpc;
mod server;
mod updates;
mod wire;

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::CliError;
use crate::follow::OutputArgs;
use crate::serve::StopSignals;
use crate::{out, workspace};

/// `keel acp`'s options.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct AcpArgs {
    /// The agent the editor talks to (default: the workspace's default agent).
    #[arg(long)]
    pub agent: Option<String>,
}

/// Serves the editor on stdio until it closes stdin, or Ctrl-C or SIGTERM; prompts in
/// progress are then cancelled, and this returns once their runs have recorded their end.
pub(crate) async fn acp(root: &Path, args: AcpArgs) -> Result<(), CliError> {
    let children = Arc::new(children::ChildApprovals::default());
    let observer: Arc<dyn keel::EventObserver> = children.clone();
    let (runtime, _) =
        workspace::start_with(root, &OutputArgs::default(), |b| b.observer(observer)).await?;
    let agent = match agent(&runtime.workspace(), args.agent) {
        Ok(agent) => agent,
        Err(error) => {
            runtime.stop_mcp().await;
            return Err(error);
        }
    };
    let signals = StopSignals::install().map_err(|e| {
        CliError::failed(format!(
            "cannot install the Ctrl-C and SIGTERM handlers: {e}"
        ))
    })?;
    let stop = CancellationToken::new();
    let stopping = stop.clone();
    let watcher = tokio::spawn(async move {
        signals.wait().await;
        stopping.cancel();
    });
    let peer = Arc::new(rpc::Peer::stdout());
    let server = Arc::new(server::Server::new(runtime.clone(), agent, peer, children));
    server.serve(stop).await;
    watcher.abort();
    let grace = runtime.workspace().runtime.server.shutdown_grace;
    let report = runtime.shutdown(grace.0).await;
    if report.interrupted > 0 {
        out::status(&format!(
            "» Stopped: {} run(s) interrupted (keel runs resume ID).",
            report.interrupted
        ));
    }
    Ok(())
}

/// The agent prompts run: `--agent`, or the workspace's default; one the workspace does not
/// have is a usage error naming those it has.
fn agent(workspace: &keel::Workspace, asked: Option<String>) -> Result<String, CliError> {
    let known = || {
        let names: Vec<&str> = workspace.agents.keys().map(String::as_str).collect();
        match names.is_empty() {
            true => "none".to_owned(),
            false => names.join(", "),
        }
    };
    match asked {
        Some(name)
            if workspace.agents.contains_key(&name)
                || name
                    .strip_prefix("workflow/")
                    .is_some_and(|w| workspace.workflows.contains_key(w)) =>
        {
            Ok(name)
        }
        Some(name) => Err(CliError::usage(format!(
            "no agent `{name}` in this workspace (agents: {})",
            known()
        ))),
        None => workspace.default_agent().map(str::to_owned).ok_or_else(|| {
            CliError::usage(format!(
                "the workspace has no default agent: pass --agent (agents: {})",
                known()
            ))
        }),
    }
}
