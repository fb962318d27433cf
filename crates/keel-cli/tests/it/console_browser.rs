//! The web console in a real browser: headless Chromium (Debian's, installed by the test's
//! set-up when missing) driven by `playwright-core` (from npm, into `target/test-clients`)
//! against a live `keel serve` with operator and client keys. The script
//! (`tests/console/console.cjs`) drives every page: sign-in (a client key is refused, no
//! navigation before), the overview's charts, a run with a repaired call, an approval decided
//! on its own page and a subagent (its waterfall compared bar by bar with the events), a
//! workflow started from its page with a checked input (its graph showing the map's items and
//! the approval node waiting, then every node done), usage (its chart compared here with
//! `keel usage`), tools, memory search and history, the workspace inventory, the requests
//! list, a 10,000-event run and a 500-node workflow under the browser's long-task measure, the
//! 390 px layout, keyboard focus and the dark theme, with no console error and no failed
//! request. Screenshots (desktop and phone) go to `target/console-screenshots`, or to
//! `KEEL_CONSOLE_SHOTS` (`docs/console` refreshes the README's).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_test_support::test_clients::{chromium, clients_dir, playwright};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

const OPERATOR: &str = "console-operator-key";
const CLIENT: &str = "console-client-key";

/// The nodes of the large workflow: a start, 498 joins in 20 chains, an end.
const BIG_NODES: usize = 500;

fn big_workflow() -> Value {
    let chains = 20;
    let mut nodes = vec![json!({"id": "start", "kind": "join"})];
    let mut edges = Vec::new();
    let mut last: Vec<String> = vec!["start".into(); chains];
    for i in 0..BIG_NODES - 2 {
        let id = format!("n{i}");
        let chain = i % chains;
        nodes.push(json!({"id": id, "kind": "join"}));
        edges.push(json!({"from": last[chain], "to": id}));
        last[chain] = id;
    }
    nodes.push(json!({"id": "end", "kind": "join"}));
    for from in last {
        edges.push(json!({"from": from, "to": "end"}));
    }
    json!({"description": "Five hundred joins", "nodes": nodes, "edges": edges})
}

fn workspace() -> TempWorkspace {
    let script = json!({"conversations": [
        {"match": "(?i)long", "steps": [{"text": "y".repeat(10_000), "chunkSize": 1}]},
        {"match": "(?i)tour", "steps": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": "5"}}]},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "tour.txt", "content": "toured"}}]},
            {"toolCalls": [{"name": "task", "arguments": {"agent": "helper", "prompt": "Say hello"}}]},
            {"text": "Toured."}
        ]},
        {"match": "(?i)repair", "steps": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": "5", "colour": "blue"}}]},
            {"text": "Read it."}
        ]},
        {"match": "(?i)write the (\\w+)", "steps": [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hello"}}]},
            {"text": "Done: {{last_tool_result}}"}
        ]},
        {"steps": [{"text": "Hello there"}]}
    ]});
    let ship = json!({
        "description": "Read the notes for each item, then ask a person",
        "input": {"schema": {"type": "object", "required": ["ticket", "items"], "properties": {
            "ticket": {"type": "string", "minLength": 1},
            "items": {"type": "array", "items": {"type": "integer"}}
        }}},
        "nodes": [
            {"id": "prep", "kind": "tool", "tool": "read_file", "arguments": {"path": "notes.txt"}},
            {"id": "each", "kind": "map", "items": "input.items", "concurrency": 2,
             "node": {"kind": "tool", "tool": "read_file", "arguments": {"path": "notes.txt"}}},
            {"id": "gate", "kind": "approval", "message": "Ship {{ input.ticket }}?"},
            {"id": "done", "kind": "join"}
        ],
        "edges": [
            {"from": "prep", "to": "each"}, {"from": "each", "to": "gate"}, {"from": "gate", "to": "done"}
        ]
    });
    WorkspaceBuilder::new()
        .runtime(
            "{ defaultAgent: assistant, server: { apiKeys: [ { env: CONSOLE_OPERATOR_KEY, role: operator, name: operator, budget: 5 }, { env: CONSOLE_CLIENT_KEY, role: client } ] } }",
        )
        .file("scripts/m.json", script.to_string())
        .model(
            "m",
            "{ provider: scripted, script: scripts/m.json, pricing: { inputPerMTok: 3, outputPerMTok: 15 } }",
        )
        .agent(
            "assistant",
            "{ model: m, tools: [read_file, write_file, list_dir], subagents: [helper] }",
        )
        .agent("helper", "{ model: m }")
        .document("Workflow", "ship", &ship.to_string())
        .document("Workflow", "big", &big_workflow().to_string())
        .document(
            "Memory",
            "notes",
            "  namespace: team\n  readers: [assistant]\n  writers: [assistant]\n",
        )
        .file("notes.txt", "one\ntwo\nthree\n")
        .build()
}

#[test]
fn the_console_works_in_a_real_browser() {
    let chromium = match chromium() {
        Ok(path) => path,
        Err(reason) => {
            // The reason is printed, not swallowed (there is no Chromium to test with).
            let _ = writeln!(std::io::stderr(), "skipped: {reason}");
            return;
        }
    };
    let playwright = playwright();
    let ws = workspace();
    let keel = keel_in(&ws)
        .env("CONSOLE_OPERATOR_KEY", OPERATOR)
        .env("CONSOLE_CLIENT_KEY", CLIENT);
    let serving = keel.serve();
    let shots = match std::env::var_os("KEEL_CONSOLE_SHOTS") {
        Some(dir) => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir),
        None => clients_dir().join("../console-screenshots"),
    };
    std::fs::create_dir_all(&shots).unwrap();
    let report: PathBuf = clients_dir().join("../console-report.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console.cjs");
    let output = Command::new("node")
        .arg(&script)
        .env("NODE_PATH", playwright.join("node_modules"))
        .env("BASE", format!("http://{}", serving.addr()))
        .env("OPERATOR_KEY", OPERATOR)
        .env("CLIENT_KEY", CLIENT)
        .env("CHROMIUM", &chromium)
        .env("SHOTS", &shots)
        .env("REPORT", &report)
        .env("BIG_NODES", BIG_NODES.to_string())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the browser test failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // What the script measured (the long run's and the large graph's longest tasks).
    let _ = std::io::stderr().write_all(&output.stdout);
    for shot in [
        "overview.png",
        "request-waterfall.png",
        "workflow-graph.png",
        "usage.png",
        "approvals.png",
        "phone-request.png",
        "phone-overview.png",
    ] {
        let size = std::fs::metadata(shots.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(size > 1000, "screenshot {shot} is missing or empty");
    }
    // The usage chart's columns equal `keel usage --by day` (cost, today's column).
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let rows = keel_in(&ws).json_lines(["usage", "--by", "day", "--json"]);
    let charted = report["usageChart"].as_object().unwrap();
    assert!(!rows.is_empty(), "keel usage found runs");
    for row in &rows {
        let day = &row["group"].as_str().unwrap()[5..];
        let cost: f64 = row["usage"]["cost"]["amount"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let shown = charted[day].as_f64().unwrap();
        assert!(
            (shown - cost).abs() < 1e-9,
            "the chart shows {shown} for {day}, keel usage {cost}"
        );
    }
}
