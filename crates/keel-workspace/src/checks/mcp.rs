//! Checks of `McpServer` documents and of the MCP names agents list.
//!
//! A server must say how to reach it (a `command` for stdio, an http(s) `url` for http) and
//! carries no field of the other transport; its `cwd` stays inside the workspace; its prefix
//! (`spec.prefix`, else its name) follows the naming rules of `crate::mcp` and no other
//! server has it; its filter globs compile, its `envAllow` entries are variable names and its
//! timeouts are not zero.
//!
//! An agent may list `mcp__<prefix>__<tool>` (the tool part may be a glob: the server's tools
//! are only known at run time) for a declared prefix, and `read_mcp_resource` when any server
//! is declared. Globs select MCP tools only.

use std::path::{Component, Path};

use globset::Glob;

use super::{Checker, strings};
use crate::documents::{Document, Kind};
use crate::mcp::{
    MAX_PREFIX_LEN, MCP_TOOL_PREFIX, READ_MCP_RESOURCE_TOOL, has_glob_chars, prefix_problem,
    split_mcp_tool,
};
use crate::suggest::{closest, list};
use crate::yaml::{Loc, Node, NodeValue};
use crate::{Duration, McpServerSpec};

/// Fields only a stdio server reads.
const STDIO_FIELDS: &[&str] = &["command", "env", "envAllow", "cwd"];
/// Fields only an http server reads.
const HTTP_FIELDS: &[&str] = &["url", "headers"];

const URL_HINT: &str = "write the server's streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp` or `https://mcp.example.com/mcp`";

impl<'a> Checker<'a> {
    pub(super) fn mcp_server(&mut self) {
        match self.string("transport") {
            Some(("stdio", transport)) => self.mcp_stdio(transport),
            Some(("http", transport)) => self.mcp_http(transport),
            // A missing or unknown transport is a schema error.
            _ => {}
        }
        self.mcp_prefix();
        self.mcp_tool_filter();
        self.mcp_timeouts();
    }

    fn mcp_stdio(&mut self, transport: &'a Node) {
        self.mcp_command(transport);
        self.fields_of_other_transport(HTTP_FIELDS, "stdio", "http");
        if let Some((cwd, node)) = self.string("cwd") {
            self.mcp_cwd(cwd, node);
        }
        self.mcp_env_allow();
    }

    /// A stdio server needs a program to start.
    fn mcp_command(&mut self, transport: &'a Node) {
        let server = self.doc.name.clone();
        let spec: &'a Node = self.spec;
        let hint = "add `command:` with the server's program and its arguments, e.g. `[npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]`";
        let Some(command) = spec.get("command") else {
            self.push(
                &transport.loc,
                format!("stdio McpServer `{server}` has no `command`"),
                Some(hint.into()),
            );
            return;
        };
        // Anything but a list is a schema error.
        let NodeValue::Seq(items) = &command.value else {
            return;
        };
        match items.first() {
            None => self.push(
                &command.loc,
                format!("`command` of McpServer `{server}` is empty"),
                Some(hint.into()),
            ),
            Some(program) if program.as_str().is_some_and(|p| p.trim().is_empty()) => self.push(
                &program.loc,
                format!("the program in `command` of McpServer `{server}` is empty"),
                Some(hint.into()),
            ),
            Some(_) => {}
        }
    }

    fn mcp_http(&mut self, transport: &'a Node) {
        let server = self.doc.name.clone();
        self.fields_of_other_transport(STDIO_FIELDS, "http", "stdio");
        let spec: &'a Node = self.spec;
        let Some(url) = spec.get("url").filter(|n| !n.is_null()) else {
            self.push(
                &transport.loc,
                format!("http McpServer `{server}` has no `url`"),
                Some(format!("add `url:`; {URL_HINT}")),
            );
            return;
        };
        let Some(text) = url.as_str() else { return };
        if let Some(problem) = url_problem(text) {
            self.push(
                &url.loc,
                format!("`url` `{text}` of McpServer `{server}` {problem}"),
                Some(URL_HINT.into()),
            );
        }
    }

