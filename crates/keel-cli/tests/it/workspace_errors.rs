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
