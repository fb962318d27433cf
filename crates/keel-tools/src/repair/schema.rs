//! Deterministic argument repairs guided by the tool's JSON Schema.
//!
//! [`repair_arguments`] walks the arguments alongside the schema (`properties`,
//! `additionalProperties`, `items`, `prefixItems`, `required`, `type` — a name or a list —,
//! `enum`, `default`, local `$ref`s such as `#/$defs/x`, and `anyOf`/`oneOf` whose branches
//! all declare a `type`). The rule that keeps repairs honest: **a repair only touches a value
//! that violates its schema** — a value of the wrong type, a string not in its enum, a
//! property the schema forbids, an optional property sent as a `null` it does not allow, a
//! required property that is missing but declares a default.
//! Valid parts are never rewritten, and nothing is invented: a missing required property
//! without a default stays missing (and the call is blocked).
//!
//! | kind | when |
//! | --- | --- |
//! | `decode_json_string` | an object/array expected, a string holding one found |
//! | `coerce_number` | an integer/number expected, a numeric string found (`"3"`, `"2.5"`; an integer only if integral) |
//! | `coerce_boolean` | a boolean expected, `true/false/yes/no/1/0` (any case) found |
//! | `coerce_string` | a string expected, a number or boolean found |
//! | `wrap_array` | an array expected, a lone non-null value found |
//! | `enum_case` | a string not in the enum that matches exactly one option ignoring case and surrounding space |
//! | `drop_unknown` | a property undeclared under `additionalProperties: false` |
//! | `drop_null` | an optional property sent as `null` whose schema does not allow `null` |
//! | `fill_default` | a required property missing whose schema declares a `default` |
//!
//! The gateway re-validates the result with the compiled schema; anything still wrong blocks
//! the call. Composition keywords other than simple `anyOf`/`oneOf`, remote `$ref`s and
//! `patternProperties` are left alone (no repair rather than a wrong one).

use keel_types::{Repair, RepairKind};
use serde_json::{Map, Number, Value};

use super::numbers::oversized_integers;

/// Deepest schema/argument nesting the walker follows (bounds recursive `$ref`s).
const MAX_DEPTH: usize = 48;
/// Longest chain of `$ref`s followed for one schema.
const MAX_REF_HOPS: usize = 16;

/// Decodes arguments the model sent as a JSON string holding an object (`"{\"a\":1}"`).
pub fn decode_arguments(arguments: &Value) -> Option<(Value, Repair)> {
    let Value::String(text) = arguments else {
        return None;
    };
    let decoded = serde_json::from_str::<Value>(text.trim()).ok()?;
    let lossless = oversized_integers(text, &decoded).is_empty();
    (decoded.is_object() && lossless).then(|| {
        let repair = Repair {
            path: String::new(),
            kind: RepairKind::DecodeJsonString,
            from: arguments.clone(),
            to: decoded.clone(),
        };
        (decoded, repair)
    })
}

/// Repairs `arguments` in place against `schema` and returns what changed, in walk order.
pub fn repair_arguments(schema: &Value, arguments: &mut Value) -> Vec<Repair> {
    let mut walker = Walker {
        root: schema,
        repairs: Vec::new(),
        path: String::new(),
    };
    walker.value(schema, arguments, 0);
    walker.repairs
}

/// The JSON types a schema allows, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Types(u8);

impl Types {
    const NULL: u8 = 1;
    const BOOLEAN: u8 = 1 << 1;
    const INTEGER: u8 = 1 << 2;
    const NUMBER: u8 = 1 << 3;
    const STRING: u8 = 1 << 4;
    const ARRAY: u8 = 1 << 5;
    const OBJECT: u8 = 1 << 6;