    /// Each field of `fields` (read only by the `other` transport) is an error when set.
    fn fields_of_other_transport(&mut self, fields: &[&str], this: &str, other: &str) {
        let server = self.doc.name.clone();
        self.fields_without_effect(fields, |field| {
            (
                format!("`{field}` has no effect on {this} McpServer `{server}`"),
                format!("`{field}` is for `transport: {other}`; remove it"),
            )
        });
    }

    /// `cwd` is a folder relative to the workspace root and inside it.
    fn mcp_cwd(&mut self, cwd: &str, node: &Node) {
        let problem = if cwd.starts_with('/') || Path::new(cwd).is_absolute() {
            "is absolute"
        } else if escapes(cwd) {
            "leads out of the workspace"
        } else {
            return;
        };
        let server = self.doc.name.clone();
        self.push(
            &node.loc,
            format!("`cwd` `{cwd}` of McpServer `{server}` {problem}"),
            Some(
                "write a folder relative to the workspace root and inside it, e.g. `resources/mcp`; leave `cwd` out for the root"
                    .into(),
            ),
        );
    }

    fn mcp_env_allow(&mut self) {
        let server = self.doc.name.clone();
        let spec: &'a Node = self.spec;
        for (index, (name, node)) in strings(spec.get("envAllow")).into_iter().enumerate() {
            if is_env_name(name) {
                continue;
            }
            self.push(
                &node.loc,
                format!(
                    "`envAllow[{index}]` `{name}` of McpServer `{server}` is not an environment variable name"
                ),
                Some(
                    "names are letters, digits and `_`, not starting with a digit, e.g. `GITHUB_TOKEN`"
                        .into(),
                ),
            );
        }
    }

    /// The prefix is valid, and no earlier `McpServer` document has it.
    fn mcp_prefix(&mut self) {
        let server = self.doc.name.clone();
        let spec: &'a Node = self.spec;
        let explicit = spec.get("prefix").filter(|n| !n.is_null());
        let Some((prefix, loc)) = declared_prefix(self.doc) else {
            return;
        };
        if let Some(problem) = prefix_problem(prefix) {
            let example = example_prefix(prefix);
            let (message, hint) = if explicit.is_some() {
                (
                    format!("`prefix` `{prefix}` of McpServer `{server}` {problem}"),
                    format!(
                        "tools are named `mcp__<prefix>__<tool>`: use lower-case letters, digits, `-` and single `_` (at most {MAX_PREFIX_LEN}), e.g. `{example}`"
                    ),
                )
            } else {
                (
                    format!(
                        "the name of McpServer `{server}` cannot be the prefix of its tools: it {problem}"
                    ),
                    format!(
                        "set `prefix:` (lower-case letters, digits, `-` and single `_`, at most {MAX_PREFIX_LEN}), e.g. `prefix: {example}`; tools are named `mcp__<prefix>__<tool>`"
                    ),
                )
            };
            self.push(&loc.clone(), message, Some(hint));
            return;
        }
        let docs = self.docs;
        let first = docs
            .list
            .iter()
            .take_while(|other| !std::ptr::eq(*other, self.doc))
            .filter(|other| other.kind == Kind::McpServer)
            .find_map(|other| {
                let (theirs, their_loc) = declared_prefix(other)?;
                (theirs == prefix).then_some((other, their_loc))
            });
        if let Some((other, their_loc)) = first {
            self.push(
                &loc.clone(),
                format!(
                    "McpServer `{server}` has the tool prefix `{prefix}`, which McpServer `{}` (at {}) already has",
                    other.name,
                    their_loc.short()
                ),
                Some(
                    "set a different `prefix:` on one of them; each server's tools are named `mcp__<prefix>__<tool>`"
                        .into(),
                ),
            );
        }
    }

    fn mcp_tool_filter(&mut self) {
        let server = self.doc.name.clone();
        let spec: &'a Node = self.spec;
        let filter = spec.get("tools");
        for key in ["include", "exclude"] {
            let patterns = strings(filter.and_then(|f| f.get(key)));
            for (index, (pattern, node)) in patterns.into_iter().enumerate() {
                if let Err(e) = Glob::new(pattern) {
                    self.push(
                        &node.loc,
                        format!(
                            "`tools.{key}[{index}]` of McpServer `{server}` is not a valid glob: {}",
                            e.kind()
                        ),
                        Some(
                            "write a glob over the server's own tool names, e.g. `read_*` (`*` any characters, `?` one)"
                                .into(),
                        ),
                    );
                }
            }
        }
    }

