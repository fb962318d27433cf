//! Running the `keel` binary: the [`Cli`] harness bound to this crate's binary, and a copy of
//! the repository's quickstart workspace.

use std::path::Path;

use keel_test_support::{
    Cli, MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder,
};

/// The built `keel` binary, run inside `ws` with a clean environment.
pub(crate) fn keel_in(ws: &TempWorkspace) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_keel"), ws.path())
}

/// The built `keel` binary, run inside `dir` (a folder that is not a [`TempWorkspace`]).
pub(crate) fn keel_at(dir: &Path) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_keel"), dir)
}

/// A fresh copy of the repository's `examples/quickstart` (without `.keel`).
pub(crate) fn quickstart() -> TempWorkspace {
    let ws = TempWorkspace::new();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart");
    copy_tree(&from, ws.path());
    ws
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".keel" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A workspace whose agent `assistant` (on the mock, with `read_file`) answers from its
/// README: the mock asks for `read_file` on any user message and, once the result is back,
/// quotes it ("The README says: …"), or answers `{"readme": "hello"}` when the run asks for
/// a structured output (its instruction names the JSON Schema). `runtime` is the `Runtime`
/// document's spec, if any.
pub(crate) fn readme_workspace(mock: &MockLlm, runtime: Option<&str>) -> TempWorkspace {
    mock.respond_with(|request| match request.last_role() {
        Some("tool") if request.body.to_string().contains("JSON Schema") => {
            MockResponse::text([r#"{"readme": "hello"}"#])
        }
        Some("tool") => MockResponse::text([
            "The README ",
            "says: ",
            request.last_content_of("tool").unwrap_or_default().trim(),
        ]),
        _ => MockResponse::tool_calls([MockToolCall::new(
            "c1",
            "read_file",
            [r#"{"path":"#, r#""README.md"}"#],
        )]),
    });
    let mut builder = WorkspaceBuilder::new();
    if let Some(runtime) = runtime {
        builder = builder.runtime(runtime);
    }
    builder
        .openai_model_at("mock", &mock.base_url())
        .agent("assistant", "{ model: mock, tools: [read_file] }")
        .file("README.md", "hello from the workspace\n")
        .build()
}

/// The JSON lines a client script printed, each parsed; panics with its output unless it
/// succeeded.
pub(crate) fn json_lines(output: &std::process::Output) -> Vec<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// The workspace the protocol clients' tests share, on `runtime`: `assistant` reads its
/// README (`read_file`, with `instructions`), `guarded` calls `record`, which policy sends for
/// approval. The mock asks for the tool its agent has, then quotes the tool's result ("The
/// tool said: …").
pub(crate) fn tool_round_workspace(
    mock: &MockLlm,
    runtime: &str,
    instructions: &str,
) -> WorkspaceBuilder {
    mock.respond_with(|request| match request.last_role() {
        Some("tool") => MockResponse::text([
            "The tool ",
            "said: ",
            request.last_content_of("tool").unwrap_or_default().trim(),
        ]),
        _ if request.body.to_string().contains("Records a count") => {
            MockResponse::tool_calls([MockToolCall::new("rec1", "record", [r#"{"count": 2}"#])])
        }
        _ => MockResponse::tool_calls([MockToolCall::new(
            "c1",
            "read_file",
            [r#"{"path":"#, r#""README.md"}"#],
        )]),
    });
    WorkspaceBuilder::new()
        .runtime(runtime)
        .openai_model_at("mock", &mock.base_url())
        .agent(
            "assistant",
            &format!("{{ model: mock, tools: [read_file], instructions: {instructions:?} }}"),
        )
        .agent("guarded", "{ model: mock, tools: [record] }")
        .tool(
            "record",
            r#"
            description: Records a count.
            schema: { type: object, properties: { count: { type: integer } }, required: [count] }
            policy: ask
            impl: { kind: command, command: ["sh", "-c", "echo recorded"] }
            "#,
        )
        .file("README.md", "hello from the workspace\n")
}
