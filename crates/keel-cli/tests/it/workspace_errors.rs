//! A broken workspace reports every error with file:line:column and exits 2.

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::json;

use crate::common::keel_in;

#[test]
fn broken_workspace_reports_all_errors_and_exits_2() {
    // The documents are written by hand: their positions are what the test checks.
    let ws = TempWorkspace::new();
    let keel = keel_in(&ws);
    ws.write(
        "config/agents.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec:\n  model: gpt\n  instructions: hi\n  tools: [read_file, get_weathr]\n  temperature: 0.3\n",
    );
    ws.write(
        "config/models.yaml",
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: default }\nspec:\n  provider: openai\n  model: gpt-4o-mini\n  baseUrl: \"${KEEL_TEST_SURELY_UNSET_VAR}\"\n",
    );
    ws.write(
        "config/tools.yaml",
        "apiVersion: keel/v1\nkind: Tool\nmetadata: { name: get_weather\nspec: {}\n",
    );

    let output = keel.run(["validate"]);

    assert_eq!(output.code, Some(2));
    insta::assert_snapshot!("broken_workspace", output.stderr);
    // `run` refuses the same workspace the same way.
    let run_output = keel.run(["run", "hi"]);
    assert_eq!(run_output.code, Some(2));
    assert_eq!(run_output.stderr, output.stderr);
}

#[test]
fn explain_prints_values_with_origins_and_hides_secrets() {
    let ws = TempWorkspace::new();
    let keel = keel_in(&ws);
    ws.write(
        "config/all.yaml",
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec:\n  provider: openai\n  model: \"${MODEL_NAME:-gpt-4o-mini}\"\n  baseUrl: \"https://example.invalid/${PROXY_TOKEN}\"\n---\napiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: m }\n",
    )
    ;
    ws.write(".env", "PROXY_TOKEN=very-secret-value\n");

    let output = keel.run(["config", "explain"]);

    assert_eq!(output.code, Some(0), "{}", output.stderr);
    let text = output.stdout;
    assert!(!text.contains("very-secret-value"), "{text}");
    assert!(
        text.contains(
            "Model/m.spec.baseUrl = \"[REDACTED]\"  (env PROXY_TOKEN (config/all.yaml:7))"
        ),
        "{text}"
    );
    assert!(
        text.contains("Model/m.spec.model = \"gpt-4o-mini\""),
        "{text}"
    );
    assert!(
        text.contains("Runtime/default.spec.limits.maxSteps = 32  (default)"),
        "{text}"
    );
    assert!(
        text.contains("Agent/a.spec.model = \"m\"  (config/all.yaml:12)"),
        "{text}"
    );
}

#[test]
fn validate_refuses_a_workspace_with_nothing_to_run_and_locates_bad_bytes() {
    let ws = TempWorkspace::new();
    let keel = keel_in(&ws);
    ws.write(
        "config/models.yaml",
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec: { provider: scripted, script: s.yaml }\n",
    );

    let no_agent = keel.run(["validate"]);

    assert_eq!(no_agent.code, Some(2));
    assert!(
        no_agent.stderr.contains(
            "config/models.yaml:1:1: error: the workspace defines no agent (nor workflow), so nothing can run"
        ),
        "{}",
        no_agent.stderr
    );

    ws.write(
        "config/agents.yaml",
        b"apiVersion: keel/v1\nkind: Agent\n# caf\xe9\n",
    );
    let bad_bytes = keel.run(["validate"]);

    assert_eq!(bad_bytes.code, Some(2));
    assert!(
        bad_bytes
            .stderr
            .contains("config/agents.yaml:3:6: error: invalid UTF-8: byte 0xe9"),
        "{}",
        bad_bytes.stderr
    );
}

const RUNTIME_NAMING_A: &str =
    "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: r }\nspec: { defaultAgent: a }\n";

