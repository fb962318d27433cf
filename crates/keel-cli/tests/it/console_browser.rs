//! The web console in a real browser: headless Chromium (Debian's, installed by the test's
//! set-up when missing) driven by `playwright-core` (from npm, into `target/test-clients`)
//! against a live `keel serve` with API keys. The script (`tests/console/console.cjs`) signs
//! in (a client key is refused), watches a run's events appear live, opens a repaired tool
//! call's argument diff, approves one pending call and denies another, sees a decision made
//! elsewhere disappear, forks a run from one of its events, renders a run of over 5,000
//! events in batches of at most 300 rows (no single change to the page adds more), checks a CSRF-less POST is refused and the list fits a phone
//! screen;
//! it saves screenshots of the overview, a request timeline and the approvals inbox into
//! `target/console-screenshots`.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use keel_test_support::test_clients::{chromium, clients_dir, playwright};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::json;

use crate::common::keel_in;

const OPERATOR: &str = "console-operator-key";
const CLIENT: &str = "console-client-key";

fn workspace() -> TempWorkspace {
    let script = json!({"conversations": [
        {"match": "(?i)long", "steps": [{"text": "y".repeat(5000), "chunkSize": 1}]},
        {"match": "(?i)repair", "steps": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt", "limit": "5"}}]},
            {"text": "Read it."}
        ]},
        {"match": "(?i)write the (\\w+)", "steps": [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hello"}}]},
            {"text": "Done: {{last_tool_result}}"}
        ]},
        {"steps": [{"text": "Hello there"}]}
    ]});
    WorkspaceBuilder::new()
        .runtime(
            "{ defaultAgent: assistant, server: { apiKeys: [ { env: CONSOLE_OPERATOR_KEY, role: operator }, { env: CONSOLE_CLIENT_KEY, role: client } ] } }",
        )
        .file("scripts/m.json", script.to_string())
        .model(
            "m",
            "{ provider: scripted, script: scripts/m.json, pricing: { inputPerMTok: 3, outputPerMTok: 15 } }",
        )
        .agent("assistant", "{ model: m, tools: [read_file, write_file] }")
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
    let shots = clients_dir().join("../console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console.cjs");
    let output = Command::new("node")
        .arg(&script)
        .env("NODE_PATH", playwright.join("node_modules"))
        .env("BASE", format!("http://{}", serving.addr()))
        .env("OPERATOR_KEY", OPERATOR)
        .env("CLIENT_KEY", CLIENT)
        .env("CHROMIUM", &chromium)
        .env("SHOTS", &shots)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the browser test failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // What the script measured (the 5,000-event run's batches and longest task).
    let _ = std::io::stderr().write_all(&output.stdout);
    for shot in ["overview.png", "request-timeline.png", "approvals.png"] {
        let size = std::fs::metadata(shots.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(size > 1000, "screenshot {shot} is missing or empty");
    }
}