    /// The types named by `type`; `None` when the schema does not restrict the type (or names
    /// a type we do not know, in which case we do not guess).
    fn declared(schema: &Map<String, Value>) -> Option<Self> {
        match schema.get("type")? {
            Value::String(name) => Self::named(name).map(Self),
            Value::Array(names) => names.iter().try_fold(Self(0), |acc, name| {
                let bit = Self::named(name.as_str()?)?;
                Some(Self(acc.0 | bit))
            }),
            _ => None,
        }
    }

    fn named(name: &str) -> Option<u8> {
        Some(match name {
            "null" => Self::NULL,
            "boolean" => Self::BOOLEAN,
            "integer" => Self::INTEGER,
            "number" => Self::NUMBER,
            "string" => Self::STRING,
            "array" => Self::ARRAY,
            "object" => Self::OBJECT,
            _ => return None,
        })
    }

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    fn admits(self, value: &Value) -> bool {
        match value {
            Value::Null => self.has(Self::NULL),
            Value::Bool(_) => self.has(Self::BOOLEAN),
            Value::Number(n) => self.has(Self::NUMBER) || (self.has(Self::INTEGER) && integral(n)),
            Value::String(_) => self.has(Self::STRING),
            Value::Array(_) => self.has(Self::ARRAY),
            Value::Object(_) => self.has(Self::OBJECT),
        }
    }
}

fn integral(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

struct Walker<'s> {
    root: &'s Value,
    repairs: Vec<Repair>,
    /// JSON pointer of the value being walked.
    path: String,
}

