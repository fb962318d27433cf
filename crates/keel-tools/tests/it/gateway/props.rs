//! Property: whatever a model sends — any JSON, JSON wrapped in a string, or any text, under
//! any tool name, with or without a repair model that answers anything — a tool is only ever
//! invoked (through `guard` then `execute`) with arguments valid against its schema, checked
//! by a separately compiled validator, and never with a path its check forbids.

use keel_types::{GuardDecision, Tool as _};
use keel_workspace::GatewayMode;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::{Answer, FakeModel, call, gateway_of, guard, tools};

/// Strings that trip the coercions and enum repairs, and some that look dangerous.
const STRINGS: &[&str] = &[
    "",
    "3",
    "2.5",
    "0",
    "-1",
    "3.0",
    "1e3",
    " 7 ",
    "yes",
    "No",
    "TRUE",
    "false",
    "1",
    "maybe",
    "Celsius",
    " FAHRENHEIT ",
    "kelvin",
    "Date",
    "EN",
    "fr",
    "Paris",
    "[\"a\",\"b\"]",
    "[1]",
    "{\"lang\":\"fr\"}",
    "{\"start\":\"9\",\"duration_minutes\":\"2\"}",
    "{\"email\":\"a\"}",
    "../x",
    "/etc/passwd",
    "notes/a.md",
    "NaN",
    "null",
    "{",
    "9223372036854775808",
];

/// Property names of the fake tools, plus strangers.
const KEYS: &[&str] = &[
    "city",
    "days",
    "unit",
    "include_hourly",
    "query",
    "tags",
    "limit",
    "sort",
    "filters",
    "lang",
    "min_score",
    "title",
    "when",
    "start",
    "duration_minutes",
    "attendees",
    "email",
    "optional",
    "priority",
    "path",
    "max_lines",
    "name",
    "enabled",
    "weight",
    "x",
    "City",
];

/// Tool names as sent: right, misspelled, ambiguous, unlisted, unknown.
const NAMES: &[&str] = &[
    "get_weather",
    "search_docs",
    "create_event",
    "read_notes",
    "set_flag",
    "get_flag",
    "Get_Weather",
    "get_wether",
    "search_doc",
    "READ_NOTES",
    "creat_event",
    "bet_flag",
    "delete_everything",
    "nope",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-20i64..20).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-100.0f64..100.0).prop_map(Value::from),
        select(STRINGS).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((select(KEYS), inner), 0..6).prop_map(|pairs| {
                let map: Map<String, Value> =
                    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                Value::Object(map)
            }),
        ]
    })
}

/// Raw argument text: JSON, JSON text inside a JSON string, or arbitrary text.
fn raw_arguments() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => json().prop_map(|v| v.to_string()),
        1 => json().prop_map(|v| Value::String(v.to_string()).to_string()),
        1 => "\\PC{0,40}",
    ]
}

/// What the fake repair model answers, if there is one.
fn model_answer() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        2 => Just(None),
        1 => json().prop_map(|v| Some(v.to_string())),
        1 => json().prop_map(|v| Some(format!("```json\n{v}\n```"))),
        1 => "\\PC{0,30}".prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn tools_only_ever_run_with_schema_valid_arguments(
        name in select(NAMES),
        raw in raw_arguments(),
        repair in any::<bool>(),
        answer in model_answer(),
    ) {
        let mode = if repair { GatewayMode::Repair } else { GatewayMode::Validate };
        let tools = tools();
        let mut gateway = gateway_of(&tools);
        let model = answer.map(|text| FakeModel::answering([Answer::Text(text)]));
        if let Some(model) = &model {
            gateway = gateway.with_repair_model(model.clone());
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let verdict = runtime.block_on(async {
            let verdict = guard(&gateway, &call(name, &raw), mode).await;
            if verdict.is_allowed() {
                let ctx = crate::ctx(std::path::Path::new("."));
                gateway.execute(&ctx, &verdict).await.unwrap();
            }
            verdict
        });

        let mut runs = 0;
        for tool in &tools {
            let validator = jsonschema::validator_for(&tool.spec().parameters).unwrap();
            for args in tool.calls.lock().unwrap().iter() {
                runs += 1;
                prop_assert!(validator.is_valid(args), "{} ran with {args}", tool.spec().name);
                prop_assert!(super::inventory().contains(&tool.spec().name));
                if let Some(path) = args.get("path").and_then(Value::as_str) {
                    prop_assert!(!path.starts_with('/') && !path.split('/').any(|p| p == ".."));
                }
            }
        }
        prop_assert_eq!(runs, usize::from(verdict.is_allowed()));
        if verdict.decision() == GuardDecision::Accepted {
            // Accepted means untouched: the tool got exactly what the model sent.
            let sent: Value = match raw.trim() {
                "" => Value::Object(Map::new()),
                text => serde_json::from_str(text).unwrap(),
            };
            prop_assert_eq!(verdict.arguments(), Some(&sent));
            prop_assert_eq!(verdict.tool(), name);
        }
        if !repair {
            prop_assert!(verdict.repairs().is_empty());
            prop_assert_eq!(model.as_ref().map_or(0, |m| m.request_count()), 0);
        }
        // The model is asked at most once per call.
        prop_assert!(model.as_ref().map_or(0, |m| m.request_count()) <= 1);
    }
}
