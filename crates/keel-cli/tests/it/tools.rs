//! `keel tools` and `keel tasks`: direct calls through the gateway, staged calls, telemetry.

use serde_json::Value;

use crate::common::{copy_tree, quickstart_dir, run, stderr, stdout};

fn events_of(ws: &str, id: &str) -> Vec<Value> {
    stdout(&run(&["runs", "events", "-w", ws, id, "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn tools_can_be_listed_described_called_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();

    let listed = stdout(&run(&["tools", "list", "-w", ws]));
    for tool in ["list_dir", "read_file", "grep", "word_count"] {
        assert!(listed.contains(tool), "{listed}");
    }
    let described: Value =
        serde_json::from_str(&stdout(&run(&["tools", "describe", "-w", ws, "read_file"]))).unwrap();
    assert_eq!(described["parameters"]["required"][0], "path");

    let called = run(&[
        "tools",
        "call",
        "-w",
        ws,
        "read_file",
        "--args",
        r#"{"path":"notes/ideas.md"}"#,
    ]);
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));
    assert!(
        stdout(&called).contains("Ship the quickstart"),
        "{}",
        stdout(&called)
    );

    let blocked = run(&[
        "tools",
        "call",
        "-w",
        ws,
        "read_file",
        "--args",
        r#"{"path":"../../etc/passwd"}"#,
    ]);
    assert_eq!(blocked.status.code(), Some(1), "{}", stderr(&blocked));

    let listed = stdout(&run(&["runs", "list", "-w", ws, "--json"]));
    let newest: Value = serde_json::from_str(listed.lines().nth(1).unwrap()).unwrap();
    let types: Vec<String> = events_of(ws, newest["requestId"].as_str().unwrap())
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        vec![
            "runtime.request.started",
            "runtime.tool.direct.started",
            "runtime.tool.guard",
            "runtime.adapter.event",
            "runtime.adapter.event",
            "runtime.tool.direct.completed",
            "runtime.request.completed",
        ]
    );

    let stats = stdout(&run(&["tools", "stats", "-w", ws, "--json"]));
    let read_file: Value = stats
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| s["tool"] == "read_file")
        .unwrap();
    assert_eq!(read_file["calls"], 1);
    assert_eq!(read_file["blocks"], 1);
}

#[test]
fn tasks_are_staged_checked_patched_run_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();

    // A call with a missing argument is staged but denied, with the issue.
    let created = run(&["tasks", "create", "-w", ws, "word_count", "--args", "{}"]);
    assert_eq!(created.status.code(), Some(1));
    let task: Value = serde_json::from_str(&stdout(&created)).unwrap();
    assert_eq!(task["decision"], "deny");
    assert_eq!(task["status"], "created");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let refused = run(&["tasks", "run", "-w", ws, &id]);
    assert_eq!(refused.status.code(), Some(2));

    // Patched, it is checked again and allowed.
    let updated = run(&[
        "tasks",
        "update",
        "-w",
        ws,
        &id,
        "--args",
        r#"{"path":"notes/ideas.md"}"#,
    ]);
    assert_eq!(updated.status.code(), Some(0), "{}", stderr(&updated));
    let task: Value = serde_json::from_str(&stdout(&updated)).unwrap();
    assert_eq!(task["decision"], "allow");

    let ran = run(&["tasks", "run", "-w", ws, &id]);
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    assert!(stdout(&ran).contains("\"words\""), "{}", stdout(&ran));
    let task: Value =
        serde_json::from_str(&stdout(&run(&["tasks", "get", "-w", ws, &id]))).unwrap();
    assert_eq!(task["status"], "completed");
    let events = events_of(ws, task["requestId"].as_str().unwrap());
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "runtime.tool.direct.started" && e["taskId"] == id.as_str())
    );
    assert_eq!(
        run(&["tasks", "run", "-w", ws, &id]).status.code(),
        Some(2),
        "a task runs once"
    );

    assert_eq!(
        run(&["tasks", "delete", "-w", ws, &id]).status.code(),
        Some(0)
    );
    assert_eq!(run(&["tasks", "get", "-w", ws, &id]).status.code(), Some(1));
}

#[test]
fn a_large_output_is_stored_and_shown_as_an_artifact() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/all.yaml"),
        "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: default }\nspec:\n  limits: { maxToolOutputBytes: 1000 }\n---\napiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec: { provider: scripted, script: s.json }\n---\napiVersion: keel/v1\nkind: Tool\nmetadata: { name: big }\nspec:\n  description: Prints a lot.\n  impl: { kind: command, command: [\"sh\", \"-c\", \"seq 1 5000\"] }\n  policy: allow\n---\napiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: m, tools: [big] }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.json"),
        r#"{"conversations":[{"steps":[{"text":"x"}]}]}"#,
    )
    .unwrap();
    let ws = dir.path().to_str().unwrap();

    let called = run(&["tools", "call", "-w", ws, "big"]);
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));
    let preview = stdout(&called);
    let uri = preview
        .split_whitespace()
        .find(|w| w.starts_with("keel://artifacts/"))
        .unwrap()
        .trim_end_matches(']');
    let shown = run(&["artifacts", "show", "-w", ws, uri]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let full: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    assert_eq!(stdout(&shown), full);
    let meta: Value = serde_json::from_str(&stdout(&run(&[
        "artifacts",
        "show",
        "-w",
        ws,
        uri,
        "--meta",
    ])))
    .unwrap();
    assert_eq!(meta["bytes"], full.len());
    assert_eq!(
        run(&[
            "artifacts",
            "show",
            "-w",
            ws,
            "keel://artifacts/art_missing"
        ])
        .status
        .code(),
        Some(1)
    );
}
