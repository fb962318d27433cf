//! Sanity tests of the test support itself: the mock LLM server, the benchmark binary, the
//! temporary workspace, the OTLP receiver, the remote A2A echo agent and the real counterparts
//! the suite installs.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod a2a_echo_server;
mod mock_anthropic;
mod mock_binary;
mod mock_server;
mod otlp_receiver;
mod test_clients;

/// A plain HTTP client for poking the mocks.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}
