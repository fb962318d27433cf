//! How an MCP server's tool names become model tool names (`docs/mcp.md#tool-names`).
//!
//! A model tool name is at most 64 characters from `[a-zA-Z0-9_-]`. A server's tool is offered
//! as `mcp__<prefix>__<name>`; when that is not a valid model name, its name is mapped, the
//! same way every time:
//!
//! 1. every character outside `[a-zA-Z0-9_-]` becomes `_` (`files/read` → `files_read`);
//! 2. a name still too long is cut so that, with `_` and 8 hex digits of a hash of the
//!    original name (FNV-1a, 32 bits), the whole name is 64 characters;
//! 3. a name another tool of the server already has (a tool whose own name is valid keeps it;
//!    the others in the order of their original names) gets that same hash suffix instead.
//!
//! A tool with an empty name cannot be called by any name a model could send back: it is
//! left out, with a warning and a note in the server's status. The server is always called
//! with the original name; each mapping is reported (`keel mcp tools`, `keel mcp list
//! --json`, `/api/inventory`).

use serde::Serialize;

use super::tool::RemoteTool;

/// The longest model tool name.
pub(crate) const MAX_NAME: usize = 64;

/// A tool offered under another name than its server's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRename {
    /// The name the server gives it (and is called with).
    pub original: String,
    /// The name models see, `mcp__<prefix>__…`.
    pub name: String,
}

/// A server's tools with the names models see.
#[derive(Debug, Default)]
pub(crate) struct Named {
    /// Each offered tool and its model name, in the server's order.
    pub(crate) tools: Vec<(String, RemoteTool)>,
    pub(crate) renamed: Vec<ToolRename>,
    /// Why a tool was left out.
    pub(crate) left_out: Vec<String>,
}

/// Names `tools` under `prefix` (`mcp__<prefix>__`).
pub(crate) fn name_tools(prefix: &str, tools: Vec<RemoteTool>) -> Named {
    let mut named = Named::default();
    let mut taken: Vec<String> = Vec::new();
    let mut order: Vec<usize> = (0..tools.len()).collect();
    // Valid names first, then the others by their original names.
    order.sort_by(|&a, &b| {
        let invalid = |i: usize| !is_valid(&format!("{prefix}{}", tools[i].name));
        (invalid(a), &tools[a].name).cmp(&(invalid(b), &tools[b].name))
    });
    let mut names: Vec<Option<String>> = vec![None; tools.len()];
    for i in order {
        let original = &tools[i].name;
        if original.is_empty() {
            named
                .left_out
                .push("a tool with an empty name (no model could call it)".to_owned());
            continue;
        }
        let mut name = mapped(prefix, original);
        if taken.contains(&name) {
            name = hashed(prefix, &sanitized(original), original);
        }
        let mut n = 2;
        while taken.contains(&name) {
            name = hashed(prefix, &format!("{}_{n}", sanitized(original)), original);
            n += 1;
        }
        taken.push(name.clone());
        names[i] = Some(name);
    }
    for (remote, name) in tools.into_iter().zip(names) {
        let Some(name) = name else { continue };
        if name != format!("{prefix}{}", remote.name) {
            named.renamed.push(ToolRename {
                original: remote.name.clone(),
                name: name.clone(),
            });
        }
        named.tools.push((name, remote));
    }
    named
}

/// Whether `name` is a valid model tool name.
pub(crate) fn is_valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && name.bytes().all(valid_byte)
}

fn valid_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn sanitized(original: &str) -> String {
    original
        .chars()
        .map(|c| match c.is_ascii() && valid_byte(c as u8) {
            true => c,
            false => '_',
        })
        .collect()
}

/// The model name of `original` before collisions: sanitized, and hashed when too long.
fn mapped(prefix: &str, original: &str) -> String {
    let name = format!("{prefix}{}", sanitized(original));
    match name.len() <= MAX_NAME {
        true => name,
        false => hashed(prefix, &sanitized(original), original),
    }
}

/// `prefix` + `stem` cut to fit + `_` + the hash of `original`.
fn hashed(prefix: &str, stem: &str, original: &str) -> String {
    let suffix = format!("_{:08x}", fnv1a(original));
    let room = MAX_NAME.saturating_sub(prefix.len() + suffix.len());
    // `stem` is ASCII (sanitized), so any cut is on a character boundary.
    let stem = &stem[..stem.len().min(room)];
    format!("{prefix}{stem}{suffix}")
}

/// FNV-1a, 32 bits: small, stable across versions and platforms.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str) -> RemoteTool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
            .unwrap()
    }

    fn names(tools: &[&str]) -> Named {
        name_tools("mcp__s__", tools.iter().map(|n| remote(n)).collect())
    }

    #[test]
    fn valid_names_stay_and_invalid_ones_are_mapped_the_same_way_every_time() {
        let long = "x".repeat(80);
        let named = names(&["read", "files/read", "files_read", "", &long, "caf\u{e9}"]);
        let got: Vec<(&str, &str)> = named
            .tools
            .iter()
            .map(|(name, r)| (r.name.as_str(), name.as_str()))
            .collect();
        let hash = |s: &str| format!("{:08x}", fnv1a(s));
        let long_name = format!("mcp__s__{}_{}", "x".repeat(64 - 8 - 9), hash(&long));
        assert_eq!(
            got,
            vec![
                ("read", "mcp__s__read"),
                // `files_read` is valid and keeps its name; `files/read` gets the suffix.
                (
                    "files/read",
                    format!("mcp__s__files_read_{}", hash("files/read")).as_str()
                ),
                ("files_read", "mcp__s__files_read"),
                (long.as_str(), long_name.as_str()),
                ("caf\u{e9}", "mcp__s__caf_"),
            ]
        );
        assert!(named.tools.iter().all(|(name, _)| is_valid(name)));
        assert_eq!(long_name.len(), 64);
        assert_eq!(named.renamed.len(), 3);
        assert_eq!(named.left_out.len(), 1);
        // Deterministic, whatever the order.
        let again = names(&["caf\u{e9}", &long, "", "files_read", "files/read", "read"]);
        let mut first: Vec<_> = named
            .tools
            .iter()
            .map(|(n, r)| (n.clone(), r.name.clone()))
            .collect();
        let mut second: Vec<_> = again
            .tools
            .iter()
            .map(|(n, r)| (n.clone(), r.name.clone()))
            .collect();
        first.sort();
        second.sort();
        assert_eq!(first, second);
    }
}
