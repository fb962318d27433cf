//! Schema validation of each document's `spec`: the JSON Schema generated from the typed spec
//! (`schemars`) is checked with `jsonschema`, every error is mapped from its instance path back
//! to the YAML node it is about, and worded for people. Only a spec that passes is handed to
//! serde (see [`validate_spec`]).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use jsonschema::Validator;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use serde_json::{Value, json};

use crate::Diagnostic;
use crate::documents::{Document, Kind, field_hint};
use crate::suggest::{closest, list};
use crate::yaml::{Loc, Node, Seg, path_string};
use crate::{AgentSpec, HookSpec, McpServerSpec, ModelSpec, PolicySpec, RuntimeSpec, ToolSpecDoc};

/// The `format` given to durations, checked with `humantime` (the same parser serde uses).
const DURATION_FORMAT: &str = "keel-duration";
const DURATION_HINT: &str = "write a duration such as 500ms, 10s, 10m or 1h 30m";

/// The aliases serde accepts for hook events (`docs/workspace.md#hook`).
const HOOK_EVENT_ALIASES: &[&str] = &[
    "UserPromptSubmit",
    "PreAbilityCall",
    "PostAbilityCall",
    "Stop",
];

/// A kind's schema and its compiled validator.
struct KindSchema {
    schema: Value,
    validator: Validator,
}

/// The JSON Schema of a kind's `spec`, as generated from its type, with durations checked by
/// the same parser serde uses.
fn schema_of(kind: Kind) -> Value {
    let mut schema = match kind {
        Kind::Runtime => schemars::schema_for!(RuntimeSpec).to_value(),
        Kind::Model => schemars::schema_for!(ModelSpec).to_value(),
        Kind::Tool => schemars::schema_for!(ToolSpecDoc).to_value(),
        Kind::Agent => schemars::schema_for!(AgentSpec).to_value(),
        Kind::Policy => schemars::schema_for!(PolicySpec).to_value(),
        Kind::Hook => schemars::schema_for!(HookSpec).to_value(),
        Kind::McpServer => schemars::schema_for!(McpServerSpec).to_value(),
        Kind::Memory => schemars::schema_for!(crate::MemorySpec).to_value(),
        Kind::Workflow => schemars::schema_for!(crate::WorkflowSpec).to_value(),
        Kind::Eval => schemars::schema_for!(crate::EvalSpec).to_value(),
        Kind::RemoteAgent => schemars::schema_for!(crate::RemoteAgentSpec).to_value(),
    };
    if let Some(duration) = schema.pointer_mut("/$defs/Duration") {
        *duration = json!({ "type": "string", "format": DURATION_FORMAT });
    }
    // schemars does not see serde aliases; accept them as serde does.
    if let Some(Value::Array(events)) = schema.pointer_mut("/$defs/HookEvent/enum") {
        events.extend(HOOK_EVENT_ALIASES.iter().map(|a| json!(a)));
    }
    schema
}

fn compile(kind: Kind) -> Result<KindSchema, String> {
    let schema = schema_of(kind);
    let validator = jsonschema::options()
        .with_format(DURATION_FORMAT, |s: &str| {
            humantime::parse_duration(s).is_ok()
        })
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| e.to_string())?;
    Ok(KindSchema { schema, validator })
}

/// A kind's compiled schema, compiled the first time a document of that kind is validated:
/// compiling is most of what loading a small workspace costs (`keel run`'s cold start), so a
/// workspace pays only for the kinds it uses.
fn kind_schema(kind: Kind) -> Result<&'static KindSchema, &'static str> {
    CACHE[index(kind)]
        .get_or_init(|| compile(kind))
        .as_ref()
        .map_err(String::as_str)
}

/// The compiled schemas, by [`Kind::ALL`] order.
static CACHE: [OnceLock<Result<KindSchema, String>>; Kind::ALL.len()] =
    [const { OnceLock::new() }; Kind::ALL.len()];

