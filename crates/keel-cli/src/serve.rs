//! `keel serve`: the workspace as an HTTP service — the OpenAI-compatible `/v1` facade and the
//! operator API under `/api`. With no API keys configured (`Runtime.spec.server.apiKeys`) it
//! listens on loopback only and refuses any other address. Ctrl-C stops accepting and lets
//! requests in flight finish.

use std::net::SocketAddr;
use std::path::Path;

use crate::run::{self, OutputArgs};
use crate::{EXIT_FAILED, EXIT_USAGE, out};

pub async fn serve(root: &Path, listen: Option<String>) -> u8 {
    let output = OutputArgs {
        json: false,
        events: Vec::new(),
    };
    let (runtime, _) = match run::start(root, &output).await {
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
    let bound = listener.local_addr().map_or(addr, |a| a);
    out::line(&format!("listening on http://{bound}"));
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        out::status("» Shutting down: no new requests; finishing those in flight.");
    };
    match keel_server::serve(runtime, listener, shutdown).await {
        Ok(()) => 0,
        Err(e) => {
            out::error(&format!("the server failed: {e}"));
            EXIT_FAILED
        }
    }
}
