//! keel-mcp integration tests.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod server;
