//! A located YAML tree: every scalar, sequence, mapping and mapping key keeps the file, line
//! and column it was written at, so later stages (merge, interpolation, validation, explain)
//! can point at the exact place of a problem or a value.
//!
//! Built from `saphyr-parser` events by [`parse_documents`]; scalars stay as text until
//! [`Node::to_json`] resolves them with the YAML 1.2 core schema (quoted and block scalars are
//! always strings). Anchors and aliases are supported; an alias copies the anchored node.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};
use serde_json::{Map, Number, Value};

use crate::{Diagnostic, Origin};

/// Deepest nesting of sequences and mappings accepted in one document.
const MAX_DEPTH: usize = 128;
/// Most nodes one file may expand to (bounds alias expansion).
const MAX_NODES: usize = 250_000;

/// The file a node comes from, as shown to people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// Relative to the workspace root when inside it, otherwise as given.
    pub file: PathBuf,
    /// Whether the file is an overlay.
    pub overlay: bool,
}

/// A position in a source file (1-based line and column).
#[derive(Debug, Clone)]
pub(crate) struct Loc {
    pub source: Arc<Source>,
    pub line: usize,
    pub column: usize,
}

impl Loc {
    fn at(source: &Arc<Source>, span: Span) -> Self {
        Self {
            source: Arc::clone(source),
            line: span.start.line().max(1),
            column: span.start.col() + 1,
        }
    }

    /// The first character of `source`.
    pub(crate) fn start_of(source: &Arc<Source>) -> Self {
        Self {
            source: Arc::clone(source),
            line: 1,
            column: 1,
        }
    }

    /// A diagnostic at this position.
    pub(crate) fn error(&self, message: impl Into<String>, hint: Option<String>) -> Diagnostic {
        Diagnostic {
            file: self.source.file.clone(),
            line: self.line,
            column: self.column,
            message: message.into(),
            hint,
        }
    }

    /// `file:line`, for messages that mention another place.
    pub(crate) fn short(&self) -> String {
        format!("{}:{}", self.source.file.display(), self.line)
    }

    /// Where a value written here comes from.
    pub(crate) fn origin(&self) -> Origin {
        let file = self.source.file.clone();
        if self.source.overlay {
            Origin::Overlay {
                file,
                line: self.line,
            }
        } else {
            Origin::File {
                file,
                line: self.line,
            }
        }
    }
}

/// A YAML node with its position.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub loc: Loc,
    pub value: NodeValue,
    /// The first environment variable interpolated into this scalar, if any.
    pub env_var: Option<String>,
}

/// The shape of a node.
#[derive(Debug, Clone)]
pub(crate) enum NodeValue {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// A scalar as written; resolved to a JSON value on demand.
#[derive(Debug, Clone)]
pub(crate) struct Scalar {
    pub text: String,
    /// Plain scalars are resolved with the core schema; others are always strings.
    pub plain: bool,
}

/// One `key: value` of a mapping.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub key: String,
    pub key_loc: Loc,
    pub value: Node,
}

/// One step of a path into a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// `prefix.key[0].other` — keys that are not simple words are quoted: `prefix["a.b"]`.
pub(crate) fn path_string(prefix: &str, path: &[Seg]) -> String {
    let mut out = prefix.to_owned();
    for seg in path {
        match seg {
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
            Seg::Key(key) if is_simple_key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Seg::Key(key) => {
                let quoted = Value::String(key.clone()).to_string();
                out.push_str(&format!("[{quoted}]"));
            }
        }
    }
    out
}

