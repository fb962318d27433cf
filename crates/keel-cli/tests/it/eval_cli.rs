//! `keel eval`: an eval of twenty cases on the mock model with every grader kind (a judge on
//! the mock too, and a grading program), its JUnit report read by a real JUnit parser,
//! `--repeat` variance, a comparison that finds a regression a policy change caused and names
//! the event where the runs diverged, and cases captured from recorded runs replayed with no
//! model call at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel_test_support::{MockLlm, MockResponse, MockToolCall, RecordedRequest, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

/// What the mock answers: the agent model by its input, the judge by what it is shown.
fn respond(request: &RecordedRequest, judge_asks: &AtomicUsize) -> MockResponse {
    let model = request.body["model"].as_str().unwrap_or("");
    if model == "judge-model" {
        let shown = request.messages()[1]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if shown.contains("judge-bad") {
            judge_asks.fetch_add(1, Ordering::SeqCst);
            return MockResponse::text(["I think it is fine."]);
        }
        if shown.contains("judge-retry") && request.messages().len() == 2 {
            return MockResponse::text([r#"{"score": "high"}"#]);
        }
        let score = if shown.contains("judge-retry") { 4 } else { 5 };
        return MockResponse::text([
            json!({"score": score, "reasoning": "It greets the user."}).to_string()
        ]);
    }
    if request.last_role() == Some("tool") {
        return MockResponse::text(["The notes say ", "hello."]);
    }
    let input = request.last_content_of("user").unwrap_or("").to_owned();
    let n: String = input.chars().filter(char::is_ascii_digit).collect();
    if input.starts_with("read") {
        return MockResponse::tool_calls([MockToolCall::new(
            "call_1",
            "read_file",
            [r#"{"path": "notes.txt"}"#],
        )]);
    }
    if input.starts_with("json") {
        return MockResponse::text([format!(r#"{{"city": "Paris", "n": {n}}}"#)]);
    }
    if input.starts_with("fail") {
        return MockResponse::text(["nothing useful"]);
    }
    MockResponse::text([format!("Hello, case {n}")])
}

/// The first grader of `kind` in a case's result.
fn grader<'a>(case: &'a Value, kind: &str) -> &'a Value {
    case["graders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} grader in {case}"))
}

const GRADE_PY: &str = r#"import json, sys
run = json.load(sys.stdin)
ok = (run.get("output") or "").startswith("Hello")
print(json.dumps({"score": 1 if ok else 0, "reason": "greets" if ok else "does not greet"}))
"#;

fn case(name: &str, input: &str, expect: Value) -> String {
    json!({"name": name, "input": input, "expect": expect}).to_string()
}

/// Twenty cases: eighteen inline in the cases file, two in the document.
fn cases_file() -> String {
    let mut lines = Vec::new();
    for n in 1..=4 {
        lines.push(case(
            &format!("hello-{n}"),
            &format!("say hello {n}"),
            json!([
                {"kind": "contains", "value": "hello", "ignoreCase": true},
                {"kind": "regex", "pattern": "^Hello, case \\d+$"},
                {"kind": "equals", "value": format!("Hello, case {n}")}
            ]),
        ));
    }
    for n in 5..=8 {
        lines.push(case(
            &format!("read-{n}"),
            &format!("read the notes {n}"),
            json!([
                {"kind": "toolCalled", "tool": "read_file", "args": {"path": "notes.txt"}},
                {"kind": "contains", "value": "notes say"}
            ]),
        ));
    }
    for n in 9..=12 {
        lines.push(case(
            &format!("json-{n}"),
            &format!("json {n}"),
            json!([
                {"kind": "jsonSchema", "schema": {"type": "object", "required": ["city", "n"]}},
                {"kind": "jsonPointer", "pointer": "/city", "value": "Paris"},
                {"kind": "equals", "pointer": "/n", "value": n}
            ]),
        ));
    }
    for (name, input) in [
        ("judged-13", "say hello 13"),
        ("judged-14", "say hello 14"),
        ("judge-retry", "say hello judge-retry"),
        ("judge-bad", "say hello judge-bad"),
    ] {
        lines.push(case(
            name,
            input,
            json!([
                {"kind": "judge", "model": "judge", "rubric": "Is the answer a greeting?"}
            ]),
        ));
    }
    for n in 17..=18 {
        lines.push(case(
            &format!("command-{n}"),
            &format!("say hello {n}"),
            json!([
                {"kind": "command", "command": ["python3", "grade.py"], "timeout": "20s"}
            ]),
        ));
    }
    lines.join("\n") + "\n"
}

const EVAL: &str = r#"
apiVersion: keel/v1
kind: Eval
metadata: { name: support }
spec:
  target: { agent: support }
  passScore: 0.9
  threshold: 0.85
  concurrency: 4
  graders:
    - { kind: finishReason, value: completed }
    - { kind: maxSteps, value: 4 }
    - { kind: maxCost, value: 1 }
    - { kind: maxLatency, value: 60s }
  casesFile: cases.jsonl
  cases:
    - { name: no-tools, input: "say hello 19", expect: [ { kind: noToolCalled } ] }
    - { name: regress, input: "fail 20", expect: [ { kind: contains, value: Hello } ] }
"#;

fn workspace(mock: &MockLlm) -> keel_test_support::TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: support }")
        .model(
            "m",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: agent-model, pricing: {{ inputPerMTok: 1, outputPerMTok: 2 }} }}",
                mock.base_url()
            ),
        )
        .model(
            "judge",
            &format!("{{ provider: openai, baseUrl: \"{}\", model: judge-model }}", mock.base_url()),
        )
        .agent("support", "{ model: m, tools: [read_file] }")
        .file("notes.txt", "hello\n")
        .file("grade.py", GRADE_PY)
        .file("cases.jsonl", cases_file())
        .yaml(EVAL)
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_cases_are_graded_by_every_kind_of_grader_and_reported_as_junit() {
    let mock = MockLlm::start().await;
    let judge_asks = Arc::new(AtomicUsize::new(0));
    let asks = Arc::clone(&judge_asks);
    mock.respond_with(move |request| respond(request, &asks));
    let ws = workspace(&mock);
    let keel = keel_in(&ws);
    let checked = keel.run(["validate"]);
    assert!(checked.success(), "{}", checked.stderr);

    let run = keel.run(["eval", "run", "support", "--json", "--junit", "report.xml"]);
    assert!(
        run.success(),
        "18 of 20 pass, above the threshold of 85%: {}\n{}",
        run.stdout,
        run.stderr
    );
    let result = run.json();
    let summary = &result["summary"];
    assert_eq!(summary["runs"], 20, "{summary}");
    assert_eq!(summary["passed"], 18, "{summary}");
    assert_eq!(summary["errors"], 1, "{summary}");
    assert_eq!(summary["passedThreshold"], true);
    let cases = result["cases"].as_array().unwrap();
    let by_name = |name: &str| {
        cases
            .iter()
            .find(|c| c["case"] == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    };
    // Every grader kind graded something.
    let kinds: std::collections::BTreeSet<&str> = cases
        .iter()
        .flat_map(|c| c["graders"].as_array().unwrap())
        .map(|g| g["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 13, "{kinds:?}");
    // The judge answered prose three times: refused, asked again, an error — never a pass.
    let bad = by_name("judge-bad");
    assert_eq!(bad["passed"], false);
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("no valid verdict in 3 attempts"),
        "{bad}"
    );
    assert_eq!(judge_asks.load(Ordering::SeqCst), 3);
    // A malformed verdict, then a valid one: graded, with the judge's reasoning kept.
    let retried = by_name("judge-retry");
    let judged = grader(retried, "judge");
    assert_eq!(judged["score"], 0.75, "{judged}");
    assert_eq!(judged["reasoning"], "It greets the user.");
    assert_eq!(
        retried["passed"], true,
        "(4 + 0.75) / 5 = 0.95 reaches passScore 0.9"
    );
    let regress = by_name("regress");
    assert_eq!(regress["passed"], false);
    assert!(
        (regress["score"].as_f64().unwrap() - 0.8).abs() < 1e-9,
        "{regress}"
    );
    let read = by_name("read-5");
    let called = grader(read, "toolCalled");
    assert_eq!(called["passed"], true, "{called}");
    assert_eq!(grader(by_name("command-17"), "command")["detail"], "greets");
    // Each case is an ordinary recorded run, tagged with the eval.
    let events = keel.json_lines([
        "runs",
        "events",
        by_name("hello-1")["requestId"].as_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        events[0]["metadata"]["keel.eval"], "support",
        "{}",
        events[0]
    );
    assert_eq!(events[0]["metadata"]["keel.eval.result"], result["id"]);
    assert!(result["version"].as_str().unwrap().starts_with("sha256:"));
    assert!(
        result["workspaceDigest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    // The JUnit report, read by a JUnit parser.
    let python = keel_test_support::test_clients::junitparser_python();
    let parsed = std::process::Command::new(python)
        .arg("-c")
        .arg(
            r#"import json, sys
from junitparser import JUnitXml, Failure, Error
xml = JUnitXml.fromfile(sys.argv[1])
cases = {}
for suite in xml:
    for case in suite:
        kinds = [type(r).__name__ for r in case.result]
        cases[case.name] = kinds
print(json.dumps({"tests": xml.tests, "failures": xml.failures, "errors": xml.errors, "cases": cases}))"#,
        )
        .arg(ws.path().join("report.xml"))
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let junit: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(junit["tests"], 20, "{junit}");
    assert_eq!(junit["failures"], 1, "{junit}");
    assert_eq!(junit["errors"], 1, "{junit}");
    assert_eq!(junit["cases"]["regress"], json!(["Failure"]));
    assert_eq!(junit["cases"]["judge-bad"], json!(["Error"]));
    assert_eq!(junit["cases"]["hello-1"], json!([]));

    // Stored: listed and shown.
    let listed = keel.json_lines(["eval", "list", "--json"]);
    assert_eq!(listed[0]["id"], result["id"]);
    let shown = keel.run(["eval", "show", result["id"].as_str().unwrap()]);
    assert!(shown.success(), "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains("regress · contains: does not contain `Hello`"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("18/20 passed"), "{}", shown.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn repeats_report_each_cases_pass_rate_and_variance_and_a_threshold_fails_the_command() {
    let mock = MockLlm::start().await;
    // The agent answers "Hello" to every other request: a flaky case.
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    mock.respond_with(move |_| match count.fetch_add(1, Ordering::SeqCst) % 2 {
        0 => MockResponse::text(["Hello"]),
        _ => MockResponse::text(["Bye"]),
    });
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .openai_model_at("m", &mock.base_url())
        .agent("a", "{ model: m }")
        .yaml(
            "apiVersion: keel/v1\nkind: Eval\nmetadata: { name: flaky }\nspec:\n  target: { agent: a }\n  concurrency: 1\n  graders: [ { kind: contains, value: Hello } ]\n  cases: [ { name: greet, input: hi } ]\n",
        )
        .build();
    let keel = keel_in(&ws);
    let run = keel.run(["eval", "run", "flaky", "--repeat", "5", "--json"]);
    assert_eq!(
        run.code,
        Some(1),
        "3 of 5 pass, below the default threshold of 100%: {}",
        run.stderr
    );
    assert!(run.stderr.contains("below its threshold"), "{}", run.stderr);
    let result = run.json();
    let per_case = &result["summary"]["perCase"][0];
    assert_eq!(per_case["runs"], 5);
    assert_eq!(per_case["passed"], 3);
    assert_eq!(per_case["passRate"], 0.6);
    // Scores 1, 0, 1, 0, 1: mean 0.6, variance 0.24.
    assert!(
        (per_case["variance"].as_f64().unwrap() - 0.24).abs() < 1e-9,
        "{per_case}"
    );
    let table = keel.run(["eval", "show", result["id"].as_str().unwrap()]);
    assert!(table.stdout.contains("VARIANCE"), "{}", table.stdout);
    assert!(table.stdout.contains("0.2400"), "{}", table.stdout);
    // Stored results read from the store alone, with the configuration broken.
    std::fs::write(ws.path().join("config/broken.yaml"), "kind: [").unwrap();
    let listed = keel.json_lines(["eval", "list", "--json"]);
    assert_eq!(listed[0]["id"], result["id"]);
    let shown = keel.run(["eval", "show", result["id"].as_str().unwrap(), "--json"]);
    assert!(shown.success(), "{}", shown.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_that_blocks_a_tool_is_found_by_compare_at_the_event_where_runs_diverge() {
    let mock = MockLlm::start().await;
    let asks = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| respond(request, &asks));
    let ws = workspace(&mock);
    let keel = keel_in(&ws);
    let eval = "apiVersion: keel/v1\nkind: Eval\nmetadata: { name: reading }\nspec:\n  target: { agent: support }\n  cases:\n    - { name: read, input: read the notes, expect: [ { kind: toolCalled, tool: read_file } ] }\n    - { name: greet, input: say hello, expect: [ { kind: contains, value: Hello } ] }\n";
    std::fs::write(ws.path().join("config/reading.yaml"), eval).unwrap();
    let before = keel.run(["eval", "run", "reading", "--json"]);
    assert!(before.success(), "{}", before.stderr);
    let before = before.json()["id"].as_str().unwrap().to_owned();
    std::fs::write(
        ws.path().join("config/policy.yaml"),
        "apiVersion: keel/v1\nkind: Policy\nmetadata: { name: lockdown }\nspec:\n  rules: [ { tool: read_file, decision: deny, reason: no reading } ]\n",
    )
    .unwrap();
    let after = keel.run(["eval", "run", "reading", "--json"]);
    assert_eq!(after.code, Some(1), "{}", after.stderr);
    let after_result = after.json();
    let after = after_result["id"].as_str().unwrap().to_owned();
    let refused = after_result["cases"][0]["graders"][0]["detail"]
        .as_str()
        .unwrap();
    assert!(
        refused.contains("refused") && refused.contains("no reading"),
        "{refused}"
    );

    let compared = keel.run(["eval", "compare", &before, &after, "--json"]);
    assert_eq!(
        compared.code,
        Some(1),
        "a regression fails the command: {}",
        compared.stderr
    );
    let comparison = compared.json();
    assert_eq!(comparison["regressions"], 1, "{comparison}");
    assert_eq!(comparison["unchanged"], 1);
    assert_eq!(comparison["sameVersion"], true);
    assert_eq!(comparison["sameWorkspace"], false);
    let read = comparison["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == "read")
        .unwrap();
    assert_eq!(read["verdict"], "regression");
    // The runs agree until the policy's decision: the read started before, it is denied now.
    let divergence = &read["divergence"];
    assert_eq!(
        divergence["expected"]["event"]["phase"], "agent.tool.start",
        "{divergence}"
    );
    assert_eq!(
        divergence["found"]["type"], "runtime.policy.decided",
        "{divergence}"
    );
    assert_eq!(divergence["found"]["decision"], "deny");
    assert_eq!(divergence["found"]["reason"], "no reading");
    let table = keel.run(["eval", "compare", &before, &after]);
    assert!(table.stdout.contains("regression"), "{}", table.stdout);
    assert!(
        table
            .stdout
            .contains(&format!("diverge at event {}", divergence["seq"])),
        "{}",
        table.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_recorded_runs_become_cases_replayed_without_a_single_model_call() {
    let mock = MockLlm::start().await;
    let asks = Arc::new(AtomicUsize::new(0));
    mock.respond_with(move |request| respond(request, &asks));
    let ws = workspace(&mock);
    let keel = keel_in(&ws);
    for n in 0..10 {
        let input = if n % 2 == 0 {
            format!("read the notes {n}")
        } else {
            format!("say hello {n}")
        };
        let run = keel.run(["run", &input]);
        assert!(run.success(), "{}", run.stderr);
    }
    let captured = keel.run([
        "eval",
        "capture",
        "--runs",
        "agent=support,status=completed,limit=10",
        "--to",
        "captured.jsonl",
    ]);
    assert!(captured.success(), "{}", captured.stderr);
    let lines: Vec<Value> = std::fs::read_to_string(ws.path().join("captured.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 10);
    // Oldest first, each naming its run, with expectations proposed from what it did.
    assert_eq!(lines[0]["input"], "read the notes 0");
    assert!(lines[0]["recorded"].as_str().unwrap().starts_with("run_"));
    assert_eq!(
        lines[0]["expect"][0],
        json!({"kind": "toolCalled", "weight": 1.0, "tool": "read_file", "args": {"path": "notes.txt"}})
    );
    assert_eq!(lines[1]["expect"][0]["kind"], "noToolCalled");
    std::fs::write(
        ws.path().join("config/captured.yaml"),
        "apiVersion: keel/v1\nkind: Eval\nmetadata: { name: captured }\nspec:\n  target: { agent: support }\n  casesFile: captured.jsonl\n",
    )
    .unwrap();
    let before = mock.request_count();
    let replayed = keel.run(["eval", "run", "captured", "--replay", "--json"]);
    assert!(
        replayed.success(),
        "{}\n{}",
        replayed.stdout,
        replayed.stderr
    );
    assert_eq!(mock.request_count(), before, "no model was called");
    let result = replayed.json();
    assert_eq!(result["summary"]["passed"], 10, "{}", result["summary"]);
    assert!(
        result["cases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["divergence"].is_null()),
        "the replays match their recordings"
    );
    assert_eq!(result["options"]["replay"], true);

    // A changed gateway setting is evaluated without a model: the notes file is gone, the
    // replays of the reading runs diverge where the tool's result differs.
    std::fs::remove_file(ws.path().join("notes.txt")).unwrap();
    let changed = keel.run(["eval", "run", "captured", "--replay", "--json"]);
    assert_eq!(mock.request_count(), before, "still no model call");
    let cases = changed.json()["cases"].as_array().unwrap().clone();
    let diverged: Vec<&Value> = cases
        .iter()
        .filter(|c| !c["divergence"].is_null())
        .collect();
    assert_eq!(diverged.len(), 5, "the five reading runs: {cases:?}");
    assert_eq!(
        diverged[0]["divergence"]["expected"]["event"]["phase"], "agent.tool.result",
        "{}",
        diverged[0]["divergence"]
    );
    std::fs::write(ws.path().join("notes.txt"), "hello\n").unwrap();

    // With cassettes, a clean checkout replays them: no store, no model.
    let captured = keel.run([
        "eval",
        "capture",
        "--runs",
        "agent=support,status=completed,limit=10",
        "--to",
        "captured.jsonl",
        "--cassettes",
        "evals/cassettes",
    ]);
    assert!(captured.success(), "{}", captured.stderr);
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(ws.path().join("captured.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let cassette = first["cassette"].as_str().unwrap();
    assert!(
        cassette.starts_with("evals/cassettes/run_") && ws.path().join(cassette).is_file(),
        "{first}"
    );
    std::fs::remove_dir_all(ws.path().join(".keel")).unwrap();
    let clean = keel.run(["eval", "run", "captured", "--replay", "--json"]);
    assert!(clean.success(), "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(mock.request_count(), before, "no model was called");
    assert_eq!(clean.json()["summary"]["passed"], 10);
    std::fs::remove_file(ws.path().join(cassette)).unwrap();
    let missing = keel.run(["validate"]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.contains("is not a file"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_bad_grader_and_a_bad_cases_line_are_reported_at_their_file_line_and_column() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "hi"}]}]}))
        .agent("a", "{ model: m }")
        .file("cases.jsonl", "{\"input\": \"ok\", \"expect\": [{\"kind\": \"regex\", \"pattern\": \"(\"}]}\n{\"input\": \"x\", \"expectt\": []}\n")
        .yaml("apiVersion: keel/v1\nkind: Eval\nmetadata: { name: e }\nspec:\n  target: { agent: b }\n  casesFile: cases.jsonl\n  graders:\n    - { kind: contains }\n    - { kind: maxSteps, value: 3, pattern: x }\n    - { kind: judge, model: nobody, rubric: fine }\n")
        .build();
    let keel = keel_in(&ws);
    let out = keel.run(["validate"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let err = &out.stderr;
    for expected in [
        "evaluates agent `b`, which is not defined",
        "a `contains` grader needs `value`",
        "`pattern` does not apply to a `maxSteps` grader",
        "the judge model `nobody` is not defined",
        "cases.jsonl:1:",
        "invalid regular expression",
        "cases.jsonl:2:",
        "unknown field `expectt`",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn the_gateway_is_measured_on_the_quickstart_tools_and_a_wrong_expectation_is_listed() {
    let ws = crate::common::quickstart();
    let keel = keel_in(&ws);
    let report = keel.run(["eval", "gateway", "--json"]);
    assert!(report.success(), "{}", report.stderr);
    let totals = report.json()["totals"].clone();
    assert!(totals["cases"].as_u64().unwrap() >= 50, "{totals}");
    assert!(
        totals["expectedRepair"].as_u64().unwrap() > 0
            && totals["expectedBlock"].as_u64().unwrap() > 0,
        "{totals}"
    );
    for figure in ["repairPrecision", "repairRecall", "blockRate"] {
        let value = totals[figure].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&value), "{figure}: {totals}");
    }
    let table = keel.run(["eval", "gateway"]);
    assert!(
        table.stdout.contains("repair precision"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("repair recall"), "{}", table.stdout);
    assert!(table.stdout.contains("block rate"), "{}", table.stdout);

    // A user's case that expects a pass of a call the guard must block is reported, not hidden.
    std::fs::write(
        ws.path().join("mine.jsonl"),
        "{\"name\": \"no-path\", \"tool\": \"read_file\", \"arguments\": {}, \"expect\": \"pass\"}\n",
    )
    .unwrap();
    let mine = keel.run(["eval", "gateway", "--cases", "mine.jsonl", "--json"]);
    assert!(mine.success(), "{}", mine.stderr);
    let mine = mine.json();
    let blocked: Vec<&Value> = mine["falseBlocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["case"]["name"] == "no-path")
        .collect();
    assert_eq!(blocked.len(), 1, "{}", mine["falseBlocks"]);
    std::fs::write(ws.path().join("bad.jsonl"), "{\"tool\": \"read_file\"}\n").unwrap();
    let bad = keel.run(["eval", "gateway", "--cases", "bad.jsonl"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("bad.jsonl:1"), "{}", bad.stderr);
}

#[test]
fn a_workflow_is_evaluated_with_json_input_and_refuses_another_model() {
    let ws = crate::common::quickstart();
    std::fs::write(
        ws.path().join("config/evals.yaml"),
        "apiVersion: keel/v1\nkind: Eval\nmetadata: { name: review }\nspec:\n  target: { workflow: notes-review }\n  graders:\n    - { kind: finishReason, value: completed }\n    - { kind: jsonSchema, schema: { type: object } }\n  cases:\n    - { name: ideas, input: { files: [notes/ideas.md] } }\n",
    )
    .unwrap();
    let keel = keel_in(&ws);
    let run = keel.run(["eval", "run", "review", "--json"]);
    assert!(run.success(), "{}\n{}", run.stdout, run.stderr);
    let result = run.json();
    assert_eq!(result["target"], "workflow/notes-review");
    assert_eq!(result["summary"]["passed"], 1, "{}", result["cases"]);
    let run_id = result["cases"][0]["requestId"].as_str().unwrap();
    let shown = keel.json_lines(["runs", "events", run_id, "--json"]);
    assert_eq!(shown[0]["metadata"]["keel.eval"], "review", "{}", shown[0]);
    assert!(
        shown
            .iter()
            .any(|e| e["type"] == "runtime.workflow.started")
    );
    let other = keel.run(["eval", "run", "review", "--model", "offline"]);
    assert_eq!(other.code, Some(2), "{}", other.stderr);
    assert!(
        other.stderr.contains("--model cannot apply"),
        "{}",
        other.stderr
    );
}
