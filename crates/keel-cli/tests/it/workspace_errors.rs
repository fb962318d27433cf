//! A broken workspace reports every error with file:line:column and exits 2.

use keel_test_support::TempWorkspace;

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