fn is_simple_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Node {
    /// An empty mapping at `loc`.
    pub(crate) fn empty_map(loc: Loc) -> Self {
        Self {
            loc,
            value: NodeValue::Map(Vec::new()),
            env_var: None,
        }
    }

    /// The mapping entries, if this is a mapping.
    pub(crate) fn entries(&self) -> Option<&[Entry]> {
        match &self.value {
            NodeValue::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The entry for `key`, if this is a mapping that has it.
    pub(crate) fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries()?.iter().find(|e| e.key == key)
    }

    /// The value for `key`, if this is a mapping that has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// The string value of a scalar that resolves to a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Scalar(s) if matches!(s.resolve(), Value::String(_)) => Some(&s.text),
            _ => None,
        }
    }

    /// The number of a scalar that resolves to one.
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match &self.value {
            NodeValue::Scalar(s) => s.resolve().as_f64(),
            _ => None,
        }
    }

    /// Whether this is a null scalar (`~`, `null` or nothing).
    pub(crate) fn is_null(&self) -> bool {
        matches!(&self.value, NodeValue::Scalar(s) if s.resolve().is_null())
    }

    /// The node at `path`, if every step exists. Numeric steps also match mapping keys.
    #[cfg(test)]
    pub(crate) fn at(&self, path: &[Seg]) -> Option<&Node> {
        let mut node = self;
        for seg in path {
            node = node.child(seg)?;
        }
        Some(node)
    }

    /// The deepest node along `path` that exists (at least `self`).
    pub(crate) fn deepest(&self, path: &[Seg]) -> &Node {
        let mut node = self;
        for seg in path {
            match node.child(seg) {
                Some(child) => node = child,
                None => break,
            }
        }
        node
    }

    /// The child at one step, if it exists.
    pub(crate) fn child(&self, seg: &Seg) -> Option<&Node> {
        match (&self.value, seg) {
            (NodeValue::Map(_), Seg::Key(key)) => self.get(key),
            (NodeValue::Map(_), Seg::Index(i)) => self.get(&i.to_string()),
            (NodeValue::Seq(items), Seg::Index(i)) => items.get(*i),
            _ => None,
        }
    }

    /// The node as JSON, scalars resolved with the YAML core schema.
    pub(crate) fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Scalar(s) => s.resolve(),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                let mut map = Map::new();
                for e in entries {
                    map.insert(e.key.clone(), e.value.to_json());
                }
                Value::Object(map)
            }
        }
    }

    fn size(&self) -> usize {
        match &self.value {
            NodeValue::Scalar(_) => 1,
            NodeValue::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            NodeValue::Map(entries) => 1 + entries.iter().map(|e| e.value.size()).sum::<usize>(),
        }
    }
}

impl Scalar {
    /// The scalar's JSON value.
    pub(crate) fn resolve(&self) -> Value {
        if self.plain {
            resolve_plain(&self.text)
        } else {
            Value::String(self.text.clone())
        }
    }
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
pub(crate) fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = resolve_int(text) {
        return Value::Number(n);
    }
    if looks_like_float(text)
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

fn resolve_int(text: &str) -> Option<Number> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(hex) = digits.strip_prefix("0x").filter(|_| text == digits) {
        (16, hex)
    } else if let Some(oct) = digits.strip_prefix("0o").filter(|_| text == digits) {
        (8, oct)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        let value = i64::try_from(magnitude).ok()?;
        Some(Number::from(-value))
    } else {
        Some(Number::from(magnitude))
    }
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn looks_like_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - frac_start;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < bytes.len() && matches!(bytes[i], b'e' | b'E') {
        i += 1;
        if matches!(bytes.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let exp_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == bytes.len()
}

/// The documents of one file, and what went wrong while reading them.
#[derive(Debug, Default)]
pub(crate) struct ParsedFile {
    /// Non-empty documents, in order.
    pub documents: Vec<Node>,
    pub errors: Vec<Diagnostic>,
}

/// Parses every document of `text`. A syntax error stops the file; the documents completed
/// before it are kept.
pub(crate) fn parse_documents(text: &str, source: &Arc<Source>) -> ParsedFile {
    // The parser is young; a panic inside it must not take the caller down with it.
    match catch_unwind(AssertUnwindSafe(|| Builder::new(source, text).run())) {
        Ok(parsed) => parsed,
        Err(_) => ParsedFile {
            documents: Vec::new(),
            errors: vec![Loc::start_of(source).error("the YAML parser failed on this file", None)],
        },
    }
}

enum Frame {
    Seq {
        loc: Loc,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        loc: Loc,
        anchor: usize,
        entries: Vec<Entry>,
        key: KeyState,
    },
}

enum KeyState {
    /// The next node is a key.
    Expecting,
    /// The next node is the value of this key.
    Have(String, Loc),
    /// The next node is the value of a rejected key; drop it.
    Skip,
}

struct Builder<'s> {
    source: &'s Arc<Source>,
    text: &'s str,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    out: ParsedFile,
}

/// Stops the file: the rest of it cannot be read.
struct Fatal(Diagnostic);

impl<'s> Builder<'s> {
    fn new(source: &'s Arc<Source>, text: &'s str) -> Self {
        Self {
            source,
            text,
            stack: Vec::new(),
            anchors: HashMap::new(),
            nodes: 0,
            out: ParsedFile::default(),
        }
    }

    fn run(mut self) -> ParsedFile {
        let mut parser = Parser::new_from_str(self.text);
        while let Some(next) = parser.next_event() {
            let result = match next {
                Ok((event, span)) => self.on_event(event, span),
                Err(e) => {
                    let loc = Loc {
                        source: Arc::clone(self.source),
                        line: e.marker().line().max(1),
                        column: e.marker().col() + 1,
                    };
                    Err(Fatal(
                        loc.error(format!("invalid YAML: {}", e.info()), None),
                    ))
                }
            };
            if let Err(Fatal(diagnostic)) = result {
                self.out.errors.push(diagnostic);
                break;
            }
        }
        self.out
    }

