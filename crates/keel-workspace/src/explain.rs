//! `keel config explain`: the effective value of every leaf field of every document and where
//! it came from. The typed spec is serialized back to JSON (so defaulted fields appear) and
//! walked in serialization order; a leaf that has a node in the merged YAML tree takes that
//! node's origin (file, overlay or env), any other leaf is a default.

use serde_json::Value;

use crate::documents::Kind;
use crate::yaml::{Node, Seg, path_string};
use crate::{ExplainEntry, Origin};

/// Appends the entries of one document: `Kind/name.spec…` for every leaf of `value`.
pub(crate) fn explain_document(
    kind: Kind,
    name: &str,
    spec: Option<&Node>,
    value: &Value,
    out: &mut Vec<ExplainEntry>,
) {
    let prefix = format!("{kind}/{name}.spec");
    let mut path = Vec::new();
    walk(&prefix, &mut path, value, spec, out);
}

fn walk(
    prefix: &str,
    path: &mut Vec<Seg>,
    value: &Value,
    node: Option<&Node>,
    out: &mut Vec<ExplainEntry>,
) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let seg = Seg::Key(key.clone());
                let child_node = node.and_then(|n| n.child(&seg));
                path.push(seg);
                walk(prefix, path, child, child_node, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                let seg = Seg::Index(i);
                let child_node = node.and_then(|n| n.child(&seg));
                path.push(seg);
                walk(prefix, path, child, child_node, out);
                path.pop();
            }
        }
        leaf => out.push(ExplainEntry {
            path: path_string(prefix, path),
            value: leaf.clone(),
            origin: node.map_or(Origin::Default, origin_of),
        }),
    }
}

fn origin_of(node: &Node) -> Origin {
    match &node.env_var {
        Some(var) => Origin::Env {
            var: var.clone(),
            file: node.loc.source.file.clone(),
            line: node.loc.line,
        },
        None => node.loc.origin(),
    }
}
