//! Valid values synthesised from a JSON Schema, and the properties mutations aim at.
//!
//! A value comes from the schema's own word when it has one — `default`, `const`, the first
//! `enum` option, the first of `examples` — and otherwise from its type and bounds (`"example"`
//! padded or cut to its length bounds, a well-formed value for the common `format`s, `2` or
//! the nearest bound, `1.5`, `true`, one item for an array, the required properties for an
//! object). Nothing here checks the result: the generator validates every call it makes with
//! the compiled schema and leaves out what is not valid.

use serde_json::{Map, Number, Value};

/// Deepest nesting the synthesis follows (bounds recursive `$ref`s).
const MAX_DEPTH: usize = 12;
/// Longest chain of `$ref`s followed for one schema.
const MAX_REF_HOPS: usize = 16;
/// Most items of a synthesised array (`minItems` beyond it gives an invalid call, left out).
const MAX_ITEMS: f64 = 16.0;

/// A step of the path from the arguments to a property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    /// The first item of an array.
    First,
}

/// A property mutations aim at: its path, its schema and the schema of each step's value.
#[derive(Debug, Clone)]
pub(super) struct Target<'s> {
    /// Each step with the schema of the value it reaches.
    pub steps: Vec<(Step, &'s Value)>,
    /// The property's schema, resolved.
    pub schema: &'s Map<String, Value>,
    /// Whether the object holding it requires it.
    pub required: bool,
}

impl Target<'_> {
    /// The JSON pointer of the property, e.g. `/filters/min_score`.
    pub(super) fn pointer(&self) -> String {
        let mut out = String::new();
        for (step, _) in &self.steps {
            out.push('/');
            match step {
                Step::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
                Step::First => out.push('0'),
            }
        }
        out
    }

    /// Whether the property sits inside another property (an object's or an array item's).
    pub(super) fn nested(&self) -> bool {
        self.steps.len() > 1
    }
}

/// A tool's argument schema.
pub(super) struct Schema<'s> {
    root: &'s Value,
}

impl<'s> Schema<'s> {
    pub(super) fn new(root: &'s Value) -> Self {
        Self { root }
    }