impl<'s> Walker<'s> {
    fn value(&mut self, schema: &'s Value, value: &mut Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Some(schema) = self.resolve(schema) else {
            return;
        };
        let schema = match Self::branches(schema) {
            Branches::None => schema,
            Branches::Typed(branches) => match self.pick_branch(&branches, value) {
                Some(branch) => branch,
                None => return,
            },
            Branches::Opaque => return,
        };
        if let Some(types) = Types::declared(schema)
            && !types.admits(value)
        {
            self.coerce(types, first_item(schema), value);
        }
        self.enum_case(schema, value);
        match value {
            Value::Object(map) => self.object(schema, map, depth),
            Value::Array(items) => self.array(schema, items, depth),
            _ => {}
        }
    }

    /// Follows local `$ref`s (`#/$defs/x`, `#/definitions/x`) — and a lone `allOf` wrapper
    /// around one schema, as generators emit for a described reference — to the schema they
    /// name.
    fn resolve(&self, mut schema: &'s Value) -> Option<&'s Map<String, Value>> {
        for _ in 0..MAX_REF_HOPS {
            let map = schema.as_object()?;
            if let Some(reference) = map.get("$ref") {
                let pointer = reference.as_str()?.strip_prefix('#')?;
                schema = self.root.pointer(pointer)?;
                continue;
            }
            match map.get("allOf") {
                Some(Value::Array(only)) if only.len() == 1 && is_wrapper(map) => {
                    schema = &only[0];
                }
                _ => return Some(map),
            }
        }
        None
    }

    fn branches(schema: &'s Map<String, Value>) -> Branches<'s> {
        if ["allOf", "not", "if"]
            .iter()
            .any(|k| schema.contains_key(*k))
        {
            return Branches::Opaque;
        }
        let list = match (schema.get("anyOf"), schema.get("oneOf")) {
            (None, None) => return Branches::None,
            (Some(Value::Array(list)), None) | (None, Some(Value::Array(list))) => list,
            _ => return Branches::Opaque,
        };
        Branches::Typed(list.iter().collect())
    }

    /// For `anyOf`/`oneOf` whose branches all declare a type: coerces the value to the union
    /// of those types if it matches none, then returns the one branch its type matches.
    fn pick_branch(
        &mut self,
        branches: &[&'s Value],
        value: &mut Value,
    ) -> Option<&'s Map<String, Value>> {
        let mut typed = Vec::with_capacity(branches.len());
        for branch in branches {
            let branch = self.resolve(branch)?;
            if !matches!(Self::branches(branch), Branches::None) {
                return None;
            }
            typed.push((branch, Types::declared(branch)?));
        }
        let union = Types(typed.iter().fold(0, |acc, (_, t)| acc | t.0));
        if !union.admits(value) {
            let array = typed.iter().find(|(_, t)| t.has(Types::ARRAY));
            self.coerce(union, array.and_then(|(b, _)| first_item(b)), value);
        }
        let mut matching = typed.iter().filter(|(_, t)| t.admits(value));
        let (branch, _) = matching.next()?;
        matching.next().is_none().then_some(*branch)
    }

    /// Converts a value of the wrong type into one of `types`, when a rule allows it. A lone
    /// value is wrapped into an array only if `first_item` (the schema of the array's first
    /// item) could take it.
    fn coerce(&mut self, types: Types, first_item: Option<&'s Value>, value: &mut Value) {
        if let Some((kind, to)) = coerced(types, value) {
            self.record(kind, std::mem::replace(value, to.clone()), to);
            return;
        }
        if types.has(Types::ARRAY) && !value.is_null() && self.could_hold(first_item, value) {
            let lone = std::mem::take(value);
            *value = Value::Array(vec![lone.clone()]);
            self.record(RepairKind::WrapArray, lone, value.clone());
        }
    }

    /// Whether an item schema could take `value` as it is or after a coercion (unknown or
    /// untyped item schemas could).
    fn could_hold(&self, item: Option<&'s Value>, value: &Value) -> bool {
        let Some(types) = item.and_then(|i| self.resolve(i)).and_then(Types::declared) else {
            return true;
        };
        types.admits(value) || coerced(types, value).is_some()
    }

    /// Replaces a string that is not among the `enum` options by the option it matches
    /// ignoring case and surrounding space, if exactly one does.
    fn enum_case(&mut self, schema: &Map<String, Value>, value: &mut Value) {
        let Some(Value::Array(options)) = schema.get("enum") else {
            return;
        };
        let Value::String(text) = &*value else {
            return;
        };
        if options.contains(&*value) {
            return;
        }
        let trimmed = text.trim();
        let exact = options.iter().find(|o| o.as_str() == Some(trimmed));
        let chosen = exact.or_else(|| {
            let lower = trimmed.to_lowercase();
            let mut matches = options
                .iter()
                .filter(|o| o.as_str().is_some_and(|o| o.to_lowercase() == lower));
            let first = matches.next()?;
            matches.next().is_none().then_some(first)
        });
        if let Some(option) = chosen {
            let to = option.clone();
            self.record(
                RepairKind::EnumCase,
                std::mem::replace(value, to.clone()),
                to,
            );
        }
    }

    fn object(
        &mut self,
        schema: &'s Map<String, Value>,
        map: &mut Map<String, Value>,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(properties) = properties {
            self.drop_nulls(schema, properties, map);
            for (key, sub) in properties {
                if let Some(value) = map.get_mut(key) {
                    let len = self.enter(key);
                    self.value(sub, value, depth + 1);
                    self.path.truncate(len);
                }
            }
        }
        let declared = |key: &str| properties.is_some_and(|p| p.contains_key(key));
        if !schema.contains_key("patternProperties") {
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let unknown: Vec<String> =
                        map.keys().filter(|k| !declared(k)).cloned().collect();
                    for key in unknown {
                        if let Some(removed) = map.remove(&key) {
                            let len = self.enter(&key);
                            self.record(RepairKind::DropUnknown, removed, Value::Null);
                            self.path.truncate(len);
                        }
                    }
                }
                Some(sub @ Value::Object(_)) => {
                    for (key, value) in map.iter_mut().filter(|(k, _)| !declared(k)) {
                        let len = self.enter(key);
                        self.value(sub, value, depth + 1);
                        self.path.truncate(len);
                    }
                }
                _ => {}
            }
        }
        self.fill_defaults(schema, properties, map);
    }

    /// Removes optional properties sent as `null` whose schema does not allow `null` (OpenAI
    /// strict mode sends every optional property, `null` when the model leaves it unset).
    fn drop_nulls(
        &mut self,
        schema: &Map<String, Value>,
        properties: &'s Map<String, Value>,
        map: &mut Map<String, Value>,
    ) {
        let required = |key: &str| {
            schema
                .get("required")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(key)))
        };
        let dropped: Vec<&String> = properties
            .iter()
            .filter(|(key, sub)| {
                map.get(key.as_str()).is_some_and(Value::is_null)
                    && !required(key)
                    && self.rejects_null(sub)
            })
            .map(|(key, _)| key)
            .collect();
        for key in dropped {
            if let Some(removed) = map.remove(key) {
                let len = self.enter(key);
                self.record(RepairKind::DropNull, removed, Value::Null);
                self.path.truncate(len);
            }
        }
    }

    /// Whether `schema` certainly rejects `null`: its `type` (or every typed `anyOf`/`oneOf`
    /// branch) leaves `null` out, or its `enum` does. An unconstrained schema accepts it.
    fn rejects_null(&self, schema: &'s Value) -> bool {
        let Some(schema) = self.resolve(schema) else {
            return false;
        };
        let enum_rejects = matches!(
            schema.get("enum"),
            Some(Value::Array(options)) if !options.contains(&Value::Null)
        );
        enum_rejects
            || match Self::branches(schema) {
                Branches::None => Types::declared(schema).is_some_and(|t| !t.has(Types::NULL)),
                Branches::Typed(branches) => branches.iter().all(|branch| {
                    self.resolve(branch)
                        .filter(|b| matches!(Self::branches(b), Branches::None))
                        .and_then(Types::declared)
                        .is_some_and(|t| !t.has(Types::NULL))
                }),
                Branches::Opaque => false,
            }
    }

    /// Fills required properties that are missing but whose schema declares a default.
    fn fill_defaults(
        &mut self,
        schema: &Map<String, Value>,
        properties: Option<&'s Map<String, Value>>,
        map: &mut Map<String, Value>,
    ) {
        let (Some(Value::Array(required)), Some(properties)) = (schema.get("required"), properties)
        else {
            return;
        };
        for name in required.iter().filter_map(Value::as_str) {
            if map.contains_key(name) {
                continue;
            }
            let Some(sub) = properties.get(name) else {
                continue;
            };
            let default = sub
                .get("default")
                .or_else(|| self.resolve(sub).and_then(|s| s.get("default")));
            if let Some(default) = default {
                map.insert(name.to_owned(), default.clone());
                let len = self.enter(name);
                self.record(RepairKind::FillDefault, Value::Null, default.clone());
                self.path.truncate(len);
            }
        }
    }

    fn array(&mut self, schema: &'s Map<String, Value>, items: &mut [Value], depth: usize) {
        let prefix = schema.get("prefixItems").and_then(Value::as_array);
        let rest = schema.get("items").filter(|s| s.is_object());
        for (index, item) in items.iter_mut().enumerate() {
            let sub = prefix.and_then(|p| p.get(index)).or(rest);
            if let Some(sub) = sub {
                let len = self.path.len();
                self.path.push('/');
                self.path.push_str(&index.to_string());
                self.value(sub, item, depth + 1);
                self.path.truncate(len);
            }
        }
    }

    /// Appends `key` to the current pointer (escaped per RFC 6901); returns the old length.
    fn enter(&mut self, key: &str) -> usize {
        let len = self.path.len();
        self.path.push('/');
        for c in key.chars() {
            match c {
                '~' => self.path.push_str("~0"),
                '/' => self.path.push_str("~1"),
                c => self.path.push(c),
            }
        }
        len
    }

    fn record(&mut self, kind: RepairKind, from: Value, to: Value) {
        self.repairs.push(Repair {
            path: self.path.clone(),
            kind,
            from,
            to,
        });
    }
}

