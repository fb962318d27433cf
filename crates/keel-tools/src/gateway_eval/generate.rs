//! The built-in dataset's cases for one tool: its schema's valid call broken one way at a time,
//! each mutation kind where it applies (`evals/gateway.yaml` says where), each case with the
//! outcome the dataset expects in the tool's gateway mode.
//!
//! The generator checks its own cases with the tool's compiled schema: the call a case must
//! be repaired to is valid, a malformed call is invalid as sent, and a call expected to pass
//! is valid as sent. A case that fails its check is left out rather than expected wrongly.

use std::collections::BTreeMap;

use jsonschema::Validator;
use keel_types::ToolSpec;
use keel_workspace::GatewayMode;
use serde_json::{Map, Value, json};

use super::dataset::{Dataset, Mutation};
use super::synth::{self, Schema, Target};
use super::{Expect, GatewayCase};
use crate::repair::name::osa_distance;

/// What a case is made for: the tools an agent lists and every registered tool.
pub(super) struct Inventory<'a> {
    /// The registered tools the agent lists (its globs resolved), in list order.
    pub names: &'a [String],
    /// Every registered tool, sorted.
    pub registered: &'a [String],
}

impl Inventory<'_> {
    fn is_registered(&self, name: &str) -> bool {
        self.registered.iter().any(|r| r == name)
    }
}

/// The origin of every generated case.
const GENERATED: &str = "generated";
/// The value of an undeclared property a case adds.
const ADDED_VALUE: &str = "added by the model";

/// How the call a case sends relates to the tool's schema, checked before the case is kept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Its arguments parse and fail the schema.
    Invalid,
    /// Its arguments pass the schema as sent.
    Valid,
    /// Not checked against the schema: its text is what is wrong, or its tool name.
    Unchecked,
}

/// A mutated call: what is sent and the valid call it was made from.
struct Made {
    /// The property the mutation aims at (a JSON pointer, `""` for the whole call).
    pointer: String,
    /// The tool name sent, when it is not the tool's.
    tool: Option<String>,
    /// The argument text sent.
    text: String,
    /// The valid call it was made from: what a repair must give.
    valid: Value,
    sent: Sent,
}

impl Made {
    /// A call sending `sent` (a value), made from `valid`.
    fn value(pointer: String, sent: &Value, valid: Value, check: Sent) -> Self {
        Self {
            pointer,
            tool: None,
            text: sent.to_string(),
            valid,
            sent: check,
        }
    }
}

/// The cases of one tool.
struct Cases<'a> {
    dataset: &'a Dataset,
    tool: &'a str,
    mode: GatewayMode,
    schema: Schema<'a>,
    validator: Validator,
    cases: Vec<GatewayCase>,
    per_kind: BTreeMap<Mutation, usize>,
}

/// The built-in dataset's cases for `tool` in gateway `mode`, or why it has none (its schema
/// does not compile or describe an object, or no valid call could be made from it).
pub(super) fn cases_for_tool(
    dataset: &Dataset,
    tool: &ToolSpec,
    mode: GatewayMode,
    inventory: &Inventory<'_>,
) -> Result<Vec<GatewayCase>, String> {
    let root = &tool.parameters;
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(root)
        .map_err(|e| format!("its argument schema does not compile: {e}"))?;
    let schema = Schema::new(root);
    let object = schema
        .resolve(root)
        .filter(|map| {
            let types = synth::types(map);
            types.contains(&"object") || (types.is_empty() && !synth::composed(map))
        })
        .ok_or("its argument schema does not describe an object")?;
    let base = match schema.value(root) {
        Some(value @ Value::Object(_)) => value,
        _ => json!({}),
    };
    if !validator.is_valid(&base) {
        return Err("no valid call could be made from its argument schema".into());
    }
    let mut cases = Cases {
        dataset,
        tool: &tool.name,
        mode,
        schema,
        validator,
        cases: Vec::new(),
        per_kind: BTreeMap::new(),
    };
    let targets = cases.schema.targets();
    cases.valid(&base, &targets);
    cases.whole_call(&base);
    for target in targets.iter().filter(|t| !t.nested()) {
        cases.property(&base, target);
    }
    cases.unknown_field(object, &base);
    cases.tool_names(&base, inventory);
    for target in targets.iter().filter(|t| t.nested()) {
        cases.nested(&base, target);
    }
    let mut cases = cases.cases;
    let order = |case: &GatewayCase| Mutation::ALL.iter().position(|m| m.as_str() == case.kind);
    cases.sort_by_key(order);
    Ok(cases)
}

