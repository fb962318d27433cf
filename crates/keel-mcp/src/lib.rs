//! MCP both ways: MCP servers as governed tool sources ([`client`]), and Keel as an MCP
//! server. `rmcp`, the official Rust SDK, stays inside this crate: the rest of Keel sees only
//! the types defined here.

pub mod client;
