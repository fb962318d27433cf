//! `keel serve`: the workspace as an HTTP service — the OpenAI-compatible `/v1` facade and the
//! operator API under `/api`. With no API keys configured (`Runtime.spec.server.apiKeys`) it
//! listens on loopback only and refuses any other address. Ctrl-C or SIGTERM shuts down
//! gracefully: no new requests, runs in flight get `server.shutdownGrace` to finish, the rest
//! are recorded `interrupted` (resumable with `keel runs resume`). SIGHUP (and, with
//! `server.watch: true`, a change to the configuration files) reloads the workspace.

mod reload;

use std::net::SocketAddr;
use std::path::Path;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::CliError;
use crate::follow::OutputArgs;
use crate::{out, workspace};

pub(crate) async fn serve(root: &Path, listen: Option<String>) -> Result<(), CliError> {
    let telemetry = keel_server::Telemetry::with_memory(crate::memory_use);
    let observer = telemetry.observer();
    let (runtime, _) =
        workspace::start_with(root, &OutputArgs::default(), |b| b.observer(observer)).await?;
    let listen = listen.unwrap_or_else(|| runtime.workspace().runtime.server.listen.clone());
    let addr: SocketAddr = listen.parse().map_err(|e| {
        CliError::usage(format!(
            "invalid listen address `{listen}`: {e} (e.g. 127.0.0.1:8642)"
        ))
    })?;
    if !addr.ip().is_loopback() && !keel_server::auth_configured(&runtime) {
        return Err(CliError::usage(format!(
            "refusing to listen on {addr}: no API keys are configured, so Keel serves loopback \
             addresses only (e.g. 127.0.0.1:8642); configure Runtime.spec.server.apiKeys to serve \
             other addresses"
        )));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::failed(format!("cannot listen on {addr}: {e}")))?;
    // The handlers are in place before anyone can learn the address: a SIGTERM sent right
    // after `listening on` must shut down gracefully, not kill the process.
    let stop = StopSignals::install().map_err(|e| {
        CliError::failed(format!(
            "cannot install the Ctrl-C and SIGTERM handlers: {e}"
        ))
    })?;
    let bound = listener.local_addr().map_or(addr, |a| a);
    // MCP servers start now, so health and the inventory show them from the start; the
    // server answers meanwhile (runs wait only for the servers their agents use).
    runtime.start_mcp();
    runtime.skills().watch();
    let reloads = reload::Reloads::install(root, &runtime)
        .map_err(|e| CliError::failed(format!("cannot install the SIGHUP handler: {e}")))?;
    tokio::spawn(reloads.run(runtime.clone()));
    out::line(&format!("listening on http://{bound}"));
    let grace = runtime.workspace().runtime.server.shutdown_grace;
    let shutdown = async move {
        stop.wait().await;
        out::status(&format!(
            "» Shutting down: no new requests; runs in flight have {grace} to finish."
        ));
    };
    let summary = keel_server::serve(runtime, telemetry, listener, shutdown)
        .await
        .map_err(|e| CliError::failed(format!("the server failed: {e}")))?;
    if summary.finished + summary.interrupted > 0 {
        out::status(&format!(
            "» Stopped: {} run(s) finished, {} interrupted (keel runs resume ID).",
            summary.finished, summary.interrupted
        ));
    }
    Ok(())
}

/// Ctrl-C (SIGINT) and SIGTERM, caught from the moment they are installed.
pub(crate) struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    pub(crate) fn install() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Completes on the first of the two.
    pub(crate) async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
