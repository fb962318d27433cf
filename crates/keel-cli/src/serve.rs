//! `keel serve`: the workspace as an HTTP service — the OpenAI-compatible `/v1` facade and the
//! operator API under `/api`. With no API keys configured (`Runtime.spec.server.apiKeys`) it
//! listens on loopback only and refuses any other address. Ctrl-C or SIGTERM shuts down
//! gracefully: no new requests, runs in flight get `server.shutdownGrace` to finish, the rest
//! are recorded `interrupted` (resumable with `keel runs resume`).

use std::net::SocketAddr;
use std::path::Path;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::run::{self, OutputArgs};
use crate::{EXIT_FAILED, EXIT_USAGE, out};

pub async fn serve(root: &Path, listen: Option<String>) -> u8 {
    let output = OutputArgs {
        json: false,
        events: Vec::new(),
    };
    let telemetry = keel_server::Telemetry::new();
    let observer = telemetry.observer();
    let (runtime, _) = match run::start_with(root, &output, |b| b.observer(observer)).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let listen = listen.unwrap_or_else(|| runtime.workspace().runtime.server.listen.clone());
    let addr: SocketAddr = match listen.parse() {
        Ok(addr) => addr,
        Err(e) => {
            out::error(&format!(
                "invalid listen address `{listen}`: {e} (e.g. 127.0.0.1:8642)"
            ));
            return EXIT_USAGE;
        }
    };
    if !addr.ip().is_loopback() && !keel_server::auth_configured(&runtime) {
        out::error(&format!(
            "refusing to listen on {addr}: no API keys are configured, so Keel serves loopback \
             addresses only (e.g. 127.0.0.1:8642); configure Runtime.spec.server.apiKeys to serve \
             other addresses"
        ));
        return EXIT_USAGE;
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) => {
            out::error(&format!("cannot listen on {addr}: {e}"));
            return EXIT_FAILED;
        }
    };
    // The handlers are in place before anyone can learn the address: a SIGTERM sent right
    // after `listening on` must shut down gracefully, not kill the process.
    let stop = match StopSignals::install() {
        Ok(stop) => stop,
        Err(e) => {
            out::error(&format!(
                "cannot install the Ctrl-C and SIGTERM handlers: {e}"
            ));
            return EXIT_FAILED;
        }
    };
    let bound = listener.local_addr().map_or(addr, |a| a);
    out::line(&format!("listening on http://{bound}"));
    let grace = runtime.workspace().runtime.server.shutdown_grace;
    let shutdown = async move {
        stop.wait().await;
        out::status(&format!(
            "» Shutting down: no new requests; runs in flight have {grace} to finish."
        ));
    };
    match keel_server::serve(runtime, telemetry, listener, shutdown).await {
        Ok(summary) => {
            if summary.finished + summary.interrupted > 0 {
                out::status(&format!(
                    "» Stopped: {} run(s) finished, {} interrupted (keel runs resume ID).",
                    summary.finished, summary.interrupted
                ));
            }
            0
        }
        Err(e) => {
            out::error(&format!("the server failed: {e}"));
            EXIT_FAILED
        }
    }
}

/// Ctrl-C (SIGINT) and SIGTERM, caught from the moment they are installed.
struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    fn install() -> std::io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Completes on the first of the two.
    async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
