//! MCP both ways.