fn index(kind: Kind) -> usize {
    Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

/// Starts building, on a thread of its own, what compiling any kind's schema needs first (the
/// JSON Schema meta-schema's validator, against which `jsonschema` checks every schema it
/// compiles), so it overlaps with reading and parsing the files. Only the first load of a
/// process has anything to warm; the thread is not waited for.
pub(crate) fn warm_up() {
    if CACHE.iter().any(|cached| cached.get().is_some()) {
        return;
    }
    let _detached = std::thread::Builder::new()
        .name("keel-schemas".into())
        .spawn(|| {
            // The draft schemars generates (`schema_of`).
            let probe = json!({
                "$schema": schemars::consts::meta_schemas::DRAFT2020_12,
                "type": "object",
            });
            let _valid = jsonschema::meta::is_valid(&probe);
        });
}

/// Compiles the schemas of `kinds` (the kinds of a workspace's documents) not compiled yet,
/// two at a time, so validating the documents waits for the slower half instead of for every
/// schema in turn.
pub(crate) fn prepare(kinds: impl IntoIterator<Item = Kind>) {
    let mut missing: Vec<Kind> = Vec::new();
    for kind in kinds {
        if CACHE[index(kind)].get().is_none() && !missing.contains(&kind) {
            missing.push(kind);
        }
    }
    if missing.len() < 2 {
        return;
    }
    std::thread::scope(|scope| {
        // Without the thread, validation compiles the other half as it needs them.
        let _helper = std::thread::Builder::new()
            .name("keel-schemas".into())
            .spawn_scoped(scope, || {
                for kind in missing.iter().skip(1).step_by(2) {
                    let _compiled = kind_schema(*kind);
                }
            });
        for kind in missing.iter().step_by(2) {
            let _compiled = kind_schema(*kind);
        }
    });
}

/// Validates `spec` against its kind's schema, reporting every error. Returns the spec as
/// JSON when it is valid.
pub(crate) fn validate_spec(
    doc: &Document,
    spec: &Node,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Value> {
    let json = spec.to_json();
    let kind_schema = match kind_schema(doc.kind) {
        Ok(kind_schema) => kind_schema,
        Err(e) => {
            diagnostics.push(doc.loc.error(
                format!(
                    "internal error: the schema of {} does not compile: {e}",
                    doc.kind
                ),
                None,
            ));
            return None;
        }
    };
    let reporter = Reporter {
        doc,
        spec,
        base: Vec::new(),
        schema: &kind_schema.schema,
    };
    let before = diagnostics.len();
    for error in kind_schema.validator.iter_errors(&json) {
        reporter.report(&error, diagnostics);
    }
    (diagnostics.len() == before).then_some(json)
}

/// Turns validation errors into located diagnostics.
pub(crate) struct Reporter<'a> {
    pub doc: &'a Document,
    /// The document's `spec` node.
    pub spec: &'a Node,
    /// Where the validated instance sits under `spec` (empty: the spec itself).
    pub base: Vec<Seg>,
    /// The schema validated against (for field lists in hints).
    pub schema: &'a Value,
}

impl Reporter<'_> {
    pub(crate) fn report(
        &self,
        error: &jsonschema::ValidationError<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        let path = self.path_of(error);
        let node = self.spec.deepest(&path);
        let instance = error.instance();
        let (message, hint) = match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                let valid = self.properties_at(error.schema_path().as_str());
                let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
                for key in unexpected {
                    let loc = node.entry(key).map_or(&node.loc, |e| &e.key_loc);
                    out.push(loc.error(
                        format!("unknown field `{key}` in {}", self.place(&path)),
                        Some(field_hint(key, &valid)),
                    ));
                }
                return;
            }
            ValidationErrorKind::Required { property } => {
                let property = property.as_str().unwrap_or_default();
                out.push(self.key_loc(&path).error(
                    format!("missing field `{property}` in {}", self.place(&path)),
                    None,
                ));
                return;
            }
            ValidationErrorKind::Type { kind } => (
                format!(
                    "{} must be {}, found {}",
                    self.field(&path),
                    expected_types(kind),
                    describe(instance)
                ),
                None,
            ),
            ValidationErrorKind::Enum { options } => {
                let options: Vec<Value> = options.as_array().cloned().unwrap_or_default();
                self.invalid_value(&path, instance, &options)
            }
            ValidationErrorKind::Constant { expected_value } => {
                self.invalid_value(&path, instance, std::slice::from_ref(expected_value))
            }
            ValidationErrorKind::AnyOf { context }
            | ValidationErrorKind::OneOfNotValid { context } => {
                self.alternatives(&path, instance, context, out);
                return;
            }
            ValidationErrorKind::Format { format } if format == DURATION_FORMAT => (
                format!(
                    "invalid duration {} for {}",
                    describe_value(instance),
                    self.field(&path)
                ),
                Some(DURATION_HINT.into()),
            ),
            ValidationErrorKind::Minimum { limit }
            | ValidationErrorKind::ExclusiveMinimum { limit } => (
                format!(
                    "{} must be at least {limit}, found {instance}",
                    self.field(&path)
                ),
                None,
            ),
            ValidationErrorKind::Maximum { limit }
            | ValidationErrorKind::ExclusiveMaximum { limit } => (
                format!(
                    "{} must be at most {limit}, found {instance}",
                    self.field(&path)
                ),
                None,
            ),
            _ => (
                format!(
                    "invalid {}: {}",
                    self.field(&path),
                    lowercase_first(&error.to_string())
                ),
                None,
            ),
        };
        out.push(node.loc.error(message, hint));
    }

    /// `anyOf` / `oneOf` failures: one message when every branch only disagrees on the value
    /// or its type, else the errors of the branch that came closest.
    fn alternatives(
        &self,
        path: &[Seg],
        instance: &Value,
        context: &[Vec<jsonschema::ValidationError<'static>>],
        out: &mut Vec<Diagnostic>,
    ) {
        let at_same_path = |e: &jsonschema::ValidationError<'_>| self.path_of(e) == path;
        let mut values = Vec::new();
        let mut types = BTreeSet::new();
        let mut simple = !context.is_empty();
        for branch in context {
            for e in branch {
                match e.kind() {
                    ValidationErrorKind::Constant { expected_value } if at_same_path(e) => {
                        values.push((**expected_value).clone());
                    }
                    ValidationErrorKind::Enum { options } if at_same_path(e) => {
                        values.extend(options.as_array().cloned().unwrap_or_default());
                    }
                    ValidationErrorKind::Type { kind } if at_same_path(e) => {
                        types.extend(type_names(kind));
                    }
                    _ => simple = false,
                }
            }
        }
        let node = self.spec.deepest(path);
        if simple && !values.is_empty() {
            let (message, hint) = self.invalid_value(path, instance, &values);
            out.push(node.loc.error(message, hint));
            return;
        }
        if simple {
            let types: Vec<&str> = types.into_iter().collect();
            out.push(node.loc.error(
                format!(
                    "{} must be {}, found {}",
                    self.field(path),
                    join_types(&types),
                    describe(instance)
                ),
                None,
            ));
            return;
        }
        let closest_branch = context.iter().min_by_key(|branch| {
            let type_mismatch = branch
                .iter()
                .any(|e| at_same_path(e) && matches!(e.kind(), ValidationErrorKind::Type { .. }));
            (type_mismatch, branch.len())
        });
        for error in closest_branch.into_iter().flatten() {
            self.report(error, out);
        }
    }

    fn invalid_value(
        &self,
        path: &[Seg],
        instance: &Value,
        options: &[Value],
    ) -> (String, Option<String>) {
        let names: Vec<String> = options
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let expected = list(names.iter().map(String::as_str));
        let hint = match instance
            .as_str()
            .and_then(|s| closest(s, names.iter().map(String::as_str), 2))
        {
            Some(near) => format!("did you mean `{near}`? expected one of {expected}"),
            None => format!("expected one of {expected}"),
        };
        (
            format!(
                "invalid value {} for {}",
                describe_value(instance),
                self.field(path)
            ),
            Some(hint),
        )
    }

    /// Where the mapping at `path` is introduced: its key (`limits:`), or `spec:` itself.
    fn key_loc(&self, path: &[Seg]) -> &Loc {
        let Some((last, parent)) = path.split_last() else {
            return &self.doc.spec_loc;
        };
        let parent = self.spec.deepest(parent);
        match last {
            Seg::Key(key) => match parent.entry(key) {
                Some(entry) => &entry.key_loc,
                None => &self.spec.deepest(path).loc,
            },
            Seg::Index(_) => &self.spec.deepest(path).loc,
        }
    }

    fn path_of(&self, error: &jsonschema::ValidationError<'_>) -> Vec<Seg> {
        let mut path = self.base.clone();
        path.extend(segments(error.instance_path()));
        path
    }

    /// `` `spec.limits.maxSteps` of Agent `a` ``.
    fn field(&self, path: &[Seg]) -> String {
        format!("`{}` of {}", path_string("spec", path), self.doc.label())
    }

    /// `` Agent `a` `` for the spec itself, else `` `spec.limits` of Agent `a` ``.
    fn place(&self, path: &[Seg]) -> String {
        if path.is_empty() {
            self.doc.label()
        } else {
            self.field(path)
        }
    }

    /// The property names declared next to the keyword at `schema_path`.
    fn properties_at(&self, schema_path: &str) -> Vec<String> {
        let parent = schema_path
            .rsplit_once('/')
            .map_or("", |(parent, _)| parent);
        self.schema
            .pointer(parent)
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// An instance path as tree steps.
pub(crate) fn segments(location: &jsonschema::paths::Location) -> Vec<Seg> {
    location
        .segments()
        .map(|s| match s {
            LocationSegment::Property(p) => Seg::Key(p.into_owned()),
            LocationSegment::Index(i) => Seg::Index(i),
        })
        .collect()
}

fn type_names(kind: &TypeKind) -> Vec<&'static str> {
    match kind {
        TypeKind::Single(t) => vec![t.as_str()],
        TypeKind::Multiple(set) => set.iter().map(|t| t.as_str()).collect(),
    }
}

fn expected_types(kind: &TypeKind) -> String {
    join_types(&type_names(kind))
}

/// `a string`, `an integer or a list`; `null` is left out when something else is allowed
/// (it only means "may be omitted").
fn join_types(types: &[&str]) -> String {
    let mut names: Vec<&str> = types
        .iter()
        .copied()
        .filter(|t| *t != "null" || types.len() == 1)
        .collect();
    if names.contains(&"integer") && names.contains(&"number") {
        names.retain(|t| *t != "integer");
    }
    names
        .iter()
        .map(|t| type_phrase(t))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn type_phrase(name: &str) -> &'static str {
    match name {
        "null" => "null",
        "boolean" => "a boolean (true or false)",
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "array" => "a list",
        "object" => "a mapping",
        _ => "a value",
    }
}

/// `a string `abc``, `a list`, `null`.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("a number `{n}`"),
        Value::Number(n) => format!("an integer `{n}`"),
        Value::String(s) => format!("a string `{s}`"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

/// `` `abc` `` for scalars, else what the value is.
fn describe_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        Value::Array(_) | Value::Object(_) => describe(value),
        other => format!("`{other}`"),
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_schema_compiles() {
        for kind in Kind::ALL {
            assert!(kind_schema(kind).is_ok(), "{kind}");
        }
    }

    #[test]
    fn prepare_compiles_the_kinds_a_workspace_uses() {
        let kinds = [Kind::Agent, Kind::Model, Kind::Agent, Kind::Workflow];
        prepare(kinds);
        for kind in kinds {
            let compiled = CACHE[index(kind)].get().expect("compiled by prepare");
            assert!(compiled.is_ok(), "{kind}");
        }
    }

    #[test]
    fn type_lists_read_naturally() {
        assert_eq!(join_types(&["integer", "null"]), "an integer");
        assert_eq!(join_types(&["null"]), "null");
        assert_eq!(join_types(&["string", "array"]), "a string or a list");
    }
}
