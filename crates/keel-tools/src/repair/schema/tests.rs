//! Unit tests of the schema-guided repairs, one rule each.

use serde_json::json;

use super::*;

fn repaired(schema: Value, mut args: Value) -> (Value, Vec<(String, String)>) {
    let repairs = repair_arguments(&schema, &mut args);
    let kinds = repairs
        .into_iter()
        .map(|r| (r.path, r.kind.as_str().to_owned()))
        .collect();
    (args, kinds)
}

fn kinds(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, k)| ((*p).to_owned(), (*k).to_owned()))
        .collect()
}

#[test]
fn numeric_strings_become_numbers_only_when_they_fit_the_type() {
    let schema = json!({ "type": "object", "properties": {
        "n": { "type": "integer" }, "x": { "type": "number" }, "m": { "type": "integer" }
    }});
    let (args, done) = repaired(schema, json!({ "n": "3", "x": " 2.5 ", "m": "2.5" }));
    assert_eq!(args, json!({ "n": 3, "x": 2.5, "m": "2.5" }));
    assert_eq!(
        done,
        kinds(&[("/n", "coerce_number"), ("/x", "coerce_number")])
    );
}

#[test]
fn integral_float_text_becomes_an_integer() {
    let schema = json!({ "type": "object", "properties": { "n": { "type": "integer" } } });
    let (args, _) = repaired(schema, json!({ "n": "4.0" }));
    assert_eq!(args, json!({ "n": 4 }));
}

#[test]
fn non_numbers_are_left_alone() {
    let schema = json!({ "type": "object", "properties": { "n": { "type": "number" } } });
    for text in ["NaN", "inf", "", "0x10", "+3", "3 apples"] {
        let (args, done) = repaired(schema.clone(), json!({ "n": text }));
        assert_eq!(args, json!({ "n": text }));
        assert!(done.is_empty(), "{text}");
    }
}

#[test]
fn booleans_and_strings_convert_both_ways() {
    let schema = json!({ "type": "object", "properties": {
        "a": { "type": "boolean" }, "b": { "type": "boolean" }, "c": { "type": "string" },
        "d": { "type": "string" }, "e": { "type": "boolean" }
    }});
    let (args, _) = repaired(
        schema,
        json!({ "a": "YES", "b": "0", "c": true, "d": 7, "e": "maybe" }),
    );
    assert_eq!(
        args,
        json!({ "a": true, "b": false, "c": "true", "d": "7", "e": "maybe" })
    );
}

#[test]
fn valid_values_are_never_touched() {
    let schema = json!({ "type": "object", "properties": {
        "s": { "type": "string" }, "u": { "type": ["string", "integer"] }
    }});
    let (args, done) = repaired(schema, json!({ "s": "3", "u": 3, "other": "x" }));
    assert_eq!(args, json!({ "s": "3", "u": 3, "other": "x" }));
    assert!(done.is_empty());
}

#[test]
fn enum_matches_ignore_case_and_space_but_not_ambiguity() {
    let schema = json!({ "type": "object", "properties": {
        "u": { "enum": ["celsius", "fahrenheit"] },
        "v": { "enum": ["A", "a"] },
        "w": { "enum": ["A", "a"] }
    }});
    let (args, _) = repaired(schema, json!({ "u": " Celsius ", "v": "A ", "w": "á" }));
    assert_eq!(args, json!({ "u": "celsius", "v": "A", "w": "á" }));
}

#[test]
fn lone_values_are_wrapped_and_their_items_repaired() {
    let schema = json!({ "type": "object", "properties": {
        "ids": { "type": "array", "items": { "type": "integer" } },
        "tags": { "type": "array", "items": { "type": "string" } },
        "none": { "type": "array" }
    }});
    let (args, done) = repaired(
        schema,
        json!({ "ids": "7", "tags": "[\"a\",\"b\"]", "none": null }),
    );
    // An optional `null` the schema does not allow is dropped, never wrapped.
    assert_eq!(args, json!({ "ids": [7], "tags": ["a", "b"] }));
    assert_eq!(
        done,
        kinds(&[
            ("/none", "drop_null"),
            ("/ids", "wrap_array"),
            ("/ids/0", "coerce_number"),
            ("/tags", "decode_json_string")
        ])
    );
}

#[test]
fn lone_values_the_items_cannot_take_are_not_wrapped() {
    let schema = json!({ "type": "object", "properties": {
        "tags": { "type": "array", "items": { "type": "string" } },
        "people": { "type": "array", "items": { "$ref": "#/$defs/p" } }
    }, "$defs": { "p": { "type": "object" } } });
    let (args, done) = repaired(
        schema,
        json!({ "tags": { "a": 1 }, "people": { "n": "x" } }),
    );
    assert_eq!(
        args,
        json!({ "tags": { "a": 1 }, "people": [{ "n": "x" }] })
    );
    assert_eq!(done, kinds(&[("/people", "wrap_array")]));
}

