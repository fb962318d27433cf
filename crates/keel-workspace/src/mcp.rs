//! How MCP servers' tools are named and selected (`docs/workspace.md#mcpserver`): the one place
//! that says what `mcp__<prefix>__<tool>` means. Validation (`checks/mcp.rs`) and the runtime
//! (`keel-mcp`) both read these rules, so the names an agent lists and the names the inventory
//! offers cannot disagree.
//!
//! The promise: a valid prefix holds no `__` and does not end with `_`, so an inventory name
//! splits back into its server and tool at its first `__` after `mcp__`, and a glob such as
//! `mcp__files__*` can only ever match tools of the server whose prefix is `files`.

use globset::Glob;

use crate::{McpServerSpec, McpToolFilter};

/// What every MCP tool's inventory name starts with.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// The tool that reads a resource from an MCP server; agents may list it when the workspace
/// declares at least one `McpServer`.
pub const READ_MCP_RESOURCE_TOOL: &str = "read_mcp_resource";

/// The longest prefix a server may have.
pub(crate) const MAX_PREFIX_LEN: usize = 48;

impl McpServerSpec {
    /// The `<prefix>` of this server's tools: `spec.prefix`, else `name`, the document's name.
    pub fn effective_prefix<'a>(&'a self, name: &'a str) -> &'a str {
        self.prefix.as_deref().unwrap_or(name)
    }
}

/// The inventory name of the tool `tool` of the server whose prefix is `prefix`:
/// `mcp__{prefix}__{tool}`.
pub fn mcp_tool_name(prefix: &str, tool: &str) -> String {
    format!("{MCP_TOOL_PREFIX}{prefix}__{tool}")
}

/// Whether a server's tool (by the server's own name for it) passes `filter`: it matches an
/// `include` glob (an empty `include` lets every tool in) and no `exclude` glob (exclude wins).
/// A pattern that is not a valid glob matches nothing; a loaded workspace has none.
pub fn mcp_filter_allows(filter: &McpToolFilter, tool: &str) -> bool {
    let matches = |pattern: &String| {
        Glob::new(pattern).is_ok_and(|glob| glob.compile_matcher().is_match(tool))
    };
    let included = filter.include.is_empty() || filter.include.iter().any(matches);
    included && !filter.exclude.iter().any(matches)
}

/// Why `prefix` cannot be a server's prefix (words to follow it in a message: "`X_` ends
/// with …"), or `None` when it can.
pub(crate) fn prefix_problem(prefix: &str) -> Option<&'static str> {
    let mut chars = prefix.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok {
        return Some("must start with a lower-case letter or a digit");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-')) {
        return Some("may contain only lower-case letters, digits, `-` and `_`");
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Some("is longer than 48 characters");
    }
    if prefix.contains("__") {
        return Some("contains `__`, which separates the prefix from the tool name");
    }
    if prefix.ends_with('_') {
        return Some("ends with `_`, which would run into the `__` before the tool name");
    }
    None
}

/// Whether `text` uses glob syntax (`*`, `?`, `[…]`, `{…}`).
pub(crate) fn has_glob_chars(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

/// The server prefix and the tool part of an inventory name `mcp__<prefix>__<tool>` (the tool
/// part may be empty or a glob); `None` when `name` is not of that shape.
pub(crate) fn split_mcp_tool(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(MCP_TOOL_PREFIX)?.split_once("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> McpToolFilter {
        McpToolFilter {
            include: include.iter().map(|s| (*s).to_owned()).collect(),
            exclude: exclude.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn an_empty_filter_allows_every_tool() {
        assert!(mcp_filter_allows(&filter(&[], &[]), "read_file"));
    }

    #[test]
    fn include_selects_and_exclude_wins() {
        let f = filter(&["read_*", "list_?ir"], &["read_secret*"]);
        assert!(mcp_filter_allows(&f, "read_file"));
        assert!(mcp_filter_allows(&f, "list_dir"));
        assert!(!mcp_filter_allows(&f, "write_file"));
        assert!(!mcp_filter_allows(&f, "read_secrets"));
        assert!(!mcp_filter_allows(&filter(&[], &["*"]), "read_file"));
    }

    #[test]
    fn names_join_and_split_at_the_prefix() {
        assert_eq!(mcp_tool_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(
            split_mcp_tool("mcp__files__read__file"),
            Some(("files", "read__file"))
        );
        assert_eq!(split_mcp_tool("mcp__files"), None);
        assert_eq!(split_mcp_tool("files__x"), None);
    }

    #[test]
    fn the_prefix_defaults_to_the_document_name() {
        let mut spec: McpServerSpec =
            serde_json::from_value(serde_json::json!({ "transport": "stdio", "command": ["x"] }))
                .unwrap();
        assert_eq!(spec.effective_prefix("files"), "files");
        spec.prefix = Some("fs".into());
        assert_eq!(spec.effective_prefix("files"), "fs");
    }

    #[test]
    fn prefixes_split_unambiguously() {
        for ok in ["files", "web-2", "a_b", "0"] {
            assert_eq!(prefix_problem(ok), None, "{ok}");
        }
        for bad in ["", "Files", "-x", "a.b", "a__b", "a_", &"a".repeat(49)] {
            assert!(prefix_problem(bad).is_some(), "{bad}");
        }
    }
}
