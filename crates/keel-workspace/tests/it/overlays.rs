//! Overlays merge into the documents they name: maps recursively, lists and scalars replaced.

use keel_workspace::{LoadOptions, Origin};
use serde_json::json;

use keel_test_support::TempWorkspace;

use crate::support::{Load, MODEL_AND_AGENT, located, workspace};

const BASE: &str = "\
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: default
  instructions: base instructions
  tools: [read_file, grep]
  limits: { maxSteps: 4, runTimeout: 1m }
";

fn overlay_options(paths: Vec<std::path::PathBuf>) -> LoadOptions {
    LoadOptions {
        overlays: paths,
        env: Default::default(),
        ..Default::default()
    }
}

fn base_workspace() -> TempWorkspace {
    let ws = workspace();
    ws.write(
        "config/model.yaml",
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: default }\nspec: { provider: scripted, script: s.yaml }\n",
    );
    ws.write("config/agent.yaml", BASE);
    ws
}

#[test]
fn overlays_merge_maps_and_replace_lists() {
    let ws = base_workspace();
    let overlay = ws.write(
        "overlays/prod.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec:\n  tools: [list_dir]\n  limits: { maxSteps: 9 }\n",
    );
    let loaded = ws.load_ok(&overlay_options(vec![overlay]));
    let agent = &loaded.agents["assistant"];
    assert_eq!(agent.tools, ["list_dir"], "lists are replaced");
    assert_eq!(agent.limits.max_steps, Some(9), "scalars are replaced");
    assert_eq!(
        agent.limits.run_timeout.map(|d| d.0.as_secs()),
        Some(60),
        "maps merge: untouched keys stay"
    );
    assert_eq!(agent.instructions, "base instructions");

    let origin = |path: &str| {
        loaded
            .explain()
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("no entry {path}"))
            .origin
            .clone()
    };
    let overlay_file = std::path::PathBuf::from("overlays/prod.yaml");
    assert_eq!(
        origin("Agent/assistant.spec.tools[0]"),
        Origin::Overlay {
            file: overlay_file.clone(),
            line: 5
        }
    );
    assert_eq!(
        origin("Agent/assistant.spec.limits.maxSteps"),
        Origin::Overlay {
            file: overlay_file,
            line: 6
        }
    );
    assert_eq!(
        origin("Agent/assistant.spec.limits.runTimeout"),
        Origin::File {
            file: "config/agent.yaml".into(),
            line: 8
        }
    );
    assert_eq!(
        origin("Agent/assistant.spec.instructions"),
        Origin::File {
            file: "config/agent.yaml".into(),
            line: 6
        }
    );
    assert!(
        loaded
            .explain()
            .iter()
            .all(|e| e.path != "Agent/assistant.spec.tools[1]"),
        "the replaced list has one item"
    );
}

#[test]
fn overlay_folders_are_read_in_path_order_and_can_add_documents() {
    let ws = base_workspace();
    ws.write(
        "overlays/10-first.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec: { instructions: first }\n",
    );
    ws.write(
        "overlays/20-second.yml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec: { instructions: second }\n---\napiVersion: keel/v1\nkind: Agent\nmetadata: { name: extra }\nspec: { model: default }\n",
    );
    let loaded = ws.load_ok(&overlay_options(vec![ws.path().join("overlays")]));
    assert_eq!(loaded.agents["assistant"].instructions, "second");
    assert_eq!(loaded.agents["extra"].model, "default");
}

#[test]
fn later_overlays_win_and_overlays_outside_the_workspace_keep_their_given_path() {
    let ws = base_workspace();
    let outside = tempfile::tempdir().unwrap();
    let a = outside.path().join("a.yaml");
    std::fs::write(
        &a,
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec: { instructions: from-a, limits: { maxSteps: 2 } }\n",
    )
    .unwrap();
    let b = ws.write(
        "b.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: assistant }\nspec: { instructions: from-b }\n",
    );
    let loaded = ws.load_ok(&overlay_options(vec![a.clone(), b]));
    let agent = &loaded.agents["assistant"];
    assert_eq!(agent.instructions, "from-b");
    assert_eq!(agent.limits.max_steps, Some(2));
    let steps = loaded
        .explain()
        .iter()
        .find(|e| e.path == "Agent/assistant.spec.limits.maxSteps")
        .unwrap();
    assert_eq!(steps.origin, Origin::Overlay { file: a, line: 4 });
    assert_eq!(steps.value, json!(2));
}

#[test]
fn a_runtime_overlay_merges_into_the_runtime_whatever_its_name() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/runtime.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: main }\nspec: { limits: { maxSteps: 5, maxParallelTools: 2 } }\n",
    );
    let overlay = ws.write(
        "overlay.yaml",
        "apiVersion: keel/v1\nkind: Runtime\nspec: { limits: { maxSteps: 50 } }\n",
    );
    let loaded = ws.load_ok(&overlay_options(vec![overlay]));
    assert_eq!(loaded.runtime.limits.max_steps, 50);
    assert_eq!(loaded.runtime.limits.max_parallel_tools, 2);
    assert!(
        loaded
            .explain()
            .iter()
            .any(|e| e.path == "Runtime/main.spec.limits.maxSteps")
    );
}

#[test]
fn a_missing_overlay_is_an_error() {
    let ws = base_workspace();
    let diagnostics = ws.diagnostics(&overlay_options(vec!["does/not/exist.yaml".into()]));
    assert_eq!(
        located(&diagnostics),
        ["does/not/exist.yaml:1:1: overlay `does/not/exist.yaml` does not exist"]
    );
    assert!(
        diagnostics[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("current directory")
    );
}

#[test]
fn overlay_documents_with_the_same_identity_do_not_count_as_duplicates() {
    let ws = base_workspace();
    let overlay = ws.write("o.yaml", BASE);
    ws.load_ok(&overlay_options(vec![overlay.clone(), overlay]));
}
