//! `Runtime::evaluate_gateway` (`keel eval gateway`): the built-in dataset made from the
//! workspace's own tool schemas and a user's case file, guarded by the runtime's gateway in
//! each tool's configured mode, and the figures it reports — on the quickstart workspace and on
//! a workspace with a richer tool.

use std::path::Path;

use keel::gateway_eval::{Expect, GatewayEvalError, GatewayReport, Verdict, read_cases};
use keel::{Error, Runtime, RuntimeError};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use keel_workspace::GatewayMode;

/// A command tool with an enum, bounds and a nested object (never run: `false` would fail).
const FORECAST: &str = r#"
description: The weather forecast.
schema:
  type: object
  properties:
    city: { type: string, minLength: 1 }
    days: { type: integer, minimum: 1, maximum: 14 }
    unit: { type: string, enum: [celsius, fahrenheit] }
    detail:
      type: object
      properties:
        hourly: { type: boolean }
        lang: { type: string }
      required: [lang]
      additionalProperties: false
  required: [city]
  additionalProperties: false
impl: { kind: command, command: ["false"] }
"#;

/// Agent `assistant` (repair mode, the default) and agent `strict` (validate mode), both with
/// `forecast` and `read_file`.
fn workspace() -> TempWorkspace {
    let script = serde_json::json!({ "conversations": [] });
    WorkspaceBuilder::new()
        .scripted_model("m", &script)
        .agent("assistant", "{ model: m, tools: [forecast, read_file] }")
        .agent(
            "strict",
            "{ model: m, tools: [read_file, forecast], gateway: { mode: validate } }",
        )
        .tool("forecast", FORECAST)
        .runtime("{ defaultAgent: assistant }")
        .build()
}

