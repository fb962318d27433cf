//! Naming MCP tools (provisional: merged with the McpServer checks).

use crate::{McpServerSpec, McpToolFilter};

/// The start of every MCP tool's inventory name.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

impl McpServerSpec {
    /// The `<prefix>` of `mcp__<prefix>__<tool>`: `prefix`, or the document's name.
    pub fn effective_prefix<'a>(&'a self, name: &'a str) -> &'a str {
        self.prefix.as_deref().unwrap_or(name)
    }
}

/// `mcp__<prefix>__<tool>`.
pub fn mcp_tool_name(prefix: &str, tool: &str) -> String {
    format!("{MCP_TOOL_PREFIX}{prefix}__{tool}")
}

/// Whether a server's tool passes its include/exclude globs.
pub fn mcp_filter_allows(filter: &McpToolFilter, tool: &str) -> bool {
    let matches = |pattern: &String| {
        globset::Glob::new(pattern).is_ok_and(|g| g.compile_matcher().is_match(tool))
    };
    (filter.include.is_empty() || filter.include.iter().any(matches))
        && !filter.exclude.iter().any(matches)
}