#[test]
fn unknown_properties_are_dropped_only_when_forbidden() {
    let closed =
        json!({ "type": "object", "properties": { "a": {} }, "additionalProperties": false });
    let open = json!({ "type": "object", "properties": { "a": {} } });
    let (args, done) = repaired(closed, json!({ "a": 1, "b/c": 2 }));
    assert_eq!(args, json!({ "a": 1 }));
    assert_eq!(done, kinds(&[("/b~1c", "drop_unknown")]));
    let (args, _) = repaired(open, json!({ "a": 1, "b": 2 }));
    assert_eq!(args, json!({ "a": 1, "b": 2 }));
}

#[test]
fn optional_nulls_are_dropped_only_where_null_is_not_allowed() {
    let schema = json!({ "type": "object",
        "properties": {
            "days": { "type": "integer" },
            "unit": { "enum": ["c", "f"] },
            "note": { "type": ["string", "null"] },
            "when": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
            "any": {},
            "city": { "type": "string" },
            "tags": { "anyOf": [{ "type": "string" }, { "$ref": "#/$defs/list" }] }
        },
        "required": ["city"],
        "$defs": { "list": { "type": "array" } } });
    let (args, done) = repaired(
        schema,
        json!({ "days": null, "unit": null, "note": null, "when": null, "any": null,
                "city": null, "tags": null }),
    );
    // A required `null` stays (and fails the schema): nothing is invented.
    assert_eq!(
        args,
        json!({ "note": null, "when": null, "any": null, "city": null })
    );
    assert_eq!(
        done,
        kinds(&[
            ("/days", "drop_null"),
            ("/unit", "drop_null"),
            ("/tags", "drop_null")
        ])
    );
}

#[test]
fn numeric_text_beyond_64_bits_is_never_rounded() {
    let schema = json!({ "type": "object", "properties": {
        "n": { "type": "integer" }, "x": { "type": "number" },
        "f": { "type": "integer" },
        "ids": { "type": "array", "items": { "type": "integer" } }
    }});
    let args = json!({ "n": "18446744073709551617", "x": "-9223372036854775809",
                       "f": "9007199254740993.0", "ids": "[18446744073709551617]" });
    let (after, done) = repaired(schema, args.clone());
    assert_eq!(after, args);
    assert!(done.is_empty(), "{done:?}");
}

#[test]
fn only_required_properties_with_defaults_are_filled() {
    let schema = json!({ "type": "object",
        "properties": {
            "unit": { "enum": ["c", "f"], "default": "c" },
            "lang": { "type": "string", "default": "en" },
            "city": { "type": "string" }
        },
        "required": ["unit", "city"] });
    let (args, done) = repaired(schema, json!({}));
    assert_eq!(args, json!({ "unit": "c" }));
    assert_eq!(done, kinds(&[("/unit", "fill_default")]));
}

#[test]
fn refs_into_defs_are_followed() {
    let schema = json!({
        "type": "object",
        "properties": { "where": { "$ref": "#/$defs/place" } },
        "$defs": { "place": { "type": "object", "properties": {
            "lat": { "type": "number" }, "next": { "$ref": "#/$defs/place" }
        }, "additionalProperties": false } }
    });
    let (args, _) = repaired(
        schema,
        json!({ "where": { "lat": "1.5", "x": 1, "next": { "lat": "2" } } }),
    );
    assert_eq!(
        args,
        json!({ "where": { "lat": 1.5, "next": { "lat": 2 } } })
    );
}

#[test]
fn simple_any_of_acts_as_a_type_union() {
    let schema = json!({ "type": "object", "properties": {
        "n": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
        "o": { "anyOf": [{ "type": "object", "properties": { "k": { "type": "integer" } } }, { "type": "null" }] }
    }});
    let (args, _) = repaired(schema, json!({ "n": "5", "o": { "k": "6" } }));
    assert_eq!(args, json!({ "n": 5, "o": { "k": 6 } }));
}

#[test]
fn root_string_holding_an_object_is_decoded() {
    let (value, repair) = decode_arguments(&json!("{\"a\": 1}")).unwrap();
    assert_eq!(value, json!({ "a": 1 }));
    assert_eq!(repair.kind, RepairKind::DecodeJsonString);
    assert!(decode_arguments(&json!("[1]")).is_none());
    assert!(decode_arguments(&json!({ "a": 1 })).is_none());
}

#[test]
fn self_referencing_schemas_terminate() {
    let schema = json!({ "$ref": "#" });
    let (args, done) = repaired(schema, json!({ "a": 1 }));
    assert_eq!(args, json!({ "a": 1 }));
    assert!(done.is_empty());
}
