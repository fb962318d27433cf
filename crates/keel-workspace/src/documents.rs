//! Documents and their envelope (`apiVersion`, `kind`, `metadata.name`, `spec`): reading the
//! envelope of each YAML document, identifying documents by (kind, name), rejecting
//! duplicates among the workspace's own files and merging overlay documents into the
//! documents they name (maps merge recursively; lists and scalars are replaced).

use std::collections::HashMap;
use std::fmt;

use crate::Diagnostic;
use crate::suggest::{closest, list};
use crate::yaml::{Loc, Node, NodeValue};

/// The only supported `apiVersion`.
pub(crate) const API_VERSION: &str = "keel/v1";

const ENVELOPE_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "spec"];
const METADATA_FIELDS: &[&str] = &["name"];
const UNSUPPORTED_KINDS: &[&str] = &["Skill"];

/// The kinds of document Keel reads, in explain order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Runtime,
    Model,
    Tool,
    Agent,
    Policy,
    Hook,
    McpServer,
    Memory,
    Workflow,
    Eval,
    RemoteAgent,
}

impl Kind {
    pub(crate) const ALL: [Kind; 11] = [
        Kind::Runtime,
        Kind::Model,
        Kind::Tool,
        Kind::Agent,
        Kind::Policy,
        Kind::Hook,
        Kind::McpServer,
        Kind::Memory,
        Kind::Workflow,
        Kind::Eval,
        Kind::RemoteAgent,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Runtime => "Runtime",
            Kind::Model => "Model",
            Kind::Tool => "Tool",
            Kind::Agent => "Agent",
            Kind::Policy => "Policy",
            Kind::Hook => "Hook",
            Kind::McpServer => "McpServer",
            Kind::Memory => "Memory",
            Kind::Workflow => "Workflow",
            Kind::Eval => "Eval",
            Kind::RemoteAgent => "RemoteAgent",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One document after its envelope was read.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub kind: Kind,
    /// `metadata.name`; `default` for a Runtime without one.
    pub name: String,
    /// Where the name is written (the document start for a nameless Runtime).
    pub name_loc: Loc,
    /// Where the document starts.
    pub loc: Loc,
    /// Where the `spec:` key is written (the document start when there is none).
    pub spec_loc: Loc,
    /// The `spec` mapping, if the document has one.
    pub spec: Option<Node>,
}

impl Document {
    /// `` Agent `assistant` ``, for messages.
    pub(crate) fn label(&self) -> String {
        format!("{} `{}`", self.kind, self.name)
    }

