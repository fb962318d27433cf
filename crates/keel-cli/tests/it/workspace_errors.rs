//! A broken workspace reports every error with file:line:column and exits 2.

use crate::common::{run, stderr};

#[test]
fn broken_workspace_reports_all_errors_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("agents.yaml"),
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec:\n  model: gpt\n  instructions: hi\n  tools: [read_file, get_weathr]\n  temperature: 0.3\n",
    )
    .unwrap();
    std::fs::write(
        config.join("models.yaml"),
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: default }\nspec:\n  provider: openai\n  model: gpt-4o-mini\n  baseUrl: \"${KEEL_TEST_SURELY_UNSET_VAR}\"\n",
    )
    .unwrap();
    std::fs::write(
        config.join("tools.yaml"),
        "apiVersion: keel/v1\nkind: Tool\nmetadata: { name: get_weather\nspec: {}\n",
    )
    .unwrap();

    let output = run(&["validate", "-w", dir.path().to_str().unwrap()]);

    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!("broken_workspace", stderr(&output));
    // `run` refuses the same workspace the same way.
    let run_output = run(&["run", "-w", dir.path().to_str().unwrap(), "hi"]);
    assert_eq!(run_output.status.code(), Some(2));
    assert_eq!(stderr(&run_output), stderr(&output));
}

#[test]
fn explain_prints_values_with_origins_and_hides_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/all.yaml"),
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec:\n  provider: openai\n  model: \"${MODEL_NAME:-gpt-4o-mini}\"\n  baseUrl: \"https://example.invalid/${PROXY_TOKEN}\"\n---\napiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: m }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".env"), "PROXY_TOKEN=very-secret-value\n").unwrap();

    let output = crate::common::run(&["config", "explain", "-w", dir.path().to_str().unwrap()]);

    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = crate::common::stdout(&output);
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