    /// `schema` with local `$ref`s (`#/$defs/x`) and a lone `allOf` wrapper followed.
    pub(super) fn resolve(&self, mut schema: &'s Value) -> Option<&'s Map<String, Value>> {
        for _ in 0..MAX_REF_HOPS {
            let map = schema.as_object()?;
            if let Some(reference) = map.get("$ref") {
                schema = self.root.pointer(reference.as_str()?.strip_prefix('#')?)?;
                continue;
            }
            match map.get("allOf") {
                Some(Value::Array(only)) if only.len() == 1 && !has_structure(map) => {
                    schema = only.first()?;
                }
                _ => return Some(map),
            }
        }
        None
    }

    /// A value `schema` should accept.
    pub(super) fn value(&self, schema: &'s Value) -> Option<Value> {
        self.value_at(schema, 0)
    }

    fn value_at(&self, schema: &'s Value, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        if schema == &Value::Bool(true) {
            return Some(Value::String("example".into()));
        }
        let map = self.resolve(schema)?;
        if let Some(given) = own_word(map) {
            return Some(given);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                return branches.iter().find_map(|b| self.value_at(b, depth + 1));
            }
        }
        if map.contains_key("allOf") {
            return None;
        }
        let types = types(map);
        let chosen = types
            .iter()
            .copied()
            .find(|t| *t != "null")
            .or(types.first().copied());
        let chosen = chosen.unwrap_or_else(|| {
            if map.contains_key("properties") {
                "object"
            } else if map.contains_key("items") || map.contains_key("prefixItems") {
                "array"
            } else {
                "string"
            }
        });
        match chosen {
            "object" => self.object(map, depth).map(Value::Object),
            "array" => self.array(map, depth),
            "string" => Some(Value::String(string(map))),
            "integer" => integer(map),
            "number" => number(map),
            "boolean" => Some(Value::Bool(true)),
            "null" => Some(Value::Null),
            _ => None,
        }
    }

    /// An object with the required properties only.
    fn object(&self, map: &'s Map<String, Value>, depth: usize) -> Option<Map<String, Value>> {
        let properties = map.get("properties").and_then(Value::as_object);
        let mut out = Map::new();
        for name in required(map) {
            let schema = properties
                .and_then(|p| p.get(name))
                .or_else(|| map.get("additionalProperties").filter(|a| a.is_object()));
            let value = match schema {
                Some(schema) => self.value_at(schema, depth + 1)?,
                None => Value::String("example".into()),
            };
            out.insert(name.to_owned(), value);
        }
        Some(out)
    }

    fn array(&self, map: &'s Map<String, Value>, depth: usize) -> Option<Value> {
        if let Some(Value::Array(prefix)) = map.get("prefixItems") {
            let items: Option<Vec<Value>> = prefix
                .iter()
                .map(|item| self.value_at(item, depth + 1))
                .collect();
            return items.map(Value::Array);
        }
        let min = bound(map, "minItems").unwrap_or(1.0).max(1.0);
        let max = bound(map, "maxItems").unwrap_or(f64::MAX);
        // A few items at most: enough for any schema a tool would declare.
        let count = min.min(max).min(MAX_ITEMS) as usize;
        let item = match map.get("items") {
            Some(items) => self.value_at(items, depth + 1)?,
            None => Value::String("example".into()),
        };
        Some(Value::Array(vec![item; count]))
    }

    /// The properties of the arguments object (top level), then those one level down: inside
    /// an object property, or inside the first item of an array of objects.
    pub(super) fn targets(&self) -> Vec<Target<'s>> {
        let Some(root) = self.resolve(self.root) else {
            return Vec::new();
        };
        let top = self.properties(root, &[]);
        let mut nested = Vec::new();
        for target in &top {
            let (steps, object) = match kind_of(target.schema) {
                Some("object") => (target.steps.clone(), target.schema),
                Some("array") => {
                    let Some(items) = target.schema.get("items") else {
                        continue;
                    };
                    let Some(object) = self.resolve(items).filter(|s| kind_of(s) == Some("object"))
                    else {
                        continue;
                    };
                    let mut steps = target.steps.clone();
                    steps.push((Step::First, items));
                    (steps, object)
                }
                _ => continue,
            };
            nested.extend(self.properties(object, &steps));
        }
        top.into_iter().chain(nested).collect()
    }

    /// The declared properties of the object `schema`, each a step after `prefix`.
    fn properties(
        &self,
        schema: &'s Map<String, Value>,
        prefix: &[(Step, &'s Value)],
    ) -> Vec<Target<'s>> {
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return Vec::new();
        };
        let required = required(schema);
        properties
            .iter()
            .filter_map(|(name, sub)| {
                let resolved = self.resolve(sub)?;
                let mut steps = prefix.to_vec();
                steps.push((Step::Key(name.clone()), sub));
                Some(Target {
                    steps,
                    schema: resolved,
                    required: required.contains(&name.as_str()),
                })
            })
            .collect()
    }

    /// `base` with the property of `target` present (synthesised along its path where absent).
    pub(super) fn with_target(&self, base: &Value, target: &Target<'s>) -> Option<Value> {
        let mut out = base.clone();
        let mut at = &mut out;
        for (step, schema) in &target.steps {
            at = match step {
                Step::Key(key) => {
                    let map = at.as_object_mut()?;
                    if !map.contains_key(key) {
                        map.insert(key.clone(), self.value(schema)?);
                    }
                    map.get_mut(key)?
                }
                Step::First => at.as_array_mut()?.first_mut()?,
            };
        }
        Some(out)
    }
}

/// The value at `target`'s path inside `value`.
pub(super) fn get<'v>(value: &'v Value, target: &Target<'_>) -> Option<&'v Value> {
    target
        .steps
        .iter()
        .try_fold(value, |at, (step, _)| match step {
            Step::Key(key) => at.get(key),
            Step::First => at.get(0),
        })
}

/// `value` with the property at `target` replaced by `new` (`None`: removed).
pub(super) fn replace(value: &Value, target: &Target<'_>, new: Option<Value>) -> Option<Value> {
    let mut out = value.clone();
    let ((last, _), parents) = target.steps.split_last()?;
    let mut at = &mut out;
    for (step, _) in parents {
        at = match step {
            Step::Key(key) => at.get_mut(key)?,
            Step::First => at.get_mut(0)?,
        };
    }
    match (last, new) {
        (Step::Key(key), Some(new)) => {
            at.as_object_mut()?.insert(key.clone(), new);
        }
        (Step::Key(key), None) => {
            at.as_object_mut()?.remove(key)?;
        }
        (Step::First, Some(new)) => *at.get_mut(0)? = new,
        (Step::First, None) => return None,
    }
    Some(out)
}

