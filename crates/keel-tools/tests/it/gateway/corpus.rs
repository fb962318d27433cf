//! A corpus of malformed tool calls and what the gateway makes of each, as one YAML snapshot.
//!
//! Every entry: the tool name and raw arguments the model sent, the gateway mode, the decision,
//! the tool that runs (when the name was repaired), the repairs (`path kind: from → to`), and
//! the final arguments or the issues that blocked the call. Each case also states its expected
//! decision inline, and every allowed call is executed to check the tool received exactly the
//! final arguments. Review `snapshots/…corpus.snap` like code.

use keel_types::{GuardDecision, Issue, Tool as _};
use keel_workspace::GatewayMode;
use serde::Serialize;
use serde_json::Value;

use super::{call, gateway_of, guard, tools};

use GatewayMode::{Off, Repair, Validate};
use GuardDecision::{Accepted as A, Blocked as B, Repaired as R};

/// (case, tool sent, raw arguments, mode, expected decision)
type Case = (
    &'static str,
    &'static str,
    &'static str,
    GatewayMode,
    GuardDecision,
);

// One case per line reads as a table; rustfmt would spread each over seven lines.
#[rustfmt::skip]
const CASES: &[Case] = &[
    // ── get_weather: scalars, enums, booleans, unknown and missing properties ──────────────
    ("valid_minimal", "get_weather", r#"{"city":"Paris"}"#, Repair, A),
    ("valid_full", "get_weather", r#"{"city":"Paris","days":3,"unit":"celsius","include_hourly":true}"#, Repair, A),
    ("days_numeric_string", "get_weather", r#"{"city":"Paris","days":"3"}"#, Repair, R),
    ("days_integral_float_string", "get_weather", r#"{"city":"Paris","days":"3.0"}"#, Repair, R),
    ("days_fractional_string", "get_weather", r#"{"city":"Paris","days":"2.5"}"#, Repair, B),
    ("days_fractional_number", "get_weather", r#"{"city":"Paris","days":2.5}"#, Repair, B),
    ("days_string_below_minimum", "get_weather", r#"{"city":"Paris","days":"0"}"#, Repair, B),
    ("days_words", "get_weather", r#"{"city":"Paris","days":"three"}"#, Repair, B),
    ("days_padded_string", "get_weather", r#"{"city":"Paris","days":" 7 "}"#, Repair, R),
    ("city_number", "get_weather", r#"{"city":42}"#, Repair, R),
    ("city_boolean", "get_weather", r#"{"city":true}"#, Repair, R),
    ("city_null", "get_weather", r#"{"city":null}"#, Repair, B),
    ("city_empty", "get_weather", r#"{"city":""}"#, Repair, B),
    ("unit_capitalised", "get_weather", r#"{"city":"Paris","unit":"Celsius"}"#, Repair, R),
    ("unit_upper_padded", "get_weather", r#"{"city":"Paris","unit":" FAHRENHEIT "}"#, Repair, R),
    ("unit_unknown", "get_weather", r#"{"city":"Paris","unit":"kelvin"}"#, Repair, B),
    ("unit_abbreviated", "get_weather", r#"{"city":"Paris","unit":"C"}"#, Repair, B),
    ("hourly_yes", "get_weather", r#"{"city":"Paris","include_hourly":"yes"}"#, Repair, R),
    ("hourly_false_upper", "get_weather", r#"{"city":"Paris","include_hourly":"FALSE"}"#, Repair, R),
    ("hourly_one_string", "get_weather", r#"{"city":"Paris","include_hourly":"1"}"#, Repair, R),
    ("hourly_number_not_coerced", "get_weather", r#"{"city":"Paris","include_hourly":1}"#, Repair, B),
    ("hourly_maybe", "get_weather", r#"{"city":"Paris","include_hourly":"maybe"}"#, Repair, B),
    ("extra_property", "get_weather", r#"{"city":"Paris","country":"FR"}"#, Repair, R),
    ("three_repairs", "get_weather", r#"{"city":"Paris","days":"2","unit":"Fahrenheit","foo":1}"#, Repair, R),
    ("missing_city_not_invented", "get_weather", r#"{"days":3}"#, Repair, B),
    ("empty_arguments", "get_weather", "", Repair, B),
    ("mixed_fixable_and_not", "get_weather", r#"{"city":42,"unit":"kelvin","extra":true}"#, Repair, B),
    // ── nulls for optional properties, as OpenAI strict mode sends them ────────────────────
    ("strict_mode_optional_nulls", "get_weather", r#"{"city":"Paris","days":null,"unit":null,"include_hourly":null}"#, Repair, R),
    ("strict_mode_nulls_validate_mode", "get_weather", r#"{"city":"Paris","days":null}"#, Validate, B),
    ("strict_mode_nested_nulls", "search_docs", r#"{"query":"q","limit":2,"tags":null,"sort":null,"filters":{"lang":null,"min_score":0.5}}"#, Repair, R),
    ("ref_optional_null", "create_event", r#"{"title":"T","when":{"start":"09:00","duration_minutes":null}}"#, Repair, R),
    // ── integers beyond 64 bits: blocked, never rounded ────────────────────────────────────
    ("days_beyond_u64", "get_weather", r#"{"city":"Paris","days":18446744073709551617}"#, Repair, B),
    ("priority_below_i64", "create_event", r#"{"title":"T","when":{"start":"09:00"},"priority":-9223372036854775809}"#, Repair, B),
    ("beyond_64_bits_off_mode", "get_weather", r#"{"city":"Paris","days":99999999999999999999}"#, Off, B),
    ("u64_max_is_exact", "set_flag", r#"{"name":"x","weight":18446744073709551615}"#, Repair, A),
    ("large_float_is_a_float", "set_flag", r#"{"name":"x","weight":1.8446744073709552e19}"#, Repair, A),
    ("numeric_string_beyond_64_bits_not_coerced", "get_weather", r#"{"city":"Paris","days":"18446744073709551617"}"#, Repair, B),
    // ── every missing required property is named ───────────────────────────────────────────
    ("title_and_when_missing", "create_event", r#"{"priority":1}"#, Repair, B),
    // ── arguments sent as JSON text ────────────────────────────────────────────────────────
    ("arguments_json_string", "get_weather", r#""{\"city\":\"Paris\"}""#, Repair, R),
    ("arguments_json_string_then_coerced", "get_weather", r#""{\"city\":\"Paris\",\"days\":\"2\"}""#, Repair, R),
    ("arguments_plain_string", "get_weather", r#""Paris""#, Repair, B),
    ("arguments_array", "get_weather", r#"[{"city":"Paris"}]"#, Repair, B),
    ("arguments_malformed", "get_weather", r#"{"city":"#, Repair, B),
    ("arguments_single_quotes", "get_weather", "{'city': 'Paris'}", Repair, B),
    // ── validate and off modes ─────────────────────────────────────────────────────────────
    ("validate_valid", "get_weather", r#"{"city":"Paris","days":2}"#, Validate, A),
    ("validate_numeric_string", "get_weather", r#"{"city":"Paris","days":"3"}"#, Validate, B),
    ("validate_enum_case", "get_weather", r#"{"city":"Paris","unit":"Celsius","x":1}"#, Validate, B),
    ("validate_json_string", "get_weather", r#""{\"city\":\"Paris\"}""#, Validate, B),
    ("validate_misspelled_tool", "get_wether", r#"{"city":"Paris"}"#, Validate, B),
    ("off_wrong_types_pass_through", "get_weather", r#"{"city":42,"extra":1}"#, Off, A),
    ("off_misspelled_tool", "Get_Weather", r#"{"city":"Paris"}"#, Off, B),
    ("off_malformed_json", "get_weather", r#"{"city":"#, Off, B),
    // ── tool names ─────────────────────────────────────────────────────────────────────────
    ("name_case", "Get_Weather", r#"{"city":"Paris"}"#, Repair, R),
    ("name_one_typo", "get_wether", r#"{"city":"Paris"}"#, Repair, R),
    ("name_transposition", "get_waether", r#"{"city":"Paris"}"#, Repair, R),
    ("name_two_edits", "gte_wether", r#"{"city":"Paris"}"#, Repair, R),
    ("name_three_edits", "gte_wethr", r#"{"city":"Paris"}"#, Repair, B),
    ("name_partial", "weather", r#"{"city":"Paris"}"#, Repair, B),
    ("name_upper_and_days_string", "GET_WEATHER", r#"{"city":"Paris","days":"5"}"#, Repair, R),
    ("name_repaired_arguments_invalid", "get_wether", "{}", Repair, B),
    ("name_tie_between_tools", "bet_flag", r#"{"name":"x"}"#, Repair, B),
    ("outside_inventory_registered", "delete_everything", "{}", Repair, B),
    ("outside_inventory_near_miss", "delete_everythin", "{}", Repair, B),
    ("unknown_tool", "launch_rockets", "{}", Repair, B),
    ("empty_tool_name", "", "{}", Repair, B),
    // ── search_docs: arrays, defaults, nested objects ──────────────────────────────────────
    ("search_valid", "search_docs", r#"{"query":"rust","limit":5}"#, Repair, A),
    ("tags_lone_string", "search_docs", r#"{"query":"rust","limit":5,"tags":"async"}"#, Repair, R),
    ("tags_json_text", "search_docs", r#"{"query":"rust","limit":5,"tags":"[\"a\",\"b\"]"}"#, Repair, R),
    ("tags_number_item", "search_docs", r#"{"query":"rust","limit":5,"tags":[1,"b"]}"#, Repair, R),
    ("tags_lone_object", "search_docs", r#"{"query":"rust","limit":5,"tags":{"a":1}}"#, Repair, B),
    ("tags_too_many", "search_docs", r#"{"query":"q","limit":5,"tags":["a","b","c","d","e","f"]}"#, Repair, B),
    ("limit_missing_default_filled", "search_docs", r#"{"query":"rust"}"#, Repair, R),
    ("limit_numeric_string", "search_docs", r#"{"query":"rust","limit":"20"}"#, Repair, R),
    ("optional_default_not_filled", "search_docs", r#"{"query":"rust","limit":"2"}"#, Repair, R),
    ("query_missing", "search_docs", r#"{"limit":3}"#, Repair, B),
    ("query_and_limit_missing", "search_docs", "{}", Repair, B),
    ("filters_json_text_enum_case", "search_docs", r#"{"query":"q","limit":1,"filters":"{\"lang\":\"EN\"}"}"#, Repair, R),
    ("filters_nested_unknown", "search_docs", r#"{"query":"q","limit":1,"filters":{"lang":"fr","color":"red"}}"#, Repair, R),
    ("filters_score_string", "search_docs", r#"{"query":"q","limit":1,"filters":{"min_score":"0.5"}}"#, Repair, R),
    ("filters_score_out_of_range", "search_docs", r#"{"query":"q","limit":1,"filters":{"min_score":"5"}}"#, Repair, B),
    ("sort_case", "search_docs", r#"{"query":"q","limit":1,"sort":"Date"}"#, Repair, R),
    // ── create_event: arrays of objects, $ref, type lists ──────────────────────────────────
    ("event_valid", "create_event", r#"{"title":"Standup","when":{"start":"09:00","duration_minutes":15},"attendees":[{"email":"a@x.org"}]}"#, Repair, A),
    ("when_json_text", "create_event", r#"{"title":"Standup","when":"{\"start\":\"09:00\",\"duration_minutes\":\"30\"}"}"#, Repair, R),
    ("attendees_lone_object", "create_event", r#"{"title":"T","when":{"start":"09:00"},"attendees":{"email":"a@x.org"}}"#, Repair, R),
    ("attendee_optional_string", "create_event", r#"{"title":"T","when":{"start":"09:00"},"attendees":[{"email":"a@x.org","optional":"True"}]}"#, Repair, R),
    ("attendee_unknown_property", "create_event", r#"{"title":"T","when":{"start":"09:00"},"attendees":[{"email":"a@x.org"},{"email":"b@x.org","name":"B"}]}"#, Repair, R),
    ("attendee_missing_email", "create_event", r#"{"title":"T","when":{"start":"09:00"},"attendees":[{"name":"B"}]}"#, Repair, B),
    ("priority_string", "create_event", r#"{"title":"T","when":{"start":"09:00"},"priority":"2"}"#, Repair, R),
    ("priority_null", "create_event", r#"{"title":"T","when":{"start":"09:00"},"priority":null}"#, Repair, A),
    ("when_missing", "create_event", r#"{"title":"T"}"#, Repair, B),
    ("duration_string_zero", "create_event", r#"{"title":"T","when":{"start":"09:00","duration_minutes":"0"}}"#, Repair, B),
    // ── read_notes: the semantic check repairs `./` and blocks path escapes ────────────────
    ("path_inside", "read_notes", r#"{"path":"notes/today.md"}"#, Repair, A),
    ("path_dotdot", "read_notes", r#"{"path":"../secrets.txt"}"#, Repair, B),
    ("path_absolute", "read_notes", r#"{"path":"/etc/passwd"}"#, Repair, B),
    ("path_dotdot_nested", "read_notes", r#"{"path":"notes/../../x","max_lines":"10"}"#, Repair, B),
    ("path_escape_in_json_text", "read_notes", r#""{\"path\":\"../../x\"}""#, Repair, B),
    ("path_escape_after_name_repair", "Read_Notes", r#"{"path":"/etc/shadow"}"#, Repair, B),
    ("path_escape_off_mode", "read_notes", r#"{"path":"../x"}"#, Off, B),
    ("path_escape_validate_mode", "read_notes", r#"{"path":"../x"}"#, Validate, B),
    ("path_number_coerced_inside", "read_notes", r#"{"path":2024,"max_lines":"5"}"#, Repair, R),
    ("path_tool_repair", "read_notes", r#"{"path":"./notes/today.md"}"#, Repair, R),
    ("path_tool_repair_then_blocked", "read_notes", r#"{"path":"./../x"}"#, Repair, B),
    ("path_tool_repair_validate_mode", "read_notes", r#"{"path":"./notes/today.md"}"#, Validate, A),
    // ── set_flag: numbers and booleans ─────────────────────────────────────────────────────
    ("weight_exponent_string", "set_flag", r#"{"name":"x","weight":"1e3"}"#, Repair, R),
    ("enabled_no", "set_flag", r#"{"name":"x","enabled":"no"}"#, Repair, R),
    ("weight_nan_string", "set_flag", r#"{"name":"x","weight":"NaN"}"#, Repair, B),
];

#[derive(Serialize)]
struct Entry {
    case: &'static str,
    tool: &'static str,
    args: &'static str,
    mode: GatewayMode,
    decision: GuardDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    repairs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    issues: Vec<Issue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[tokio::test]
async fn malformed_calls_are_repaired_or_blocked_as_the_corpus_says() {
    assert!(CASES.len() >= 60, "the corpus has {} cases", CASES.len());
    let mut entries = Vec::with_capacity(CASES.len());
    let mut mismatches = Vec::new();
    for &(case, tool, args, mode, expected) in CASES {
        let tools = tools();
        let gateway = gateway_of(&tools);
        let verdict = guard(&gateway, &call(tool, args), mode).await;
        if verdict.decision() != expected {
            mismatches.push(format!("{case}: expected {expected:?}, got {verdict:?}"));
        }
        if verdict.is_allowed() {
            let ctx = crate::ctx(std::path::Path::new("."));
            gateway.execute(&ctx, &verdict).await.unwrap();
            let ran = tools
                .iter()
                .find(|t| t.spec().name == verdict.tool())
                .unwrap();
            assert_eq!(
                *ran.calls.lock().unwrap(),
                vec![verdict.arguments().cloned().unwrap()],
                "{case}: the tool receives exactly the final arguments"
            );
        } else {
            let ran: usize = tools.iter().map(|t| t.calls.lock().unwrap().len()).sum();
            assert_eq!(ran, 0, "{case}: a blocked call never runs");
        }
        entries.push(Entry {
            case,
            tool,
            args,
            mode,
            decision: verdict.decision(),
            runs: (verdict.tool() != tool).then(|| verdict.tool().to_owned()),
            repairs: verdict
                .repairs()
                .iter()
                .map(|r| {
                    let path = match (r.kind.as_str(), r.path.as_str()) {
                        ("tool_name", _) => "",
                        (_, "") => "(root) ",
                        (_, path) => &format!("{path} "),
                    };
                    format!("{path}{}: {} → {}", r.kind, r.from, r.to)
                })
                .collect(),
            note: verdict.repair_note(),
            arguments: verdict.arguments().cloned(),
            issues: verdict.issues().to_vec(),
        });
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    insta::assert_yaml_snapshot!("corpus", entries);
}