    fn identity(&self) -> (Kind, String) {
        // There is at most one Runtime, so its name does not identify it.
        match self.kind {
            Kind::Runtime => (Kind::Runtime, String::new()),
            kind => (kind, self.name.clone()),
        }
    }
}

/// Reads the envelope of one YAML document. `None` when the document cannot be identified
/// (the reasons are in `diagnostics`).
pub(crate) fn read_envelope(root: Node, diagnostics: &mut Vec<Diagnostic>) -> Option<Document> {
    let NodeValue::Map(entries) = root.value else {
        diagnostics.push(root.loc.error(
            "a document must be a mapping",
            Some("start it with `apiVersion: keel/v1` and `kind:`".into()),
        ));
        return None;
    };
    let loc = root.loc;
    let mut api_version = None;
    let mut kind_node = None;
    let mut metadata = None;
    let mut spec = None;
    let mut spec_loc = loc.clone();
    let mut unknown = Vec::new();
    for entry in entries {
        match entry.key.as_str() {
            "apiVersion" => api_version = Some(entry.value),
            "kind" => kind_node = Some(entry.value),
            "metadata" => metadata = Some(entry.value),
            "spec" => {
                spec_loc = entry.key_loc;
                spec = Some(entry.value);
            }
            _ => unknown.push((entry.key, entry.key_loc)),
        }
    }
    check_api_version(api_version.as_ref(), &loc, diagnostics);
    let kind = read_kind(kind_node.as_ref(), &loc, diagnostics);
    let name = kind.and_then(|kind| read_name(kind, metadata.as_ref(), &loc, diagnostics));
    let label = match (kind, &name) {
        (Some(kind), Some((name, _))) => format!("{kind} `{name}`"),
        _ => "document".into(),
    };
    for (key, key_loc) in unknown {
        diagnostics.push(key_loc.error(
            format!("unknown field `{key}` in {label}"),
            Some(field_hint(&key, ENVELOPE_FIELDS)),
        ));
    }
    let (kind, (name, name_loc)) = (kind?, name?);
    let spec = match spec {
        Some(node) if node.is_null() => Some(Node::empty_map(node.loc)),
        // A Runtime without a spec is all defaults.
        None if kind == Kind::Runtime => Some(Node::empty_map(loc.clone())),
        spec => spec,
    };
    Some(Document {
        kind,
        name,
        name_loc,
        loc,
        spec_loc,
        spec,
    })
}

fn check_api_version(node: Option<&Node>, doc: &Loc, diagnostics: &mut Vec<Diagnostic>) {
    match node {
        None => diagnostics.push(doc.error(
            "missing `apiVersion`",
            Some(format!("add `apiVersion: {API_VERSION}`")),
        )),
        Some(node) if node.as_str() == Some(API_VERSION) => {}
        Some(node) => diagnostics.push(node.loc.error(
            format!("unsupported apiVersion `{}`", scalar_text(node)),
            Some(format!("use `apiVersion: {API_VERSION}`")),
        )),
    }
}

fn read_kind(node: Option<&Node>, doc: &Loc, diagnostics: &mut Vec<Diagnostic>) -> Option<Kind> {
    let valid = Kind::ALL.map(Kind::as_str);
    let Some(node) = node else {
        diagnostics.push(doc.error(
            "missing `kind`",
            Some(format!("add `kind:` with one of {}", list(valid))),
        ));
        return None;
    };
    let Some(text) = node.as_str() else {
        diagnostics.push(node.loc.error(
            "`kind` must be a string",
            Some(format!("use one of {}", list(valid))),
        ));
        return None;
    };
    if let Some(kind) = Kind::parse(text) {
        return Some(kind);
    }
    if UNSUPPORTED_KINDS.contains(&text) {
        diagnostics.push(node.loc.error(
            format!("kind `{text}` is not supported yet"),
            Some(format!("supported kinds are {}", list(valid))),
        ));
        return None;
    }
    let known = valid.iter().chain(UNSUPPORTED_KINDS).copied();
    let hint = match closest(text, known, 2) {
        Some(near) => format!("did you mean `{near}`? valid kinds are {}", list(valid)),
        None => format!("valid kinds are {}", list(valid)),
    };
    diagnostics.push(node.loc.error(format!("unknown kind `{text}`"), Some(hint)));
    None
}

fn read_name(
    kind: Kind,
    metadata: Option<&Node>,
    doc: &Loc,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(String, Loc)> {
    let name_node = match metadata {
        Some(meta) => {
            match meta.entries() {
                Some(entries) => {
                    for entry in entries.iter().filter(|e| e.key != "name") {
                        diagnostics.push(entry.key_loc.error(
                            format!("unknown field `{}` in `metadata`", entry.key),
                            Some(field_hint(&entry.key, METADATA_FIELDS)),
                        ));
                    }
                }
                None if meta.is_null() => {}
                None => {
                    diagnostics.push(meta.loc.error(
                        "`metadata` must be a mapping",
                        Some("write `metadata: { name: my-name }`".into()),
                    ));
                    return None;
                }
            }
            meta.get("name")
        }
        None => None,
    };
    let Some(name_node) = name_node else {
        if kind == Kind::Runtime {
            return Some(("default".into(), doc.clone()));
        }
        let at = metadata.map_or(doc, |m| &m.loc);
        diagnostics.push(at.error(
            format!("missing `metadata.name` in {kind} document"),
            Some("add `metadata: { name: my-name }`".into()),
        ));
        return None;
    };
    let Some(name) = name_node.as_str() else {
        diagnostics.push(name_node.loc.error(
            format!("`metadata.name` of {kind} must be a string"),
            Some(format!("quote it: \"{}\"", scalar_text(name_node))),
        ));
        return None;
    };
    if !is_valid_name(name) {
        diagnostics.push(name_node.loc.error(
            format!("invalid name `{name}` for {kind}"),
            Some(
                "names start with a letter or digit and contain only letters, digits, `_`, `.` and `-`"
                    .into(),
            ),
        ));
    }
    Some((name.to_owned(), name_node.loc.clone()))
}

/// `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
pub(crate) fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// "did you mean …?" or the list of valid fields.
pub(crate) fn field_hint(field: &str, valid: &[&str]) -> String {
    match closest(field, valid.iter().copied(), 2) {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!("valid fields are {}", list(valid.iter().copied())),
    }
}

fn scalar_text(node: &Node) -> String {
    match &node.value {
        NodeValue::Scalar(s) => s.text.clone(),
        NodeValue::Seq(_) => "[…]".into(),
        NodeValue::Map(_) => "{…}".into(),
    }
}

/// The documents of a workspace, in the order they were first seen.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    pub list: Vec<Document>,
    index: HashMap<(Kind, String), usize>,
    /// A file could not be read: the documents it holds are unknown.
    partial: bool,
}

impl Documents {
    /// Adds a document from the workspace's own files; a second document with the same
    /// identity is an error.
    pub(crate) fn add_own(&mut self, doc: Document, diagnostics: &mut Vec<Diagnostic>) {
        let identity = doc.identity();
        if let Some(&i) = self.index.get(&identity) {
            let first = &self.list[i];
            let (message, hint) = if doc.kind == Kind::Runtime {
                (
                    format!(
                        "more than one Runtime document; the first is at {}",
                        first.loc.short()
                    ),
                    "a workspace has at most one Runtime; change it from an overlay instead",
                )
            } else {
                (
                    format!(
                        "duplicate {}; it is first defined at {}",
                        doc.label(),
                        first.name_loc.short()
                    ),
                    "rename one of them; to change a document, use an overlay",
                )
            };
            diagnostics.push(doc.name_loc.error(message, Some(hint.into())));
            return;
        }
        self.index.insert(identity, self.list.len());
        self.list.push(doc);
    }