/// The type names a schema declares (`type` as a name or a list).
pub(super) fn types(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether the schema composes others (`anyOf`, `oneOf`, `allOf`, `not`, `if`): mutations
/// leave such properties alone.
pub(super) fn composed(map: &Map<String, Value>) -> bool {
    ["anyOf", "oneOf", "allOf", "not", "if"]
        .iter()
        .any(|k| map.contains_key(*k))
}

/// The names `required` lists.
pub(super) fn required(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The one non-null type of a schema, when it declares exactly one.
fn kind_of(map: &Map<String, Value>) -> Option<&str> {
    let types: Vec<&str> = types(map).into_iter().filter(|t| *t != "null").collect();
    match types.as_slice() {
        [only] if !composed(map) => Some(only),
        _ => None,
    }
}

/// Whether a schema holding a one-element `allOf` says more than the wrapped schema.
fn has_structure(map: &Map<String, Value>) -> bool {
    [
        "type",
        "properties",
        "items",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "required",
    ]
    .iter()
    .any(|k| map.contains_key(*k))
}

/// The value the schema itself gives: `default`, `const`, the first non-null `enum` option,
/// the first of `examples`.
fn own_word(map: &Map<String, Value>) -> Option<Value> {
    if let Some(value) = map.get("default").or_else(|| map.get("const")) {
        return Some(value.clone());
    }
    if let Some(Value::Array(options)) = map.get("enum") {
        return options
            .iter()
            .find(|o| !o.is_null())
            .or(options.first())
            .cloned();
    }
    match map.get("examples") {
        Some(Value::Array(examples)) => examples.first().cloned(),
        _ => None,
    }
}

fn bound(map: &Map<String, Value>, key: &str) -> Option<f64> {
    map.get(key).and_then(Value::as_f64)
}

fn string(map: &Map<String, Value>) -> String {
    if let Some(value) = map
        .get("format")
        .and_then(Value::as_str)
        .and_then(formatted)
    {
        return value.to_owned();
    }
    let min = bound(map, "minLength").unwrap_or(0.0) as usize;
    let max = bound(map, "maxLength").map_or(usize::MAX, |m| m as usize);
    let mut text = String::from("example");
    while text.chars().count() < min {
        text.push('x');
    }
    text.chars().take(max).collect()
}

/// A well-formed value of a common `format`.
fn formatted(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2024-01-02T03:04:05Z",
        "date" => "2024-01-02",
        "time" => "03:04:05Z",
        "email" => "user@example.com",
        "uri" | "url" | "iri" => "https://example.com/",
        "uri-reference" | "iri-reference" => "/example",
        "hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "uuid" => "00000000-0000-4000-8000-000000000000",
        "duration" => "PT1M",
        _ => return None,
    })
}

fn integer(map: &Map<String, Value>) -> Option<Value> {
    let low = bound(map, "minimum")
        .map(f64::ceil)
        .or_else(|| bound(map, "exclusiveMinimum").map(|m| m.floor() + 1.0));
    let high = bound(map, "maximum")
        .map(f64::floor)
        .or_else(|| bound(map, "exclusiveMaximum").map(|m| m.ceil() - 1.0));
    let mut value = 2.0_f64;
    if let Some(low) = low.filter(|low| *low > value) {
        value = low;
    }
    if let Some(high) = high.filter(|high| *high < value) {
        value = high;
    }
    if let Some(step) = bound(map, "multipleOf").filter(|s| *s >= 1.0 && s.fract() == 0.0) {
        value = (value / step).ceil() * step;
    }
    (value.is_finite() && value.abs() < 9.0e15).then(|| Value::from(value as i64))
}

fn number(map: &Map<String, Value>) -> Option<Value> {
    if map.contains_key("multipleOf") {
        return integer(map);
    }
    let mut value = 1.5_f64;
    if let Some(low) = bound(map, "minimum").filter(|low| *low > value) {
        value = low;
    }
    if let Some(low) = bound(map, "exclusiveMinimum").filter(|low| *low >= value) {
        value = low + 1.0;
    }
    if let Some(high) = bound(map, "maximum").filter(|high| *high < value) {
        value = high;
    }
    if let Some(high) = bound(map, "exclusiveMaximum").filter(|high| *high <= value) {
        value = high - 1.0;
    }
    Number::from_f64(value).map(Value::Number)
}