    fn loc(&self, span: Span) -> Loc {
        Loc::at(self.source, span)
    }

    fn on_event(&mut self, event: Event<'_>, span: Span) -> Result<(), Fatal> {
        match event {
            Event::DocumentStart(_) => {
                self.stack.clear();
                self.anchors.clear();
            }
            Event::Scalar(text, style, anchor, tag) => {
                if self.stack.is_empty() && self.is_empty_document(&text, style, span) {
                    return Ok(());
                }
                let loc = self.loc(span);
                let mut plain = style == ScalarStyle::Plain;
                if let Some(tag) = tag.as_deref() {
                    if tag.is_yaml_core_schema() && tag.suffix == "str" {
                        plain = false;
                    } else {
                        self.check_tag(tag, &loc, &["null", "bool", "int", "float"]);
                    }
                }
                let node = Node {
                    loc,
                    value: NodeValue::Scalar(Scalar {
                        text: text.into_owned(),
                        plain,
                    }),
                    env_var: None,
                };
                self.complete(node, anchor)?;
            }
            Event::SequenceStart(anchor, tag) => {
                let loc = self.open(span)?;
                if let Some(tag) = tag.as_deref() {
                    self.check_tag(tag, &loc, &["seq"]);
                }
                self.stack.push(Frame::Seq {
                    loc,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(anchor, tag) => {
                let loc = self.open(span)?;
                if let Some(tag) = tag.as_deref() {
                    self.check_tag(tag, &loc, &["map"]);
                }
                self.stack.push(Frame::Map {
                    loc,
                    anchor,
                    entries: Vec::new(),
                    key: KeyState::Expecting,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { loc, anchor, items }) => (
                        Node {
                            loc,
                            value: NodeValue::Seq(items),
                            env_var: None,
                        },
                        anchor,
                    ),
                    Some(Frame::Map {
                        loc,
                        anchor,
                        entries,
                        ..
                    }) => (
                        Node {
                            loc,
                            value: NodeValue::Map(entries),
                            env_var: None,
                        },
                        anchor,
                    ),
                    None => return Ok(()),
                };
                self.complete(node, anchor)?;
            }
            Event::Alias(id) => {
                let loc = self.loc(span);
                let Some(node) = self.anchors.get(&id).cloned() else {
                    return Err(Fatal(loc.error(
                        "alias refers to an anchor that is not defined before it",
                        None,
                    )));
                };
                self.nodes += node.size();
                if self.nodes > MAX_NODES {
                    return Err(Fatal(loc.error(
                        format!("aliases expand this file beyond {MAX_NODES} nodes"),
                        Some("avoid nesting aliases of aliases".into()),
                    )));
                }
                // The copy keeps the anchored node's positions: that is where it was written.
                self.complete(node, 0)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// The parser reports a document with no content as a `~` scalar that was not written.
    fn is_empty_document(&self, text: &str, style: ScalarStyle, span: Span) -> bool {
        style == ScalarStyle::Plain
            && text == "~"
            && self.text.chars().nth(span.start.index()) != Some('~')
    }

    fn open(&mut self, span: Span) -> Result<Loc, Fatal> {
        let loc = self.loc(span);
        if self.stack.len() >= MAX_DEPTH {
            return Err(Fatal(
                loc.error(format!("nesting deeper than {MAX_DEPTH} levels"), None),
            ));
        }
        Ok(loc)
    }

    fn check_tag(&mut self, tag: &Tag, loc: &Loc, allowed: &[&str]) {
        if tag.is_yaml_core_schema() && allowed.contains(&tag.suffix.as_str()) {
            return;
        }
        self.out.errors.push(loc.error(
            format!("unsupported tag `{tag}`"),
            Some("remove the tag; Keel reads plain YAML values".into()),
        ));
    }

    /// Places a finished node into its parent (or ends the document).
    fn complete(&mut self, node: Node, anchor: usize) -> Result<(), Fatal> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Fatal(
                node.loc
                    .error(format!("file has more than {MAX_NODES} nodes"), None),
            ));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let errors = &mut self.out.errors;
        match self.stack.last_mut() {
            None => self.out.documents.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => {
                match std::mem::replace(key, KeyState::Expecting) {
                    KeyState::Expecting => *key = key_state_for(node, entries, errors),
                    KeyState::Have(name, key_loc) => entries.push(Entry {
                        key: name,
                        key_loc,
                        value: node,
                    }),
                    KeyState::Skip => {}
                }
            }
        }
        Ok(())
    }
}

/// Decides what a node in key position becomes: a key, or a rejected key.
fn key_state_for(node: Node, entries: &[Entry], errors: &mut Vec<Diagnostic>) -> KeyState {
    let NodeValue::Scalar(scalar) = node.value else {
        errors.push(node.loc.error(
            "mapping keys must be plain text",
            Some("lists and mappings cannot be used as keys".into()),
        ));
        return KeyState::Skip;
    };
    let key = match scalar.resolve() {
        Value::String(s) => s,
        Value::Null => {
            errors.push(node.loc.error("empty mapping key", None));
            return KeyState::Skip;
        }
        _ => scalar.text,
    };
    if let Some(first) = entries.iter().find(|e| e.key == key) {
        errors.push(node.loc.error(
            format!("duplicate key `{key}`"),
            Some(format!(
                "`{key}` is already set at line {}",
                first.key_loc.line
            )),
        ));
        return KeyState::Skip;
    }
    KeyState::Have(key, node.loc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source() -> Arc<Source> {
        Arc::new(Source {
            file: PathBuf::from("t.yaml"),
            overlay: false,
        })
    }

    fn one(text: &str) -> Node {
        let parsed = parse_documents(text, &source());
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(parsed.documents.len(), 1);
        parsed.documents.into_iter().next().unwrap()
    }

    #[test]
    fn core_schema_scalars_resolve_to_json_types() {
        let node = one(
            "a: ~\nb: \nc: true\nd: False\ne: 42\nf: -7\ng: 0x1F\nh: 0o17\ni: 1.5\nj: 1e3\n\
             k: .5\nl: hello\nm: '42'\nn: \"true\"\no: !!str 12\np: |\n  text\nq: 1.2.3\nr: .inf\n",
        );
        assert_eq!(
            node.to_json(),
            json!({
                "a": null, "b": null, "c": true, "d": false, "e": 42, "f": -7, "g": 31,
                "h": 15, "i": 1.5, "j": 1000.0, "k": 0.5, "l": "hello", "m": "42",
                "n": "true", "o": "12", "p": "text\n", "q": "1.2.3", "r": ".inf"
            })
        );
    }

    #[test]
    fn keys_and_values_have_one_based_positions() {
        let node = one("top:\n  inner: [a, 'b']\n");
        let top = node.entry("top").unwrap();
        assert_eq!((top.key_loc.line, top.key_loc.column), (1, 1));
        let inner = top.value.entry("inner").unwrap();
        assert_eq!((inner.key_loc.line, inner.key_loc.column), (2, 3));
        let b = inner.value.at(&[Seg::Index(1)]).unwrap();
        assert_eq!((b.loc.line, b.loc.column), (2, 14));
    }

    #[test]
    fn several_documents_and_empty_ones() {
        let parsed = parse_documents(
            "---\na: 1\n---\n---\n# only a comment\n---\nb: 2\n",
            &source(),
        );
        assert!(parsed.errors.is_empty());
        assert_eq!(parsed.documents.len(), 2);
    }

    #[test]
    fn aliases_copy_the_anchored_node() {
        let node = one("base: &b {x: 1}\ncopy: *b\n");
        assert_eq!(node.to_json(), json!({"base": {"x": 1}, "copy": {"x": 1}}));
    }

    #[test]
    fn syntax_error_is_located_and_keeps_earlier_documents() {
        let parsed = parse_documents("a: 1\n---\nb: [1, 2\nc: 3\n", &source());
        assert_eq!(parsed.documents.len(), 1);
        assert_eq!(parsed.errors.len(), 1);
        let e = &parsed.errors[0];
        assert_eq!(e.line, 4);
        assert!(e.message.starts_with("invalid YAML"), "{}", e.message);
    }

    #[test]
    fn duplicate_keys_and_unknown_tags_are_reported() {
        let parsed = parse_documents("a: 1\na: 2\nb: !custom x\n", &source());
        let messages: Vec<_> = parsed.errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(messages, ["duplicate key `a`", "unsupported tag `!custom`"]);
        assert_eq!(parsed.documents[0].to_json(), json!({"a": 1, "b": "x"}));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let parsed = parse_documents(&text, &source());
        assert_eq!(parsed.errors.len(), 1);
        assert!(parsed.errors[0].message.contains("aliases expand"));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("{}x\n", "- ".repeat(300));
        let parsed = parse_documents(&text, &source());
        assert_eq!(parsed.errors.len(), 1);
        assert!(
            parsed.errors[0].message.contains("nesting deeper"),
            "{:?}",
            parsed.errors
        );
        let text = format!("{}{}", "[".repeat(500), "]".repeat(500));
        let parsed = parse_documents(&text, &source());
        assert_eq!(parsed.errors.len(), 1);
    }
}