    fn mcp_timeouts(&mut self) {
        let server = self.doc.name.clone();
        let timeouts = [
            ("startupTimeout", McpServerSpec::DEFAULT_STARTUP_TIMEOUT),
            ("callTimeout", McpServerSpec::DEFAULT_CALL_TIMEOUT),
        ];
        for (key, default) in timeouts {
            let Some((text, node)) = self.string(key) else {
                continue;
            };
            if humantime::parse_duration(text).is_ok_and(|d| d.is_zero()) {
                self.push(
                    &node.loc,
                    format!("`{key}` of McpServer `{server}` is zero"),
                    Some(format!(
                        "give a duration such as `10s`, or leave `{key}` out for the default ({})",
                        Duration(default)
                    )),
                );
            }
        }
    }

    /// The prefixes of the declared `McpServer` documents, in declaration order.
    pub(super) fn mcp_prefixes(&self) -> Vec<&'a str> {
        let docs = self.docs;
        docs.list
            .iter()
            .filter(|d| d.kind == Kind::McpServer)
            .filter_map(|d| declared_prefix(d).map(|(prefix, _)| prefix))
            .collect()
    }

    /// `read_mcp_resource` in an agent's `tools`: it needs a server to read from.
    pub(super) fn read_mcp_resource_entry(&mut self, agent: &str, node: &Node, prefixes: &[&str]) {
        if !prefixes.is_empty() {
            return;
        }
        self.push(
            &node.loc,
            format!(
                "agent `{agent}` uses tool `{READ_MCP_RESOURCE_TOOL}`, but the workspace declares no MCP server"
            ),
            Some(
                "declare an McpServer document (`kind: McpServer`) whose resources the agent reads"
                    .into(),
            ),
        );
    }

    /// An `mcp__…` entry in an agent's `tools`: a declared server's prefix, then a tool name or
    /// a glob.
    pub(super) fn mcp_tool_entry(
        &mut self,
        agent: &str,
        tool: &str,
        node: &Node,
        prefixes: &[&str],
    ) {
        let example = prefixes.first().copied().unwrap_or("files");
        let split = split_mcp_tool(tool).filter(|(p, _)| !p.is_empty() && !has_glob_chars(p));
        let Some((prefix, name)) = split else {
            self.push(
                &node.loc,
                format!(
                    "agent `{agent}` uses tool `{tool}`, which names no MCP server: MCP tools are `{MCP_TOOL_PREFIX}<prefix>__<tool>`"
                ),
                Some(format!(
                    "name the server, e.g. `mcp__{example}__*` for all its tools; {}",
                    declared_prefixes(prefixes)
                )),
            );
            return;
        };
        if !prefixes.contains(&prefix) {
            let hint = match closest(prefix, prefixes.iter().copied(), 2) {
                Some(near) => format!("did you mean `mcp__{near}__{name}`?"),
                None => declared_prefixes(prefixes),
            };
            self.push(
                &node.loc,
                format!(
                    "agent `{agent}` uses tool `{tool}` of MCP server `{prefix}`, which is not declared"
                ),
                Some(hint),
            );
            return;
        }
        if name.is_empty() {
            self.push(
                &node.loc,
                format!(
                    "agent `{agent}` uses `{tool}`, which names no tool of MCP server `{prefix}`"
                ),
                Some(format!(
                    "write `mcp__{prefix}__<tool>`, or `mcp__{prefix}__*` for all its tools"
                )),
            );
            return;
        }
        if let Err(e) = Glob::new(tool) {
            self.push(
                &node.loc,
                format!(
                    "agent `{agent}` uses `{tool}`, which is not a valid glob: {}",
                    e.kind()
                ),
                Some(format!(
                    "`*` matches any characters and `?` one, e.g. `mcp__{prefix}__read_*`"
                )),
            );
        }
    }

    /// A glob in an agent's `tools` that does not start with `mcp__`.
    pub(super) fn glob_outside_mcp(
        &mut self,
        agent: &str,
        tool: &str,
        node: &Node,
        prefixes: &[&str],
    ) {
        let hint = match prefixes.first() {
            Some(prefix) => format!(
                "list built-in and declared tools by name; to select an MCP server's tools, write e.g. `mcp__{prefix}__*`"
            ),
            None => "list built-in and declared tools by name".into(),
        };
        self.push(
            &node.loc,
            format!(
                "agent `{agent}` uses `{tool}`, but globs select MCP tools only (`mcp__<server>__*`)"
            ),
            Some(hint),
        );
    }
}

