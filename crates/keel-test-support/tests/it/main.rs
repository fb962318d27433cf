//! Sanity tests of the test support itself: the mock LLM server, the benchmark binary and the
//! temporary workspace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mock_binary;
mod mock_server;

/// A plain HTTP client for poking the mocks.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}