/// The case of one agent rather than one tool: a registered tool it does not list.
pub(super) fn cases_for_agent(
    dataset: &Dataset,
    inventory: &Inventory<'_>,
    mode_of: &(dyn Fn(&str) -> GatewayMode + Sync),
) -> Vec<GatewayCase> {
    let unlisted = |name: &&String| inventory.names.iter().all(|n| n != *name);
    let chosen = dataset
        .parameters
        .unlisted_tools
        .iter()
        .filter(|name| inventory.is_registered(name))
        .find(unlisted)
        .or_else(|| inventory.registered.iter().find(unlisted));
    let Some(tool) = chosen else {
        return Vec::new();
    };
    let kind = Mutation::UnlistedTool;
    vec![GatewayCase {
        name: format!("{tool}/{}", kind.as_str()),
        kind: kind.as_str().into(),
        tool: tool.clone(),
        arguments: "{}".into(),
        expect: dataset.expect(kind, mode_of(tool)),
        repaired: None,
        repaired_tool: None,
        agent: None,
        origin: GENERATED.into(),
    }]
}

impl Cases<'_> {
    /// Keeps the case `made` of `kind` if it passes its checks and the kind has room.
    fn push(&mut self, kind: Mutation, made: Made) {
        let room = self.per_kind.get(&kind).copied().unwrap_or(0)
            < self.dataset.parameters.max_cases_per_kind;
        if !room || !self.consistent(&made) {
            return;
        }
        *self.per_kind.entry(kind).or_default() += 1;
        let expect = self.dataset.expect(kind, self.mode);
        let repair = expect == Expect::Repair;
        self.cases.push(GatewayCase {
            name: format!("{}/{}{}", self.tool, kind.as_str(), made.pointer),
            kind: kind.as_str().into(),
            repaired_tool: made
                .tool
                .as_ref()
                .filter(|_| repair)
                .map(|_| self.tool.to_owned()),
            tool: made.tool.unwrap_or_else(|| self.tool.to_owned()),
            arguments: made.text,
            expect,
            repaired: repair.then_some(made.valid),
            agent: None,
            origin: GENERATED.into(),
        });
    }

    /// Whether a case is what it says: made from a valid call, and its sent arguments valid or
    /// not as its kind says.
    fn consistent(&self, made: &Made) -> bool {
        if !self.validator.is_valid(&made.valid) {
            return false;
        }
        let parsed = || serde_json::from_str::<Value>(&made.text).ok();
        match made.sent {
            Sent::Unchecked => true,
            Sent::Valid => parsed().is_some_and(|v| self.validator.is_valid(&v)),
            Sent::Invalid => parsed().is_some_and(|v| !self.validator.is_valid(&v)),
        }
    }

    /// The valid call with every optional top-level property that keeps it valid.
    fn valid(&mut self, base: &Value, targets: &[Target<'_>]) {
        let mut full = base.clone();
        for target in targets.iter().filter(|t| !t.nested()) {
            if let Some(with) = self.schema.with_target(&full, target)
                && self.validator.is_valid(&with)
            {
                full = with;
            }
        }
        self.push(
            Mutation::Valid,
            Made::value(String::new(), &full, full.clone(), Sent::Valid),
        );
    }

    /// Mutations of the call's text: the whole object as a JSON string, the text cut short.
    fn whole_call(&mut self, base: &Value) {
        let text = base.to_string();
        let as_string = Value::String(text.clone());
        self.push(
            Mutation::ArgumentsAsJsonString,
            Made::value(String::new(), &as_string, base.clone(), Sent::Invalid),
        );
        let half = text.chars().count().div_ceil(2);
        let cut: String = text.chars().take(half).collect();
        if !cut.trim().is_empty() && serde_json::from_str::<Value>(&cut).is_err() {
            self.push(
                Mutation::TruncatedJson,
                Made {
                    text: cut,
                    ..Made::value(String::new(), base, base.clone(), Sent::Unchecked)
                },
            );
        }
    }

    /// The valid call holding `target`'s property, and the property's value in it.
    fn context(&self, base: &Value, target: &Target<'_>) -> Option<(Value, Value)> {
        if synth::composed(target.schema) {
            return None;
        }
        let context = self
            .schema
            .with_target(base, target)
            .filter(|c| self.validator.is_valid(c))?;
        let leaf = synth::get(&context, target)?.clone();
        Some((context, leaf))
    }

    /// The mutations of one top-level property.
    fn property(&mut self, base: &Value, target: &Target<'_>) {
        let Some((context, leaf)) = self.context(base, target) else {
            return;
        };
        let types = synth::types(target.schema);
        let has = |name: &str| types.contains(&name);
        let pointer = target.pointer();
        let send = |value: Value, valid: &Value, check: Sent| {
            synth::replace(&context, target, Some(value))
                .map(|sent| Made::value(pointer.clone(), &sent, valid.clone(), check))
        };
        let mut made: Vec<(Mutation, Option<Made>)> = Vec::new();
        if let Some((kind, text)) = as_text(&types, &leaf) {
            made.push((kind, send(text, &context, Sent::Invalid)));
        }
        if only(&types, "integer")
            && let Some(n) = leaf.as_i64()
        {
            let fraction = json!(format!("{n}.5"));
            made.push((
                Mutation::FractionForInteger,
                send(fraction, &context, Sent::Invalid),
            ));
        }
        if only(&types, "array")
            && let Some(item) = lone_item(&leaf)
        {
            made.push((
                Mutation::ScalarForArray,
                send(item, &context, Sent::Invalid),
            ));
        }
        if (has("object") || has("array"))
            && !has("string")
            && (leaf.is_object() || leaf.is_array())
        {
            let text = Value::String(leaf.to_string());
            made.push((
                Mutation::JsonTextForObject,
                send(text, &context, Sent::Invalid),
            ));
        }
        if only(&types, "string") && !target.schema.contains_key("enum") {
            let coerced = synth::replace(&context, target, Some(json!("42")));
            let made_one = coerced.and_then(|valid| send(json!(42), &valid, Sent::Invalid));
            made.push((Mutation::ScalarForString, made_one));
        }
        if let Some(value) = self.unconvertible(target.schema, &types) {
            made.push((Mutation::WrongType, send(value, &context, Sent::Invalid)));
        }
        if !target.required && rejects_null(target.schema, &types) {
            let without = synth::replace(&context, target, None);
            let made_one = without.and_then(|valid| send(Value::Null, &valid, Sent::Invalid));
            made.push((Mutation::NullForOptional, made_one));
        }
        if target.required && rejects_null(target.schema, &types) {
            made.push((
                Mutation::NullForRequired,
                send(Value::Null, &context, Sent::Invalid),
            ));
        }
        if target.required {
            made.push(self.missing(base, target));
        }
        if has("integer") || has("number") {
            made.push((Mutation::OversizedInteger, self.oversized(&context, target)));
        }
        made.extend(self.enum_cases(&context, &leaf, target));
        for (kind, made) in made {
            if let Some(made) = made {
                self.push(kind, made);
            }
        }
    }

    /// A required property left out: blocked, or filled with its default.
    fn missing(&self, base: &Value, target: &Target<'_>) -> (Mutation, Option<Made>) {
        let declared = target.steps.last().and_then(|(_, raw)| raw.get("default"));
        let default = declared.or_else(|| target.schema.get("default"));
        let sent = synth::replace(base, target, None);
        let (kind, valid) = match default {
            Some(default) => (
                Mutation::MissingRequiredWithDefault,
                synth::replace(base, target, Some(default.clone())),
            ),
            None => (Mutation::MissingRequired, Some(base.clone())),
        };
        let made = sent
            .zip(valid)
            .map(|(sent, valid)| Made::value(target.pointer(), &sent, valid, Sent::Invalid));
        (kind, made)
    }

    /// The property sent as an integer beyond 64 bits (only expressible as text).
    fn oversized(&self, context: &Value, target: &Target<'_>) -> Option<Made> {
        const MARK: &str = "__keel_eval_oversized__";
        let marked = synth::replace(context, target, Some(json!(MARK)))?.to_string();
        let quoted = format!("\"{MARK}\"");
        (marked.matches(&quoted).count() == 1).then(|| Made {
            text: marked.replace(&quoted, &self.dataset.parameters.oversized_integer),
            ..Made::value(target.pointer(), context, context.clone(), Sent::Unchecked)
        })
    }

    /// An enum option in another case (repaired) and with a typo (blocked).
    fn enum_cases(
        &self,
        context: &Value,
        leaf: &Value,
        target: &Target<'_>,
    ) -> Vec<(Mutation, Option<Made>)> {
        let Some(Value::Array(options)) = target.schema.get("enum") else {
            return Vec::new();
        };
        let types = synth::types(target.schema);
        if !(types.is_empty() || types.contains(&"string")) {
            return Vec::new();
        }
        let lower = |v: &Value| v.as_str().map(|s| s.trim().to_lowercase());
        let option = match leaf.as_str() {
            Some(text) if text.chars().any(char::is_alphabetic) => Some(leaf.clone()),
            _ => options
                .iter()
                .find(|o| {
                    o.as_str()
                        .is_some_and(|s| s.chars().any(char::is_alphabetic))
                })
                .cloned(),
        };
        let Some(option) = option else {
            return Vec::new();
        };
        let Some(context) = synth::replace(context, target, Some(option.clone())) else {
            return Vec::new();
        };
        let text = option.as_str().unwrap_or_default();
        let pointer = target.pointer();
        let mut out = Vec::new();
        let recased = match text.chars().any(char::is_lowercase) {
            true => text.to_uppercase(),
            false => text.to_lowercase(),
        };
        let matching = options
            .iter()
            .filter(|o| lower(o) == Some(recased.to_lowercase()));
        if recased != text && !options.contains(&json!(recased)) && matching.count() == 1 {
            let sent = synth::replace(&context, target, Some(json!(recased)));
            let made =
                sent.map(|s| Made::value(pointer.clone(), &s, context.clone(), Sent::Invalid));
            out.push((Mutation::EnumCase, made));
        }
        if let Some(typo) = swap_adjacent(text).filter(|t| t.chars().count() >= 4)
            && options
                .iter()
                .all(|o| lower(o) != Some(typo.trim().to_lowercase()))
        {
            let sent = synth::replace(&context, target, Some(json!(typo)));
            let made = sent.map(|s| Made::value(pointer, &s, context.clone(), Sent::Invalid));
            out.push((Mutation::EnumTypo, made));
        }
        out
    }

    /// A property inside an object property or an array's first item: sent as text where a
    /// number or a boolean is expected, and as a value no repair converts.
    fn nested(&mut self, base: &Value, target: &Target<'_>) {
        let Some((context, leaf)) = self.context(base, target) else {
            return;
        };
        let types = synth::types(target.schema);
        let pointer = target.pointer();
        let send = |value: Value, check: Sent| {
            synth::replace(&context, target, Some(value))
                .map(|sent| Made::value(pointer.clone(), &sent, context.clone(), check))
        };
        if let Some(made) = as_text(&types, &leaf).and_then(|(_, text)| send(text, Sent::Invalid)) {
            self.push(Mutation::NestedRepairable, made);
        }
        let wrong = self.unconvertible(target.schema, &types);
        if let Some(made) = wrong.and_then(|value| send(value, Sent::Invalid)) {
            self.push(Mutation::NestedWrongType, made);
        }
    }

    /// An undeclared property added: dropped where the schema forbids it, kept where it
    /// allows it.
    fn unknown_field(&mut self, object: &Map<String, Value>, base: &Value) {
        let constrained = [
            "patternProperties",
            "unevaluatedProperties",
            "propertyNames",
        ];
        if constrained.iter().any(|k| object.contains_key(*k)) {
            return;
        }
        let declared = object.get("properties").and_then(Value::as_object);
        let name = self
            .dataset
            .parameters
            .unknown_fields
            .iter()
            .find(|n| !declared.is_some_and(|d| d.contains_key(n.as_str())));
        let (Some(name), Some(map)) = (name, base.as_object()) else {
            return;
        };
        let mut sent = map.clone();
        sent.insert(name.clone(), json!(ADDED_VALUE));
        let sent = Value::Object(sent);
        let pointer = format!("/{name}");
        match object.get("additionalProperties") {
            Some(Value::Bool(false)) => self.push(
                Mutation::UnknownField,
                Made::value(pointer, &sent, base.clone(), Sent::Invalid),
            ),
            None | Some(Value::Bool(true)) => self.push(
                Mutation::UnknownFieldAllowed,
                Made::value(pointer, &sent, sent.clone(), Sent::Valid),
            ),
            Some(_) => {}
        }
    }

    /// The tool's name upper-cased, with a typo, and a hallucinated name instead.
    fn tool_names(&mut self, base: &Value, inventory: &Inventory<'_>) {
        let tool = self.tool;
        let named = |name: String| Made {
            tool: Some(name),
            ..Made::value(String::new(), base, base.clone(), Sent::Unchecked)
        };
        let upper = tool.to_uppercase();
        let same_case = |name: &str| {
            inventory
                .names
                .iter()
                .filter(|n| n.to_lowercase() == name.to_lowercase())
                .count()
        };
        if upper != tool && !inventory.is_registered(&upper) && same_case(&upper) == 1 {
            self.push(Mutation::ToolNameCase, named(upper));
        }
        if let Some(typo) = swap_adjacent(tool)
            && !inventory.is_registered(&typo)
            && same_case(&typo) == 0
            && inventory
                .names
                .iter()
                .filter(|n| n.as_str() != tool)
                .all(|n| distance(n, &typo) >= 2)
        {
            self.push(Mutation::ToolNameTypo, named(typo));
        }
        let hallucinated = &self.dataset.parameters.hallucinated_tools;
        let start = inventory.names.iter().position(|n| n == tool).unwrap_or(0);
        let far = (0..hallucinated.len())
            .filter_map(|i| hallucinated.get((start + i) % hallucinated.len()))
            .find(|name| {
                !inventory.is_registered(name)
                    && inventory.names.iter().all(|n| distance(n, name) > 2)
            });
        if let Some(name) = far {
            self.push(Mutation::ToolNameUnknown, named(name.clone()));
        }
    }

    /// A value of the property's wrong type that no documented repair converts: an object, an
    /// array or a plain word (none is numeric, boolean or JSON text, so no coercion applies),
    /// the first its type does not admit and that would not be wrapped into an array.
    fn unconvertible(&self, schema: &Map<String, Value>, types: &[&str]) -> Option<Value> {
        if types.is_empty() {
            return None;
        }
        let item_types: Option<Vec<String>> = types.contains(&"array").then(|| {
            schema
                .get("prefixItems")
                .and_then(|p| p.get(0))
                .or_else(|| schema.get("items"))
                .and_then(|item| self.schema.resolve(item))
                .map(|item| synth::types(item).into_iter().map(str::to_owned).collect())
                .unwrap_or_default()
        });
        let candidates = [
            json!({ "unexpected": true }),
            json!(["unexpected", "values"]),
            json!("unexpected text"),
        ];
        candidates.into_iter().find(|candidate| {
            let admitted = admits(types.iter().copied(), candidate);
            let wrapped = item_types.as_ref().is_some_and(|items| {
                items.is_empty() || admits(items.iter().map(String::as_str), candidate)
            });
            !admitted && !wrapped
        })
    }
}

