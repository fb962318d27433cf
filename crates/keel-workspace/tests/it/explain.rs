//! `explain()` lists every effective field, defaults included, with its origin.

use keel_workspace::{LoadOptions, Origin, Workspace};

use crate::support::{Load, env, workspace};

fn render(ws: &Workspace) -> String {
    ws.explain()
        .iter()
        .map(|e| format!("{} = {}  ({})", e.path, e.value, e.origin))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn explain_lists_every_field_with_its_origin() {
    let ws = workspace();
    ws.write(
        "config/workspace.yaml",
        "\
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: default
  instructions: ${PROMPT}
  tools: [read_file, echo]
---
apiVersion: keel/v1
kind: Tool
metadata: { name: echo }
spec:
  description: Echo the input.
  impl: { kind: command, command: [cat] }
---
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec:
  provider: scripted
  script: resources/script.yaml
",
    );
    let overlay = ws.write(
        "overlays/local.yaml",
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: default }\nspec:\n  stream: false\n",
    );
    let mut options = env(&[("PROMPT", "Be helpful.")]);
    options.overlays = vec![overlay];
    let loaded = ws.load_ok(&options);
    insta::assert_snapshot!(render(&loaded));
}

#[test]
fn explain_without_a_runtime_document_shows_the_default_runtime() {
    let ws = workspace();
    let loaded = ws.load_ok(&LoadOptions::default());
    let runtime: Vec<_> = loaded
        .explain()
        .iter()
        .filter(|e| e.path.starts_with("Runtime/default.spec."))
        .collect();
    assert!(!runtime.is_empty());
    assert_eq!(runtime.len(), loaded.explain().len());
    assert!(runtime.iter().all(|e| e.origin == Origin::Default));
    let steps = runtime
        .iter()
        .find(|e| e.path == "Runtime/default.spec.limits.maxSteps")
        .unwrap();
    assert_eq!(steps.value, serde_json::json!(32));
}

#[test]
fn explain_shows_runtime_fields_from_the_file_normalized() {
    let ws = workspace();
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: main }\nspec:\n  limits:\n    runTimeout: 90s\n",
    );
    let loaded = ws.load_ok(&LoadOptions::default());
    let entry = |path: &str| {
        loaded
            .explain()
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("no entry {path}"))
    };
    let timeout = entry("Runtime/main.spec.limits.runTimeout");
    assert_eq!(timeout.value, serde_json::json!("1m 30s"));
    assert_eq!(
        timeout.origin,
        Origin::File {
            file: "config/runtime.yaml".into(),
            line: 6
        }
    );
    assert_eq!(
        entry("Runtime/main.spec.limits.maxSteps").origin,
        Origin::Default
    );
    assert_eq!(loaded.explain()[0].path, "Runtime/main.spec.defaultAgent");
}
