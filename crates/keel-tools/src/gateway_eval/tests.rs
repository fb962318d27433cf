//! Unit tests of the gateway evaluation: the generator against rich schemas, the whole
//! evaluation against a real gateway (honest, and made to misbehave), the scores, and case files.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{GuardDecision, Issue, Repair, RepairKind, Tool, ToolError, ToolOutput, ToolSpec};
use serde_json::json;

use super::*;

/// A tool whose schema has one property of each kind the generator aims at.
fn weather_spec() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "weather".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "city": { "type": "string", "minLength": 1 },
                "days": { "type": "integer", "minimum": 1, "maximum": 14 },
                "unit": { "type": "string", "enum": ["celsius", "fahrenheit"] },
                "hourly": { "type": "boolean" },
                "tags": { "type": "array", "items": { "type": "string" } },
                "filters": {
                    "type": "object",
                    "properties": {
                        "min_score": { "type": "number", "minimum": 0 },
                        "lang": { "type": "string" }
                    },
                    "required": ["lang"],
                    "additionalProperties": false
                },
                "format": { "type": "string", "default": "short" }
            },
            "required": ["city", "format"],
            "additionalProperties": false
        }),
    }
}

/// A tool whose schema allows undeclared properties and has an array of objects.
fn notes_spec() -> ToolSpec {
    ToolSpec {
        name: "add_notes".into(),
        description: "notes".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "notes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": { "pinned": { "type": "boolean" }, "text": { "type": "string" } },
                        "required": ["text"]
                    }
                }
            },
            "required": ["notes"]
        }),
    }
}

/// How a test tool misbehaves, to show the evaluation catches it.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Honest,
    /// Its own repair upper-cases `city` in every call.
    Meddles,
    /// Its semantic check blocks every call.
    BlocksAll,
}

struct TestTool(ToolSpec, Behaviour);

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn check(&self, _: &ToolContext, _: &Value) -> Vec<Issue> {
        match self.1 {
            Behaviour::BlocksAll => vec![Issue {
                path: String::new(),
                expected: "nothing".into(),
                found: "a call".into(),
                message: "blocked by the test".into(),
            }],
            _ => Vec::new(),
        }
    }

    fn repair(&self, _: &ToolContext, args: &mut Value) -> Vec<Repair> {
        let Some(city) = args.get_mut("city") else {
            return Vec::new();
        };
        match (self.1, city.as_str().map(str::to_uppercase)) {
            (Behaviour::Meddles, Some(upper)) => {
                let from = std::mem::replace(city, json!(upper));
                vec![Repair {
                    path: "/city".into(),
                    kind: RepairKind::ToolCheck,
                    from,
                    to: city.clone(),
                }]
            }
            _ => Vec::new(),
        }
    }

    async fn call(&self, _: &ToolContext, _: Value) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed("an evaluation never runs a tool".into()))
    }
}

fn gateway(tools: Vec<(ToolSpec, Behaviour)>) -> Gateway {
    Gateway::new(
        tools
            .into_iter()
            .map(|(spec, b)| Arc::new(TestTool(spec, b)) as Arc<dyn Tool>),
    )
    .unwrap()
}

fn ctx() -> ToolContext {
    ToolContext {
        workspace_root: ".".into(),
        request_id: "eval_gateway".into(),
        session_id: None,
        agent: String::new(),
        max_output_bytes: 1024,
        seen_files: None,
        progress: None,
        metadata: Default::default(),
        call_id: None,
        call_seq: None,
        traceparent: None,
        files: None,
    }
}

fn generated(spec: &ToolSpec, mode: GatewayMode, names: &[&str]) -> Vec<GatewayCase> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let inventory = generate::Inventory {
        names: &names,
        registered: &names,
    };
    generate::cases_for_tool(&Dataset::builtin().unwrap(), spec, mode, &inventory).unwrap()
}

fn find<'a>(cases: &'a [GatewayCase], name: &str) -> &'a GatewayCase {
    cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name} among {:?}", names(cases)))
}

fn names(cases: &[GatewayCase]) -> Vec<&str> {
    cases.iter().map(|c| c.name.as_str()).collect()
}

