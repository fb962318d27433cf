//! Typed tool inputs: a tool's arguments are a `#[derive(Deserialize, JsonSchema)]` struct,
//! its published schema is generated from that struct ([`schema_of`]) and its arguments are
//! parsed into it ([`parse`]), so a schema cannot promise what the parser refuses. The doc
//! comments of the struct's fields are the descriptions the model sees.
//!
//! The generated schema is shaped for the gateway and the providers like a hand-written one:
//! JSON Schema 2020-12 with `$schema`, every subschema inline (no `$defs`), no title or
//! description of its own (the tool's description says that), an optional argument's type
//! without `null` (leaving it out says the same, and the validator then refuses an explicit
//! `null` as before), no integer `format`s (`uint64` and the like mean nothing to a model),
//! no `default: null` or `additionalProperties: true`, and each schema's keys in a stable order: `$schema` and `type` first,
//! `required`, `additionalProperties`, `default` and `description` last.

use keel_types::ToolError;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The input schema of a tool whose arguments are a `T`, in the shape of
/// [`keel_types::ToolSpec::parameters`].
pub fn schema_of<T: JsonSchema>() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut root = match schema.to_value() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    // The struct's own name and doc are the tool's business, said in its description.
    root.shift_remove("title");
    root.shift_remove("description");
    root.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(tidy(root, false))
}

/// `args` parsed into a `T`. The gateway has validated them against [`schema_of`]`::<T>()`
/// already, so this fails only for a direct call; it fails as a bad argument does.
pub fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// One schema tidied; `optional` says whether it is a property its object does not require.
fn tidy(mut schema: Map<String, Value>, optional: bool) -> Map<String, Value> {
    let required: Vec<String> = match schema.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if let Value::Object(map) = property {
                *map = tidy(std::mem::take(map), !required.contains(name));
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(map)) = schema.get_mut(key) {
            *map = tidy(std::mem::take(map), false);
        }
    }
    if let Some(Value::Array(subs)) = schema.get_mut("anyOf") {
        for sub in subs.iter_mut() {
            if let Value::Object(map) = sub {
                *map = tidy(std::mem::take(map), false);
            }
        }
    }
    if optional {
        drop_null(&mut schema);
    }
    // Any property is allowed unless said otherwise: `true` says nothing.
    if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
        schema.shift_remove("additionalProperties");
    }
    // Leaving an optional argument out is its default; `null` would say it may be null.
    if schema.get("default").is_some_and(Value::is_null) {
        schema.shift_remove("default");
    }
    if matches!(schema.get("type"), Some(t) if t == "integer" || t == "number") {
        schema.remove("format");
    }
    ordered(schema)
}

/// Takes `null` out of an optional property's `type` array, `enum` and `anyOf`.
fn drop_null(schema: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    // An optional enum of schemas: `anyOf` with a `{"type": "null"}` member.
    if let Some(Value::Array(subs)) = schema.get_mut("anyOf") {
        subs.retain(|sub| sub.get("type").is_none_or(|t| t != "null"));
        // One schema left: it is the property's schema, under the property's own keys.
        if let [Value::Object(only)] = subs.as_mut_slice() {
            let mut merged = std::mem::take(only);
            schema.shift_remove("anyOf");
            merged.extend(std::mem::take(schema));
            *schema = merged;
        }
    }
}

/// `schema`'s keys in the stable order: `$schema`, `type`, the rest as generated,
/// `required`, `additionalProperties`, `default`, `description`.
fn ordered(mut schema: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["$schema", "type"] {
        if let Some(value) = schema.shift_remove(key) {
            out.insert(key.into(), value);
        }
    }
    let last: Vec<(String, Value)> = ["required", "additionalProperties", "default", "description"]
        .into_iter()
        .filter_map(|key| schema.shift_remove(key).map(|v| (key.to_owned(), v)))
        .collect();
    out.extend(schema);
    out.extend(last);
    out
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// A doc comment that must not reach the schema.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Sample {
        /// Required text.
        name: String,
        /// An optional count.
        #[serde(default)]
        max_count: Option<u32>,
        /// An optional choice of shapes.
        #[serde(default)]
        either: Option<Either>,
        /// A free object.
        #[serde(default)]
        extra: Option<Map<String, Value>>,
    }

    /// One or the other.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(f64),
    }

    #[test]
    fn a_generated_schema_has_the_shape_of_a_hand_written_one() {
        assert_eq!(
            schema_of::<Sample>(),
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Required text."},
                    "maxCount": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "An optional count."
                    },
                    "either": {
                        "anyOf": [{"type": "string"}, {"type": "number"}],
                        "description": "An optional choice of shapes."
                    },
                    "extra": {"type": "object", "description": "A free object."}
                },
                "required": ["name"],
                "additionalProperties": false
            })
        );
        // The key order is part of the shape (the reference-run snapshots pin request bodies).
        let keys: Vec<String> = match schema_of::<Sample>() {
            Value::Object(map) => map.keys().cloned().collect(),
            _ => Vec::new(),
        };
        assert_eq!(
            keys,
            [
                "$schema",
                "type",
                "properties",
                "required",
                "additionalProperties"
            ]
        );
    }

    #[test]
    fn arguments_parse_into_the_struct_and_a_misfit_is_a_bad_argument() {
        let parsed: Sample = parse(json!({"name": "a", "maxCount": 3, "either": 1.5})).unwrap();
        assert_eq!((parsed.name.as_str(), parsed.max_count), ("a", Some(3)));
        assert!(matches!(parsed.either, Some(Either::Number(n)) if n == 1.5));
        let parsed: Sample = parse(json!({"name": "a", "either": "x", "extra": {"k": 1}})).unwrap();
        assert!(matches!(parsed.either, Some(Either::Text(t)) if t == "x"));
        assert_eq!(
            parsed.extra.and_then(|e| e.get("k").cloned()),
            Some(json!(1))
        );
        // `null` for an optional argument is leaving it out.
        let parsed: Sample = parse(json!({"name": "a", "maxCount": null})).unwrap();
        assert_eq!(parsed.max_count, None);
        for bad in [
            json!({}),
            json!({"name": 1}),
            json!({"name": "a", "other": true}),
        ] {
            let err = parse::<Sample>(bad.clone()).unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments(_)),
                "{bad}: {err:?}"
            );
        }
    }
}
