//! keel-mcp integration tests.