fn runtime(ws: &TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

/// The cases that went wrong, for a failure message.
fn wrong(report: &GatewayReport) -> Vec<String> {
    report
        .cases
        .iter()
        .filter(|o| o.verdict != Verdict::Correct)
        .map(|o| {
            format!(
                "{} {:?} sent {} got {:?}",
                o.case.name, o.verdict, o.case.arguments, o.got
            )
        })
        .collect()
}

#[tokio::test]
async fn the_quickstart_tools_meet_the_gateway_contract() {
    let ws = TempWorkspace::new();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart"),
        ws.path(),
    );
    let runtime = runtime(&ws);

    let report = runtime.evaluate_gateway(None, &[]).await.unwrap();

    let tools: Vec<(&str, GatewayMode)> = report
        .tools
        .iter()
        .map(|t| (t.tool.as_str(), t.mode))
        .collect();
    assert_eq!(
        tools,
        [
            ("list_dir", GatewayMode::Repair),
            ("read_file", GatewayMode::Repair),
            ("grep", GatewayMode::Repair),
            ("word_count", GatewayMode::Repair),
        ]
    );
    // `reviewer` (the workflow's judge) has no tools.
    assert_eq!(report.agents, ["assistant", "reviewer"]);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.repair_model, None);
    let totals = &report.totals;
    assert!(wrong(&report).is_empty(), "{:#?}", wrong(&report));
    assert_eq!(totals.repair_precision, Some(1.0));
    assert_eq!(totals.repair_recall, Some(1.0));
    assert_eq!(totals.block_rate, Some(1.0));
    assert_eq!((totals.false_blocks, totals.let_through), (0, 0));
    assert!(
        totals.expected_repair >= 30 && totals.expected_block >= 20,
        "{totals:?}"
    );
    // The dataset's literal cases of the built-in tools are there, with their own kinds.
    let semantic = report
        .kinds
        .iter()
        .find(|k| k.kind == "semantic_check")
        .unwrap();
    assert_eq!((semantic.scores.cases, semantic.scores.blocked), (2, 2));
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn each_tool_is_evaluated_in_its_agents_gateway_mode() {
    let ws = workspace();
    let runtime = runtime(&ws);

    let all = runtime.evaluate_gateway(None, &[]).await.unwrap();
    let tools: Vec<(&str, &str, GatewayMode)> = all
        .tools
        .iter()
        .map(|t| (t.tool.as_str(), t.agent.as_str(), t.mode))
        .collect();
    assert_eq!(
        tools,
        [
            ("forecast", "assistant", GatewayMode::Repair),
            ("read_file", "assistant", GatewayMode::Repair)
        ]
    );
    assert!(wrong(&all).is_empty(), "{:#?}", wrong(&all));
    let kinds: Vec<&str> = all.kinds.iter().map(|k| k.kind.as_str()).collect();
    for kind in [
        "enum_case",
        "enum_typo",
        "nested_repairable",
        "nested_wrong_type",
        "tool_name_typo",
        "unlisted_tool",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let nested = all
        .cases
        .iter()
        .find(|o| o.case.name == "forecast/nested_repairable/detail/hourly")
        .unwrap();
    assert_eq!(
        nested.got.arguments.as_ref().unwrap()["detail"]["hourly"],
        true
    );

    // The same tools through `strict`, in validate mode: nothing is repaired, every malformed
    // call is blocked.
    let strict = runtime.evaluate_gateway(Some("strict"), &[]).await.unwrap();
    assert!(
        strict
            .tools
            .iter()
            .all(|t| t.mode == GatewayMode::Validate && t.agent == "strict")
    );
    assert!(wrong(&strict).is_empty(), "{:#?}", wrong(&strict));
    let t = &strict.totals;
    assert_eq!(
        (
            t.expected_repair,
            t.repaired,
            t.repair_precision,
            t.repair_recall
        ),
        (0, 0, None, None)
    );
    assert_eq!(t.block_rate, Some(1.0));
    assert!(t.expected_block > all.totals.expected_block, "{t:?}");

    let unknown = runtime
        .evaluate_gateway(Some("nobody"), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, Error::Runtime(RuntimeError::UnknownAgent { ref name, .. }) if name == "nobody"),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn a_users_case_file_extends_the_dataset_and_a_wrong_repair_is_reported() {
    let ws = workspace();
    let runtime = runtime(&ws);
    let cases = ws.write(
        "evals/gateway-cases.jsonl",
        concat!(
            "# My model's habits.\n",
            r#"{"tool": "forecast", "arguments": {"city": "Oslo", "days": "5", "unit": "Celsius"}, "expect": "repair", "repaired": {"city": "Oslo", "days": 5, "unit": "celsius"}, "name": "days and unit"}"#,
            "\n",
            r#"{"tool": "forecast", "arguments": "{\"city\": \"Oslo\", \"days\": 5", "expect": "block", "name": "cut short", "kind": "truncated_json"}"#,
            "\n",
            r#"{"tool": "forcast", "arguments": {"city": "Oslo"}, "expect": "repair", "repairedTool": "forecast", "repaired": {"city": "Oslo"}, "name": "misspelled"}"#,
            "\n",
            // Wrong on purpose: a repair never guesses a typo in an enum.
            r#"{"tool": "forecast", "arguments": {"city": "Oslo", "unit": "celcius"}, "expect": "repair", "repaired": {"city": "Oslo", "unit": "celsius"}, "name": "guessed unit"}"#,
            "\n",
            // Wrong on purpose: a one-element array where a string is expected is not repaired.
            r#"{"tool": "forecast", "arguments": {"city": ["Oslo"]}, "expect": "pass", "name": "city list", "agent": "strict"}"#,
            "\n",
        ),
    );
    let extra = read_cases(&cases).unwrap();
    assert_eq!(extra.len(), 5);

    let report = runtime
        .evaluate_gateway(Some("assistant"), &extra)
        .await
        .unwrap();

    let user: Vec<(&str, Verdict)> = report
        .cases
        .iter()
        .filter(|o| o.case.origin.contains("gateway-cases.jsonl"))
        .map(|o| (o.case.name.as_str(), o.verdict))
        .collect();
    // `city list` names an agent that is not evaluated here: left out, and said.
    assert_eq!(
        user,
        [
            ("days and unit", Verdict::Correct),
            ("cut short", Verdict::Correct),
            ("misspelled", Verdict::Correct),
            ("guessed unit", Verdict::FalseBlock),
        ]
    );
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(
        report.skipped[0].what.contains("city list"),
        "{:?}",
        report.skipped
    );
    assert_eq!(report.false_blocks.len(), 1);
    assert_eq!(report.false_blocks[0].case.expect, Expect::Repair);
    let user_kind = report.kinds.iter().find(|k| k.kind == "user").unwrap();
    assert_eq!(user_kind.scores.cases, 3);
    assert_eq!(user_kind.scores.repair_recall, Some(2.0 / 3.0));
    assert_eq!(user_kind.scores.repair_precision, Some(1.0));

    // Every agent: `city list` is strict's call, and the guard does not let it pass.
    let all = runtime.evaluate_gateway(None, &extra).await.unwrap();
    let city = all
        .cases
        .iter()
        .find(|o| o.case.name == "city list")
        .unwrap();
    assert_eq!(
        (city.agent.as_str(), city.mode, city.verdict),
        ("strict", GatewayMode::Validate, Verdict::FalseBlock)
    );
}

#[tokio::test]
async fn a_bad_case_line_is_reported_with_its_file_and_line() {
    let ws = workspace();
    let path = ws.write(
        "cases.jsonl",
        "{\"tool\": \"forecast\", \"arguments\": {}, \"expect\": \"block\"}\n{\"tool\": \"forecast\", \"arguments\": {}, \"expect\": \"maybe\"}\n",
    );
    let error = read_cases(&path).unwrap_err();
    assert!(
        matches!(error, GatewayEvalError::Case { line: 2, .. }),
        "{error:?}"
    );
    let shown = error.to_string();
    assert!(
        shown.starts_with(&format!("{}:2: ", path.display())),
        "{shown}"
    );
    assert!(shown.contains("unknown variant `maybe`"), "{shown}");
}

/// Copies the folder `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
