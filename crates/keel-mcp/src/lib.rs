//! MCP both ways:
//!
//! - [`client`]: MCP servers as governed tool sources (`kind: McpServer`);
//! - [`server`]: Keel as an MCP server (`keel mcp` over stdio, `/mcp` of `keel serve`).
//!
//! rmcp, the official Rust SDK, is this crate's business: no rmcp type appears in its public
//! API, so the rest of Keel sees only keel-mcp's own types.

pub mod client;
pub mod server;