/// The schema of an array's first item: `prefixItems[0]`, else `items`.
fn first_item(schema: &Map<String, Value>) -> Option<&Value> {
    schema
        .get("prefixItems")
        .and_then(|p| p.get(0))
        .or_else(|| schema.get("items"))
}

/// Whether a schema holding a one-element `allOf` adds nothing a repair would look at.
fn is_wrapper(map: &Map<String, Value>) -> bool {
    const STRUCTURAL: [&str; 9] = [
        "type",
        "properties",
        "items",
        "prefixItems",
        "enum",
        "anyOf",
        "oneOf",
        "required",
        "additionalProperties",
    ];
    !STRUCTURAL.iter().any(|k| map.contains_key(*k))
}

enum Branches<'s> {
    /// No `anyOf`/`oneOf`: the schema applies directly.
    None,
    /// `anyOf`/`oneOf` branches (checked when picked).
    Typed(Vec<&'s Value>),
    /// Composition we do not repair through.
    Opaque,
}

/// The scalar conversion a rule allows from `value` to one of `types`: (kind, new value).
fn coerced(types: Types, value: &Value) -> Option<(RepairKind, Value)> {
    match value {
        Value::String(text) => coerced_string(types, text.trim()),
        Value::Number(n) if types.has(Types::STRING) => {
            Some((RepairKind::CoerceString, Value::String(n.to_string())))
        }
        Value::Bool(b) if types.has(Types::STRING) => {
            Some((RepairKind::CoerceString, Value::String(b.to_string())))
        }
        _ => None,
    }
}