/// A number or boolean property's value sent as its text.
fn as_text(types: &[&str], leaf: &Value) -> Option<(Mutation, Value)> {
    if types.contains(&"string") {
        return None;
    }
    let numeric = types.contains(&"integer") || types.contains(&"number");
    match leaf {
        Value::Number(n) if numeric => Some((Mutation::NumberAsString, json!(n.to_string()))),
        Value::Bool(b) if types.contains(&"boolean") => {
            Some((Mutation::BooleanAsString, json!(b.to_string())))
        }
        _ => None,
    }
}

/// The one item of a one-item array, when a repair would wrap it back: not null, not an
/// array, not text that reads as JSON.
fn lone_item(leaf: &Value) -> Option<Value> {
    let [item] = leaf.as_array()?.as_slice() else {
        return None;
    };
    let json_text = item
        .as_str()
        .is_some_and(|s| s.trim_start().starts_with(['{', '[']));
    (!item.is_null() && !item.is_array() && !json_text).then(|| item.clone())
}

/// Whether the declared types are `name` (and perhaps `null`) only.
fn only(types: &[&str], name: &str) -> bool {
    types.contains(&name) && types.iter().all(|t| *t == name || *t == "null")
}

/// Whether a property's schema certainly rejects `null`: its type or its enum leaves it out.
fn rejects_null(schema: &Map<String, Value>, types: &[&str]) -> bool {
    let by_type = !types.is_empty() && !types.contains(&"null");
    let by_enum = matches!(schema.get("enum"), Some(Value::Array(o)) if !o.contains(&Value::Null));
    by_type || by_enum
}

/// Whether a value of `candidate`'s JSON type is among `types`.
fn admits<'t>(mut types: impl Iterator<Item = &'t str>, candidate: &Value) -> bool {
    let name = match candidate {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        _ => return true,
    };
    types.any(|t| t == name)
}

/// `text` with the last pair of adjacent, different letters or digits swapped (never the
/// first character); `None` for text shorter than 3 characters.
pub(super) fn swap_adjacent(text: &str) -> Option<String> {
    let mut chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return None;
    }
    let at = (1..chars.len() - 1).rev().find(|&i| {
        let (a, b) = (chars[i], chars[i + 1]);
        a != b && a.is_alphanumeric() && b.is_alphanumeric()
    })?;
    chars.swap(at, at + 1);
    Some(chars.into_iter().collect())
}

/// The edit distance between two names, ignoring case.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    osa_distance(&a, &b)
}
