//! `keel tools` and `keel tasks`: direct calls through the gateway, staged calls, telemetry.

use serde_json::Value;

use keel_test_support::{Cli, WorkspaceBuilder};
use serde_json::json;

use crate::common::{keel_in, quickstart};

fn events_of(keel: &Cli, id: &str) -> Vec<Value> {
    keel.json_lines(["runs", "events", id, "--json"])
}

#[test]
fn tools_can_be_listed_described_called_and_counted() {
    let ws = quickstart();
    let keel = keel_in(&ws);

    let listed = keel.run(["tools", "list"]).stdout;
    for tool in ["list_dir", "read_file", "grep", "word_count"] {
        assert!(listed.contains(tool), "{listed}");
    }
    let described: Value =
        serde_json::from_str(&keel.run(["tools", "describe", "read_file"]).stdout).unwrap();
    assert_eq!(described["parameters"]["required"][0], "path");

    let called = keel.run([
        "tools",
        "call",
        "read_file",
        "--args",
        r#"{"path":"notes/ideas.md"}"#,
    ]);
    assert_eq!(called.code, Some(0), "{}", called.stderr);
    assert!(
        called.stdout.contains("Ship the quickstart"),
        "{}",
        called.stdout
    );

    let blocked = keel.run([
        "tools",
        "call",
        "read_file",
        "--args",
        r#"{"path":"../../etc/passwd"}"#,
    ]);
    assert_eq!(blocked.code, Some(1), "{}", blocked.stderr);

    let listed = keel.run(["runs", "list", "--json"]).stdout;
    let newest: Value = serde_json::from_str(listed.lines().nth(1).unwrap()).unwrap();
    let types: Vec<String> = events_of(&keel, newest["requestId"].as_str().unwrap())
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

    let stats = keel.run(["tools", "stats", "--json"]).stdout;
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
    let ws = quickstart();
    let keel = keel_in(&ws);

    // A call with a missing argument is staged but denied, with the issue.
    let created = keel.run(["tasks", "create", "word_count", "--args", "{}"]);
    assert_eq!(created.code, Some(1));
    let task: Value = serde_json::from_str(&created.stdout).unwrap();
    assert_eq!(task["decision"], "deny");
    assert_eq!(task["status"], "created");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let refused = keel.run(["tasks", "run", &id]);
    assert_eq!(refused.code, Some(2));

    // Patched, it is checked again and allowed.
    let updated = keel.run([
        "tasks",
        "update",
        &id,
        "--args",
        r#"{"path":"notes/ideas.md"}"#,
    ]);
    assert_eq!(updated.code, Some(0), "{}", updated.stderr);
    let task: Value = serde_json::from_str(&updated.stdout).unwrap();
    assert_eq!(task["decision"], "allow");

    let ran = keel.run(["tasks", "run", &id]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(ran.stdout.contains("\"words\""), "{}", ran.stdout);
    let task: Value = serde_json::from_str(&keel.run(["tasks", "get", &id]).stdout).unwrap();
    assert_eq!(task["status"], "completed");
    let events = events_of(&keel, task["requestId"].as_str().unwrap());
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "runtime.tool.direct.started" && e["taskId"] == id.as_str())
    );
    assert_eq!(
        keel.run(["tasks", "run", &id]).code,
        Some(2),
        "a task runs once"
    );

    assert_eq!(keel.run(["tasks", "delete", &id]).code, Some(0));
    assert_eq!(keel.run(["tasks", "get", &id]).code, Some(1));
}

#[test]
fn a_large_output_is_stored_and_shown_as_an_artifact() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ limits: { maxToolOutputBytes: 1000 } }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "x"}]}]}))
        .tool(
            "big",
            r#"
            description: Prints a lot.
            impl: { kind: command, command: ["sh", "-c", "seq 1 5000"] }
            policy: allow
            "#,
        )
        .agent("a", "{ model: m, tools: [big] }")
        .build();
    let keel = keel_in(&ws);

    let called = keel.run(["tools", "call", "big"]);
    assert_eq!(called.code, Some(0), "{}", called.stderr);
    let preview = called.stdout;
    let uri = preview
        .split_whitespace()
        .find(|w| w.starts_with("keel://artifacts/"))
        .unwrap()
        .trim_end_matches(']');
    let shown = keel.run(["artifacts", "show", uri]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    let full: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    assert_eq!(shown.stdout, full);
    let meta: Value =
        serde_json::from_str(&keel.run(["artifacts", "show", uri, "--meta"]).stdout).unwrap();
    assert_eq!(meta["bytes"], full.len());
    assert_eq!(
        keel.run(["artifacts", "show", "keel://artifacts/art_missing"])
            .code,
        Some(1)
    );
}

/// Arguments larger than a command line may hold (Linux caps one argument at 128 KiB) come
/// from a file or from stdin.
#[test]
fn large_arguments_come_from_a_file_or_stdin() {
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", "http://127.0.0.1:1/v1")
        .agent("writer", "model: mock\ntools: [write_file]\n")
        .policy("edits", "rules: [{ tool: write_file, decision: allow }]")
        .build();
    let keel = keel_in(&ws);
    let body = format!("{}END", "0123456789abcdef".repeat(300 * 1024 / 16));
    assert!(body.len() > 256 * 1024);
    ws.write(
        "big.json",
        json!({ "path": "from-file.txt", "content": body }).to_string(),
    );

    let from_file = keel.run(["tools", "call", "write_file", "--args", "@big.json"]);
    assert_eq!(from_file.code, Some(0), "{}", from_file.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("from-file.txt")).unwrap(),
        body
    );

    let stdin = json!({ "path": "from-stdin.txt", "content": body }).to_string();
    let from_stdin = keel.run_with_stdin(
        ["tools", "call", "write_file", "--args", "-"],
        stdin.as_bytes(),
    );
    assert_eq!(from_stdin.code, Some(0), "{}", from_stdin.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("from-stdin.txt")).unwrap(),
        body
    );
    // The log holds the written file's size and digest, not the file.
    let events = serde_json::to_string(&keel.newest_run_events()).unwrap();
    assert!(!events.contains("0123456789abcdef"));
    assert!(
        events.contains(&format!("\"size\":{}", body.len())),
        "{events}"
    );

    let missing = keel.run(["tools", "call", "write_file", "--args", "@nowhere.json"]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing
            .stderr
            .contains("cannot read --args file `nowhere.json`"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_direct_calls_narration_says_each_fact_once() {
    let ws = quickstart();
    let keel = keel_in(&ws);

    let called = keel.run([
        "tools",
        "call",
        "read_file",
        "--args",
        r#"{"path":"notes/ideas.md"}"#,
    ]);
    assert_eq!(called.code, Some(0), "{}", called.stderr);
    let narration = called.stderr;
    assert_eq!(
        narration.matches("read_file finished in").count(),
        1,
        "{narration}"
    );
}

#[test]
fn a_blocked_direct_calls_narration_speaks_of_no_model() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    // A call the gateway blocks: nobody but the caller is told, and there is no model.
    let blocked = keel.run(["tools", "call", "read_file", "--args", "{}"]);
    assert_eq!(blocked.code, Some(1), "{}", blocked.stderr);
    let narration = blocked.stderr;
    let line = narration
        .lines()
        .find(|l| l.contains("Blocked a call to read_file"))
        .unwrap_or_else(|| panic!("no block narrated: {narration}"));
    assert!(!line.contains("model"), "{line}");
    assert_eq!(
        narration.matches("did not succeed").count() + narration.matches("» Failed").count(),
        1,
        "{narration}"
    );
}