async fn evaluate_with(
    gateway: &Gateway,
    inventory: &[&str],
    mode: GatewayMode,
    extra: &[GatewayCase],
) -> GatewayReport {
    let inventory: Vec<String> = inventory.iter().map(|n| (*n).to_owned()).collect();
    let mode_of = move |_: &str| mode;
    let callers = [Caller {
        agent: "assistant",
        inventory: &inventory,
        mode_of: &mode_of,
    }];
    evaluate(gateway, &ctx(), &callers, extra).await.unwrap()
}

#[test]
fn mutations_of_each_kind_carry_the_exact_call_they_must_be_repaired_to() {
    let cases = generated(
        &weather_spec(),
        GatewayMode::Repair,
        &["get_weather", "read_file"],
    );
    let base = json!({ "city": "example", "format": "short" });

    let days = find(&cases, "get_weather/number_as_string/days");
    assert_eq!(
        days.arguments,
        r#"{"city":"example","format":"short","days":"2"}"#
    );
    assert_eq!(days.expect, Expect::Repair);
    assert_eq!(
        days.repaired,
        Some(json!({ "city": "example", "format": "short", "days": 2 }))
    );
    let missing = find(&cases, "get_weather/missing_required/city");
    assert_eq!(
        (missing.arguments.as_str(), missing.expect),
        (r#"{"format":"short"}"#, Expect::Block)
    );
    let default = find(&cases, "get_weather/missing_required_with_default/format");
    assert_eq!(default.arguments, r#"{"city":"example"}"#);
    assert_eq!(default.repaired.as_ref(), Some(&base));
    let unit = find(&cases, "get_weather/enum_case/unit");
    assert!(
        unit.arguments.contains(r#""unit":"CELSIUS""#),
        "{}",
        unit.arguments
    );
    assert_eq!(unit.repaired.as_ref().unwrap()["unit"], "celsius");
    let typo = find(&cases, "get_weather/enum_typo/unit");
    assert!(
        typo.arguments.contains(r#""unit":"celsisu""#),
        "{}",
        typo.arguments
    );
    assert_eq!(typo.expect, Expect::Block);
    let tags = find(&cases, "get_weather/scalar_for_array/tags");
    assert!(
        tags.arguments.contains(r#""tags":"example""#),
        "{}",
        tags.arguments
    );
    assert_eq!(tags.repaired.as_ref().unwrap()["tags"], json!(["example"]));
    let nested = find(&cases, "get_weather/nested_repairable/filters/min_score");
    assert!(
        nested.arguments.contains(r#""min_score":"1.5""#),
        "{}",
        nested.arguments
    );
    assert_eq!(
        nested.repaired.as_ref().unwrap()["filters"],
        json!({ "lang": "example", "min_score": 1.5 })
    );
    let truncated = find(&cases, "get_weather/truncated_json");
    assert!(serde_json::from_str::<Value>(&truncated.arguments).is_err());
    assert_eq!(truncated.expect, Expect::Block);

    let case = find(&cases, "get_weather/tool_name_case");
    assert_eq!(
        (case.tool.as_str(), case.expected_tool()),
        ("GET_WEATHER", "get_weather")
    );
    let typo = find(&cases, "get_weather/tool_name_typo");
    assert_eq!(
        (typo.tool.as_str(), typo.expect),
        ("get_weathre", Expect::Repair)
    );
    assert_eq!(typo.repaired.as_ref(), Some(&base));
    let unknown = find(&cases, "get_weather/tool_name_unknown");
    assert_eq!(
        (unknown.tool.as_str(), unknown.expect),
        ("web_search", Expect::Block)
    );
    assert_eq!(unknown.repaired_tool, None);

    let kinds: BTreeSet<&str> = cases.iter().map(|c| c.kind.as_str()).collect();
    let missing_kinds: Vec<&str> = Mutation::ALL
        .iter()
        .map(|m| m.as_str())
        .filter(|k| !kinds.contains(k))
        .collect();
    // Per agent, not per tool; and this schema forbids undeclared properties.
    assert_eq!(missing_kinds, ["unknown_field_allowed", "unlisted_tool"]);
}

#[test]
fn every_generated_expectation_agrees_with_the_schema() {
    for spec in [weather_spec(), notes_spec()] {
        let validator = jsonschema::validator_for(&spec.parameters).unwrap();
        let cases = generated(&spec, GatewayMode::Repair, &[&spec.name]);
        for case in &cases {
            let sent = serde_json::from_str::<Value>(&case.arguments).ok();
            match case.expect {
                Expect::Repair => {
                    assert!(
                        validator.is_valid(case.repaired.as_ref().unwrap()),
                        "{case:?}"
                    )
                }
                Expect::Pass => assert!(validator.is_valid(&sent.unwrap()), "{case:?}"),
                Expect::Block => {}
            }
        }
        let unique: BTreeSet<&str> = names(&cases).into_iter().collect();
        assert_eq!(unique.len(), cases.len(), "case names are unique");
    }
}

#[test]
fn an_open_schema_keeps_undeclared_properties_and_arrays_of_objects_get_nested_cases() {
    let cases = generated(&notes_spec(), GatewayMode::Repair, &["add_notes"]);
    let extra = find(&cases, "add_notes/unknown_field_allowed/explanation");
    assert_eq!(extra.expect, Expect::Pass);
    let pinned = find(&cases, "add_notes/nested_repairable/notes/0/pinned");
    assert!(
        pinned.arguments.contains(r#""pinned":"true""#),
        "{}",
        pinned.arguments
    );
    let wrong = find(&cases, "add_notes/nested_wrong_type/notes/0/text");
    assert!(
        wrong.arguments.contains(r#""text":{"unexpected":true}"#),
        "{}",
        wrong.arguments
    );
    assert_eq!(wrong.expect, Expect::Block);
}

#[test]
fn expectations_follow_the_tools_gateway_mode() {
    let validate = generated(&weather_spec(), GatewayMode::Validate, &["get_weather"]);
    assert!(
        validate
            .iter()
            .all(|c| c.expect != Expect::Repair && c.repaired.is_none())
    );
    assert_eq!(find(&validate, "get_weather/valid").expect, Expect::Pass);
    assert_eq!(
        find(&validate, "get_weather/number_as_string/days").expect,
        Expect::Block
    );
    let off = generated(&weather_spec(), GatewayMode::Off, &["get_weather"]);
    assert_eq!(
        find(&off, "get_weather/number_as_string/days").expect,
        Expect::Pass
    );
    assert_eq!(
        find(&off, "get_weather/truncated_json").expect,
        Expect::Block
    );
    assert_eq!(
        find(&off, "get_weather/tool_name_case").expect,
        Expect::Block
    );
}

#[test]
fn a_typo_close_to_two_listed_tools_is_not_expected_to_be_repaired() {
    // `get_weathre` is one edit from get_weather and one from `get_weathre`'s neighbour.
    let cases = generated(
        &weather_spec(),
        GatewayMode::Repair,
        &["get_weather", "get_weathrr"],
    );
    assert!(
        !names(&cases).contains(&"get_weather/tool_name_typo"),
        "{:?}",
        names(&cases)
    );
    assert_eq!(generate::swap_adjacent("grep").as_deref(), Some("grpe"));
    assert_eq!(generate::swap_adjacent("ls"), None);
}

#[tokio::test]
async fn the_gateway_meets_every_expectation_of_the_dataset_in_each_mode() {
    let gateway = gateway(vec![
        (weather_spec(), Behaviour::Honest),
        (notes_spec(), Behaviour::Honest),
    ]);
    for mode in [GatewayMode::Repair, GatewayMode::Validate, GatewayMode::Off] {
        let report = evaluate_with(&gateway, &["get_weather", "add_notes"], mode, &[]).await;
        let wrong: Vec<_> = report
            .cases
            .iter()
            .filter(|o| o.verdict != Verdict::Correct)
            .map(|o| (&o.case.name, &o.case.arguments, &o.got))
            .collect();
        assert!(wrong.is_empty(), "{mode:?}: {wrong:#?}");
        assert!(
            report.totals.cases > 30,
            "{mode:?}: {}",
            report.totals.cases
        );
        assert_eq!(report.totals.block_rate, Some(1.0));
        match mode {
            GatewayMode::Repair => {
                assert_eq!(report.totals.repair_precision, Some(1.0));
                assert_eq!(report.totals.repair_recall, Some(1.0));
            }
            _ => assert_eq!(report.totals.repaired, 0),
        }
    }
}

#[tokio::test]
async fn a_guard_that_blocks_valid_calls_shows_as_false_blocks() {
    let gateway = gateway(vec![(weather_spec(), Behaviour::BlocksAll)]);
    let report = evaluate_with(&gateway, &["get_weather"], GatewayMode::Repair, &[]).await;
    let t = &report.totals;
    assert_eq!(t.false_blocks, t.expected_pass + t.expected_repair);
    assert!(t.false_blocks > 10, "{t:?}");
    assert_eq!((t.repaired, t.repair_precision), (0, None));
    assert_eq!(t.repair_recall, Some(0.0));
    assert_eq!(t.block_rate, Some(1.0));
    assert_eq!(report.false_blocks.len(), t.false_blocks);
    assert!(report.let_through.is_empty());
}

#[tokio::test]
async fn a_guard_that_rewrites_calls_shows_as_let_through_with_what_it_produced() {
    let gateway = gateway(vec![(weather_spec(), Behaviour::Meddles)]);
    let report = evaluate_with(&gateway, &["get_weather"], GatewayMode::Repair, &[]).await;
    let valid = report
        .let_through
        .iter()
        .find(|o| o.case.name == "get_weather/valid")
        .expect("the valid call, rewritten, is let through wrongly");
    assert_eq!(valid.got.decision, GuardDecision::Repaired);
    assert_eq!(valid.got.arguments.as_ref().unwrap()["city"], "EXAMPLE");
    let t = &report.totals;
    assert!(t.repair_precision.unwrap() < 0.2, "{t:?}");
    assert!(t.repair_recall.unwrap() < 0.2, "{t:?}");
    assert_eq!(t.let_through, report.let_through.len());
    let kind = report.kinds.iter().find(|k| k.kind == "valid").unwrap();
    assert_eq!((kind.scores.cases, kind.scores.let_through), (1, 1));
}

fn outcome(
    expect: Expect,
    repaired: Option<Value>,
    got: GuardDecision,
    args: Option<Value>,
) -> CaseOutcome {
    let case = GatewayCase {
        name: "c".into(),
        kind: "user".into(),
        tool: "t".into(),
        arguments: r#"{"a":"1"}"#.into(),
        expect,
        repaired,
        repaired_tool: None,
        agent: None,
        origin: "test".into(),
    };
    let got = Observed {
        decision: got,
        tool: "t".into(),
        arguments: args,
        repairs: Vec::new(),
        issues: Vec::new(),
    };
    let verdict = score::verdict(&case, &got);
    CaseOutcome {
        case,
        agent: "a".into(),
        mode: GatewayMode::Repair,
        got,
        verdict,
    }
}

#[test]
fn scores_count_each_verdict_once() {
    use GuardDecision::{Accepted, Blocked, Repaired};
    let sent = json!({ "a": "1" });
    let fixed = json!({ "a": 1 });
    let outcomes = [
        outcome(
            Expect::Repair,
            Some(fixed.clone()),
            Repaired,
            Some(fixed.clone()),
        ),
        outcome(
            Expect::Repair,
            Some(fixed.clone()),
            Repaired,
            Some(json!({ "a": 2 })),
        ),
        outcome(Expect::Repair, None, Repaired, Some(json!({ "a": 3 }))),
        outcome(
            Expect::Repair,
            Some(fixed.clone()),
            Accepted,
            Some(sent.clone()),
        ),
        outcome(Expect::Repair, Some(fixed.clone()), Blocked, None),
        outcome(Expect::Block, None, Repaired, Some(fixed.clone())),
        outcome(Expect::Block, None, Blocked, None),
        outcome(Expect::Pass, None, Accepted, Some(sent.clone())),
        outcome(Expect::Pass, None, Blocked, None),
    ];
    let verdicts: Vec<Verdict> = outcomes.iter().map(|o| o.verdict).collect();
    use Verdict::{Correct as C, FalseBlock as F, LetThrough as L};
    assert_eq!(verdicts, [C, L, C, L, F, L, C, C, F]);
    let s = Scores::of(&outcomes);
    assert_eq!(
        (s.cases, s.correct, s.false_blocks, s.let_through),
        (9, 4, 2, 3)
    );
    assert_eq!(
        (s.repaired, s.repaired_correctly, s.expected_repair),
        (4, 2, 5)
    );
    assert_eq!(s.repair_precision, Some(0.5));
    assert_eq!(s.repair_recall, Some(0.4));
    assert_eq!(
        (s.blocked, s.expected_block, s.block_rate),
        (1, 2, Some(0.5))
    );
    assert_eq!((s.passed, s.expected_pass), (1, 2));
    assert_eq!(Scores::of(&[]).repair_precision, None);
}

#[test]
fn user_cases_read_raw_text_and_json_values_and_skip_comments() {
    let text = r#"
# a comment
{"tool": "get_weather", "arguments": {"city": "Paris", "days": "3"}, "expect": "repair", "repaired": {"city": "Paris", "days": 3}, "name": "days as text"}

{"tool": "get_weather", "arguments": "{\"city\": \"Par", "expect": "block"}
{"tool": "get_wether", "arguments": {"city": "Paris"}, "expect": "repair", "repairedTool": "get_weather", "kind": "typo", "agent": "a"}
"#;
    let cases = parse_cases(text, Path::new("cases.jsonl")).unwrap();
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0].arguments, r#"{"city":"Paris","days":"3"}"#);
    assert_eq!(
        (cases[0].name.as_str(), cases[0].kind.as_str()),
        ("days as text", "user")
    );
    assert_eq!(cases[0].origin, "cases.jsonl:3");
    assert_eq!(cases[1].arguments, r#"{"city": "Par"#);
    assert_eq!(cases[1].name, "cases.jsonl:5");
    assert_eq!(cases[2].expected_tool(), "get_weather");
    assert_eq!(
        (cases[2].kind.as_str(), cases[2].agent.as_deref()),
        ("typo", Some("a"))
    );
}

#[test]
fn a_bad_case_line_is_named_by_file_and_line() {
    let path = Path::new("my/cases.jsonl");
    let good = r#"{"tool": "t", "arguments": {}, "expect": "pass"}"#;
    let bad = [
        (
            "{\"tool\": \"t\", \"arguments\": {}",
            "not a gateway case: EOF while parsing",
        ),
        (
            r#"{"tool": "t", "arguments": {}, "expect": "fix"}"#,
            "unknown variant `fix`",
        ),
        (
            r#"{"tool": "t", "arguments": {}, "expect": "pass", "oops": 1}"#,
            "unknown field `oops`",
        ),
        (
            r#"{"tool": "t", "arguments": {}}"#,
            "missing field `expect`",
        ),
        (
            r#"{"tool": "t", "arguments": {}, "expect": "block", "repaired": {}}"#,
            "`repaired` is only for `\"expect\": \"repair\"`",
        ),
        (
            r#"{"tool": " ", "arguments": {}, "expect": "pass"}"#,
            "`tool` is empty",
        ),
    ];
    for (line, message) in bad {
        let text = format!("{good}\n\n{line}\n{good}\n");
        let error = parse_cases(&text, path).unwrap_err();
        assert!(
            matches!(&error, GatewayEvalError::Case { line: 3, .. }),
            "{error:?}"
        );
        let shown = error.to_string();
        assert!(shown.starts_with("my/cases.jsonl:3: "), "{shown}");
        assert!(shown.contains(message), "{shown}");
    }
    let missing = read_cases(Path::new("/nonexistent/cases.jsonl")).unwrap_err();
    assert!(
        matches!(missing, GatewayEvalError::Read { .. }),
        "{missing:?}"
    );
    assert!(
        missing
            .to_string()
            .starts_with("cannot read gateway cases from /nonexistent/cases.jsonl: ")
    );
}

#[tokio::test]
async fn user_cases_join_the_report_and_a_wrong_expectation_fails_there() {
    let gateway = gateway(vec![
        (weather_spec(), Behaviour::Honest),
        (notes_spec(), Behaviour::Honest),
    ]);
    let text = r#"{"tool": "get_weather", "arguments": {"city": "Paris", "format": "long", "days": "3"}, "expect": "repair", "repaired": {"city": "Paris", "format": "long", "days": 3}, "name": "right"}
{"tool": "get_weather", "arguments": {"city": "Paris", "format": "long", "days": "3"}, "expect": "repair", "repaired": {"city": "Paris", "format": "long", "days": 4}, "name": "wrong repair", "kind": "mine"}
{"tool": "get_weather", "arguments": {"city": "Paris", "format": "long", "unit": "kelvin"}, "expect": "block", "name": "kelvin"}
{"tool": "get_weather", "arguments": {"city": "Paris", "format": "long"}, "expect": "pass", "agent": "nobody", "name": "elsewhere"}
"#;
    let extra = parse_cases(text, Path::new("mine.jsonl")).unwrap();
    let report = evaluate_with(&gateway, &["get_weather"], GatewayMode::Repair, &extra).await;
    let user: Vec<_> = report
        .cases
        .iter()
        .filter(|o| o.case.origin.starts_with("mine.jsonl"))
        .collect();
    let verdicts: Vec<(&str, Verdict)> = user
        .iter()
        .map(|o| (o.case.name.as_str(), o.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("right", Verdict::Correct),
            ("wrong repair", Verdict::LetThrough),
            ("kelvin", Verdict::Correct)
        ]
    );
    assert_eq!(report.let_through.len(), 1);
    assert_eq!(
        report.let_through[0].got.arguments.as_ref().unwrap()["days"],
        3
    );
    let mine = report.kinds.iter().find(|k| k.kind == "mine").unwrap();
    assert_eq!(
        (mine.scores.cases, mine.scores.repair_precision),
        (1, Some(0.0))
    );
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(
        report.skipped[0].reason.contains("`nobody`"),
        "{:?}",
        report.skipped
    );
    // The agent does not list add_notes: it is not evaluated, and is the unlisted tool.
    assert_eq!(report.tools.len(), 1);
    let unlisted = report
        .cases
        .iter()
        .find(|o| o.case.kind == "unlisted_tool")
        .unwrap();
    assert_eq!(
        (unlisted.case.tool.as_str(), unlisted.verdict),
        ("add_notes", Verdict::Correct)
    );
}

#[tokio::test]
async fn each_tool_is_evaluated_once_with_the_first_agent_that_lists_it() {
    let gateway = gateway(vec![
        (weather_spec(), Behaviour::Honest),
        (notes_spec(), Behaviour::Honest),
    ]);
    let first: Vec<String> = vec!["get_weather".into(), "missing_tool".into()];
    let second: Vec<String> = vec!["get_weather".into(), "add_notes".into()];
    let repair = |_: &str| GatewayMode::Repair;
    let validate = |_: &str| GatewayMode::Validate;
    let callers = [
        Caller {
            agent: "a",
            inventory: &first,
            mode_of: &repair,
        },
        Caller {
            agent: "b",
            inventory: &second,
            mode_of: &validate,
        },
    ];
    let report = evaluate(&gateway, &ctx(), &callers, &[]).await.unwrap();
    let tools: Vec<(&str, &str, GatewayMode)> = report
        .tools
        .iter()
        .map(|t| (t.tool.as_str(), t.agent.as_str(), t.mode))
        .collect();
    assert_eq!(
        tools,
        [
            ("get_weather", "a", GatewayMode::Repair),
            ("add_notes", "b", GatewayMode::Validate)
        ]
    );
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(
        (
            report.skipped[0].what.as_str(),
            report.skipped[0].agent.as_deref()
        ),
        ("missing_tool", Some("a"))
    );
    assert_eq!(
        report.totals.correct, report.totals.cases,
        "{:#?}",
        report.let_through
    );
}
