//! The portable form of the schemas the server publishes: no nullable `type` arrays
//! (`"type": ["string", "null"]`), which some clients and model providers refuse. An optional
//! property (not in its object's `required`) that may be null loses the `null` — leaving it
//! out says the same; any other nullable schema becomes `anyOf` of the schema without `null`
//! and `{"type": "null"}`. A `null` in the `enum` of such an optional property goes too.

use serde_json::{Map, Value};

/// `schema` in its portable form.
pub(crate) fn portable(schema: &mut Map<String, Value>) {
    walk(schema, false);
}

/// Rewrites one schema; `optional` says whether it is a property its object does not require.
fn walk(schema: &mut Map<String, Value>, optional: bool) {
    let required: Vec<String> = match schema.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if let Value::Object(property) = property {
                walk(property, !required.contains(name));
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(Value::Object(sub)) = schema.get_mut(key) {
            walk(sub, false);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = schema.get_mut(key) {
            for sub in subs.iter_mut().filter_map(Value::as_object_mut) {
                walk(sub, false);
            }
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = schema.get_mut(key) {
            for def in defs.values_mut().filter_map(Value::as_object_mut) {
                walk(def, false);
            }
        }
    }
    denull(schema, optional);
}

/// Takes `null` out of the schema's own `type` array.
fn denull(schema: &mut Map<String, Value>, optional: bool) {
    let Some(Value::Array(types)) = schema.get("type") else {
        return;
    };
    if !types.iter().any(|t| t == "null") {
        return;
    }
    let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    let rest = match rest.len() {
        0 => return,
        1 => rest.into_iter().next().unwrap_or(Value::Null),
        _ => Value::Array(rest),
    };
    schema.insert("type".into(), rest);
    if optional {
        if let Some(Value::Array(values)) = schema.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
        return;
    }
    // A required nullable value: the schema without null, or null.
    let mut non_null = std::mem::take(schema);
    if let Some(Value::Array(values)) = non_null.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let description = non_null.remove("description");
    let mut null = Map::new();
    null.insert("type".into(), Value::from("null"));
    schema.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(non_null), Value::Object(null)]),
    );
    if let Some(description) = description {
        schema.insert("description".into(), description);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn portable_of(value: Value) -> Value {
        let Value::Object(mut map) = value else {
            panic!("not an object")
        };
        portable(&mut map);
        Value::Object(map)
    }

    #[test]
    fn an_optional_nullable_property_loses_its_null() {
        let schema = json!({
            "type": "object",
            "properties": {
                "status": {"type": ["string", "null"], "enum": ["a", "b", null]},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "name": {"type": "string"}
            },
            "required": ["name"]
        });
        assert_eq!(
            portable_of(schema),
            json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["a", "b"]},
                    "limit": {"type": "integer", "minimum": 1},
                    "name": {"type": "string"}
                },
                "required": ["name"]
            })
        );
    }

    #[test]
    fn a_required_or_nested_nullable_becomes_any_of() {
        let schema = json!({
            "type": "object",
            "properties": {
                "due": {"type": ["string", "null"], "description": "When."},
                "tags": {"type": "array", "items": {"type": ["string", "null"]}}
            },
            "required": ["due"]
        });
        assert_eq!(
            portable_of(schema),
            json!({
                "type": "object",
                "properties": {
                    "due": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "When."},
                    "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}}
                },
                "required": ["due"]
            })
        );
    }
}