fn coerced_string(types: Types, text: &str) -> Option<(RepairKind, Value)> {
    if types.has(Types::OBJECT | Types::ARRAY) && (text.starts_with('{') || text.starts_with('[')) {
        let decoded = serde_json::from_str::<Value>(text)
            .ok()
            .filter(|v| oversized_integers(text, v).is_empty());
        match decoded {
            Some(v @ Value::Object(_)) if types.has(Types::OBJECT) => {
                return Some((RepairKind::DecodeJsonString, v));
            }
            Some(v @ Value::Array(_)) if types.has(Types::ARRAY) => {
                return Some((RepairKind::DecodeJsonString, v));
            }
            _ => {}
        }
    }
    if types.has(Types::INTEGER | Types::NUMBER)
        && let Ok(n) = serde_json::from_str::<Number>(text)
        // An integer beyond 64 bits would only survive as a rounded float: leave it as text.
        && !(n.is_f64() && is_integer_literal(text))
    {
        if types.has(Types::INTEGER)
            && let Some(int) = as_integer(&n)
        {
            return Some((RepairKind::CoerceNumber, int));
        }
        if types.has(Types::NUMBER) {
            return Some((RepairKind::CoerceNumber, Value::Number(n)));
        }
    }
    if types.has(Types::BOOLEAN) {
        let flag = match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Some(true),
            "false" | "no" | "0" => Some(false),
            _ => None,
        };
        if let Some(flag) = flag {
            return Some((RepairKind::CoerceBoolean, Value::Bool(flag)));
        }
    }
    None
}

/// Whether `text` is a JSON number without fraction or exponent (`-12`, not `1.0` or `1e3`).
fn is_integer_literal(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

/// `n` as an integer JSON number, if it is integral and fits.
fn as_integer(n: &Number) -> Option<Value> {
    if n.is_i64() || n.is_u64() {
        return Some(Value::Number(n.clone()));
    }
    let f = n.as_f64()?;
    // 2^53: beyond it the float text (`"9007199254740993.0"`) may already have been rounded.
    const LIMIT: f64 = 9_007_199_254_740_992.0;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < LIMIT).then(|| Value::from(f as i64))
}

#[cfg(test)]
mod tests;