#[test]
fn an_empty_workspace_names_the_empty_file() {
    let ws = TempWorkspace::new();
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: r }\nspec: {}\n",
    );
    ws.write("config/agents.yaml", "# the agents go here\n");
    let output = keel_in(&ws).run(["validate"]);
    assert_eq!(output.code, Some(2));
    assert!(
        output.stderr.starts_with(
            "config/agents.yaml:1:1: error: the workspace defines no agent (nor workflow), so nothing can run; `config/agents.yaml` holds no document"
        ),
        "{}",
        output.stderr
    );
}

#[test]
fn an_invalid_utf8_file_is_the_only_error_reported() {
    let ws = TempWorkspace::new();
    ws.write("config/runtime.yaml", RUNTIME_NAMING_A);
    ws.write(
        "config/agents.yaml",
        b"apiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: m, instructions: \"caf\xe9\" }\n"
            .as_slice(),
    );
    let output = keel_in(&ws).run(["validate"]);
    assert_eq!(output.code, Some(2));
    assert!(
        output
            .stderr
            .contains("config/agents.yaml:4:37: error: invalid UTF-8"),
        "{}",
        output.stderr
    );
    assert!(!output.stderr.contains("defaultAgent"), "{}", output.stderr);
    assert!(
        output.stderr.ends_with("1 error in workspace\n"),
        "{}",
        output.stderr
    );
}

#[test]
fn validate_counts_everything_the_workspace_defines() {
    let ws = WorkspaceBuilder::new()
        .scripted_model("m", &json!({"conversations": []}))
        .agent("a", "{ model: m }")
        .tool(
            "t",
            "description: Echoes.\nimpl: { kind: command, command: [\"cat\"] }\n",
        )
        .document(
            "McpServer",
            "files",
            "  transport: stdio\n  command: [\"true\"]\n  enabled: false\n",
        )
        .document("Memory", "notes", "  namespace: team\n")
        .document(
            "Memory",
            "facts",
            "  namespace: facts\n",
        )
        .hook(
            "audit",
            "event: PostToolUse\nhandler: { kind: command, command: [\"true\"] }\nenabled: false\n",
        )
        .policy("p", "{ rules: [] }")
        .file(
            "resources/skills/triage/SKILL.md",
            "---\nname: triage\ndescription: Sort incoming issues.\n---\nBy severity.\n",
        )
        .yaml(
            "apiVersion: keel/v1\nkind: Workflow\nmetadata: { name: w }\nspec:\n  nodes:\n    - { id: one, kind: agent, agent: a }\n",
        )
        .build();
    let output = keel_in(&ws).run(["validate"]);
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    assert!(
        output.stdout.starts_with(
            "ok: 1 agent, 1 model, 1 tool, 1 workflow, 1 MCP server, 2 memories, 1 skill, 1 hook (1 disabled), 1 policy in "
        ),
        "{}",
        output.stdout
    );
}

#[test]
fn runs_list_keeps_its_columns_with_long_agent_names() {
    let long = "an-agent-with-a-name-longer-than-its-column";
    let ws = WorkspaceBuilder::new()
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Done."}]}]}),
        )
        .agent("a", "{ model: m }")
        .agent(long, "{ model: m }")
        .build();
    let keel = keel_in(&ws);
    for agent in ["a", long] {
        let run = keel.run(["run", "--agent", agent, "hi"]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    let listed = keel.run(["runs", "list"]).stdout;
    let mut lines = listed.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{listed}");
    let runs = keel.json_lines(["runs", "list", "--json"]);
    for (row, run) in rows.iter().zip(&runs) {
        for (column, value) in [
            ("STATUS", run["status"].as_str().unwrap()),
            ("AGENT", run["agent"].as_str().unwrap()),
            ("STARTED", run["startedAt"].as_str().unwrap()),
            ("INPUT", "hi"),
        ] {
            let at = header.find(column).unwrap();
            assert!(
                row.get(at..).is_some_and(|r| r.starts_with(value))
                    && row.get(at - 2..at) == Some("  "),
                "{column} slipped:\n{listed}"
            );
        }
    }
}