    /// Adds an overlay document: merged into the document it names, or added.
    pub(crate) fn add_overlay(&mut self, doc: Document) {
        let identity = doc.identity();
        let Some(&i) = self.index.get(&identity) else {
            self.index.insert(identity, self.list.len());
            self.list.push(doc);
            return;
        };
        let base = &mut self.list[i];
        match (&mut base.spec, doc.spec) {
            (Some(spec), Some(overlay)) => merge(spec, overlay),
            (spec @ None, overlay) => *spec = overlay,
            (Some(_), None) => {}
        }
    }

    /// Marks the documents as partial: a file could not be read (or is not UTF-8), so a
    /// reference to a document not found may name one in that file, and is not reported.
    pub(crate) fn set_partial(&mut self) {
        self.partial = true;
    }

    /// Whether a document of `kind` named `name` exists — or may exist, in a file that could
    /// not be read (see [`Documents::set_partial`]).
    pub(crate) fn contains(&self, kind: Kind, name: &str) -> bool {
        self.partial || self.index.contains_key(&(kind, name.to_owned()))
    }

    /// The document of `kind` named `name`.
    pub(crate) fn get(&self, kind: Kind, name: &str) -> Option<&Document> {
        let &i = self.index.get(&(kind, name.to_owned()))?;
        self.list.get(i)
    }

    /// Whether an agent named `name` is declared: an `Agent` or a `RemoteAgent`.
    pub(crate) fn has_agent(&self, name: &str) -> bool {
        self.contains(Kind::Agent, name) || self.contains(Kind::RemoteAgent, name)
    }

    /// Names of the agents: `Agent` and `RemoteAgent` documents.
    pub(crate) fn agent_names(&self) -> impl Iterator<Item = &str> {
        self.list
            .iter()
            .filter(|d| matches!(d.kind, Kind::Agent | Kind::RemoteAgent))
            .map(|d| d.name.as_str())
    }

    /// Names of the documents of `kind`.
    pub(crate) fn names(&self, kind: Kind) -> impl Iterator<Item = &str> {
        self.list
            .iter()
            .filter(move |d| d.kind == kind)
            .map(|d| d.name.as_str())
    }
}

/// Merges `overlay` into `base`: mappings merge key by key, everything else is replaced.
pub(crate) fn merge(base: &mut Node, overlay: Node) {
    match (&mut base.value, overlay.value) {
        (NodeValue::Map(base_entries), NodeValue::Map(overlay_entries)) => {
            for entry in overlay_entries {
                match base_entries.iter_mut().find(|e| e.key == entry.key) {
                    Some(existing) => merge(&mut existing.value, entry.value),
                    None => base_entries.push(entry),
                }
            }
        }
        (_, value) => {
            base.value = value;
            base.loc = overlay.loc;
            base.env_var = overlay.env_var;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::yaml::{Source, parse_documents};

    fn node(text: &str, overlay: bool) -> Node {
        let source = Arc::new(Source {
            file: PathBuf::from(if overlay { "o.yaml" } else { "b.yaml" }),
            overlay,
        });
        parse_documents(text, &source).documents.remove(0)
    }

    #[test]
    fn maps_merge_and_lists_are_replaced() {
        let mut base = node("a: {x: 1, y: 2}\nl: [1, 2]\ns: base\n", false);
        merge(&mut base, node("a: {y: 3, z: 4}\nl: [9]\nn: new\n", true));
        assert_eq!(
            base.to_json(),
            json!({"a": {"x": 1, "y": 3, "z": 4}, "l": [9], "s": "base", "n": "new"})
        );
        let y = base.at(&[
            crate::yaml::Seg::Key("a".into()),
            crate::yaml::Seg::Key("y".into()),
        ]);
        assert!(y.unwrap().loc.source.overlay);
        let x = base.at(&[
            crate::yaml::Seg::Key("a".into()),
            crate::yaml::Seg::Key("x".into()),
        ]);
        assert!(!x.unwrap().loc.source.overlay);
    }

    #[test]
    fn names_follow_the_pattern() {
        assert!(is_valid_name("assistant"));
        assert!(is_valid_name("gpt-4o.mini_2"));
        assert!(is_valid_name("0day"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("-x"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("a/b"));
    }
}