/// A document's tool prefix as written: `spec.prefix`, else its name, with where it is written.
/// `None` when `prefix` is not a string (a schema error).
fn declared_prefix(doc: &Document) -> Option<(&str, &Loc)> {
    let prefix = doc
        .spec
        .as_ref()
        .and_then(|spec| spec.get("prefix"))
        .filter(|n| !n.is_null());
    match prefix {
        Some(node) => Some((node.as_str()?, &node.loc)),
        None => Some((doc.name.as_str(), &doc.name_loc)),
    }
}

/// "declared MCP prefixes are …", or how to declare one.
fn declared_prefixes(prefixes: &[&str]) -> String {
    if prefixes.is_empty() {
        return "no McpServer is declared; add a `kind: McpServer` document (its name, or its `prefix`, is the server's prefix)".into();
    }
    format!(
        "declared MCP prefixes are {}",
        list(prefixes.iter().copied())
    )
}

/// A valid prefix resembling `text`, for hints.
fn example_prefix(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '_',
        };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    let mut out: String = out
        .trim_start_matches('-')
        .chars()
        .take(MAX_PREFIX_LEN)
        .collect();
    while out.ends_with('_') {
        out.pop();
    }
    if prefix_problem(&out).is_some() {
        return "my-server".into();
    }
    out
}

/// Whether a relative path climbs above its starting folder (`..` past the start), or is not
/// relative at all.
fn escapes(path: &str) -> bool {
    let mut depth: usize = 0;
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return true,
            },
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What is wrong with an endpoint URL (scheme http or https, a host, no whitespace), or
/// `None`; also read for the Runtime's OTLP endpoint.
pub(super) fn url_problem(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    let Some(rest) = ["http://", "https://"]
        .into_iter()
        .find_map(|scheme| lower.strip_prefix(scheme))
    else {
        return Some("is not an http:// or https:// URL");
    };
    if url.chars().any(char::is_whitespace) {
        return Some("contains whitespace");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    if host.is_empty() || host == "[]" {
        return Some("has no host");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_an_http_scheme_and_a_host() {
        for ok in [
            "http://127.0.0.1:3001/mcp",
            "HTTPS://mcp.example.com",
            "http://[::1]:8080/mcp",
            "https://user@host/x",
        ] {
            assert_eq!(url_problem(ok), None, "{ok}");
        }
        assert_eq!(
            url_problem("ftp://x/mcp"),
            Some("is not an http:// or https:// URL")
        );
        assert_eq!(
            url_problem("127.0.0.1:3001"),
            Some("is not an http:// or https:// URL")
        );
        assert_eq!(url_problem("http:///mcp"), Some("has no host"));
        assert_eq!(url_problem("https://:443/"), Some("has no host"));
        assert_eq!(url_problem("http://a b/"), Some("contains whitespace"));
    }

    #[test]
    fn paths_that_climb_out_escape() {
        assert!(!escapes("data"));
        assert!(!escapes("./data/../other"));
        assert!(!escapes(""));
        assert!(escapes(".."));
        assert!(escapes("data/../../x"));
        assert!(escapes("/etc"));
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("GITHUB_TOKEN"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
        assert!(!is_env_name(""));
    }

    #[test]
    fn example_prefixes_are_valid() {
        assert_eq!(example_prefix("GitHub.com"), "github_com");
        assert_eq!(example_prefix("a__b_"), "a_b");
        assert_eq!(example_prefix("--"), "my-server");
        assert_eq!(example_prefix(&"x".repeat(60)).len(), MAX_PREFIX_LEN);
    }
}
