//! MCP both ways.
//!
//! - [`server`]: Keel as an MCP server (`keel mcp` over stdio, `/mcp` of `keel serve`).
//!
//! rmcp is this crate's business: no rmcp type appears in its public API, so the rest of Keel
//! sees only keel-mcp's own types.

pub mod server;
