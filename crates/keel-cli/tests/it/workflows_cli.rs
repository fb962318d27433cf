//! Workflows from the command line: `keel workflows list|show|graph|run`, and durable
//! execution across a SIGKILL — the process running a workflow is killed while the workflow
//! waits at its approval node (after its first three nodes completed); `keel runs resume`
//! continues it from the log, waits on the same approval, and no node's side effect happens
//! twice.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_test_support::workflows::triage_workspace;
use keel_test_support::{Cli, MockLlm, MockResponse};
use serde_json::Value;

use crate::common::keel_in;

/// The pending approvals, waiting (within a generous deadline) until there is one.
async fn wait_for_pending(keel: &Cli) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = keel.json_lines(["approvals", "list", "--json"]);
        if !listed.is_empty() || Instant::now() > deadline {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn started(events: &[Value], node: &str) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "runtime.workflow.node.started" && e["node"] == node)
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_killed_at_its_approval_resumes_without_repeating_a_node() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text([r#"{"severity": "high"}"#]));
    let ws = triage_workspace(&mock.base_url()).build();
    let keel = keel_in(&ws);

    let mut child = keel
        .command([
            "workflows",
            "run",
            "triage",
            "--input",
            r#"{"ticket": "T-9"}"#,
            "--no-approve-here",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pending = wait_for_pending(&keel).await;
    assert_eq!(pending.len(), 1, "the workflow reached its approval node");
    let approval_id = pending[0]["approvalId"].as_str().unwrap().to_owned();
    let run_id = pending[0]["requestId"].as_str().unwrap().to_owned();
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = tokio::task::block_in_place(|| child.wait());

    let before = keel.json_lines(["runs", "events", &run_id, "--json"]);
    let completed: Vec<&str> = before
        .iter()
        .filter(|e| e["type"] == "runtime.workflow.node.completed" && e.get("item").is_none())
        .map(|e| e["node"].as_str().unwrap())
        .collect();
    assert_eq!(completed, ["plan", "each", "classify"]);
    let record: Value =
        serde_json::from_str(&keel.run(["runs", "show", &run_id, "--json"]).stdout).unwrap();
    assert_eq!(record["status"], "interrupted", "recovered as interrupted");

    // Resume in a new process; it waits on the same approval.
    let resumed = keel
        .command(["runs", "resume", &run_id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = keel.json_lines(["runs", "events", &run_id, "--json"]);
        if events
            .iter()
            .any(|e| e["type"] == "runtime.request.resumed")
            || Instant::now() > deadline
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let still = wait_for_pending(&keel).await;
    assert_eq!(still.len(), 1);
    assert_eq!(
        still[0]["approvalId"],
        approval_id.as_str(),
        "the same approval"
    );
    let approved = keel.run(["approvals", "approve", &approval_id]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    let output = tokio::task::block_in_place(|| resumed.wait_with_output()).unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        r#"{"notify":{"recorded":true}}"#
    );

    let record: Value =
        serde_json::from_str(&keel.run(["runs", "show", &run_id, "--json"]).stdout).unwrap();
    assert_eq!(record["status"], "completed");
    let effects = std::fs::read_to_string(ws.join("effects.log")).unwrap();
    let mut lines: Vec<&str> = effects.lines().collect();
    lines.sort_unstable();
    let before_dedup = lines.len();
    lines.dedup();
    assert_eq!(
        before_dedup,
        lines.len(),
        "a side effect happened twice: {effects}"
    );
    assert_eq!(lines.len(), 11, "{effects}");

    let events = keel.json_lines(["runs", "events", &run_id, "--json"]);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64 + 1, "seq stays dense");
    }
    for node in ["plan", "classify", "gate", "notify", "done"] {
        assert_eq!(started(&events, node), 1, "node {node} started once");
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "runtime.approval.requested")
            .count(),
        1
    );
    // Classify and notify: one child run each, none started again.
    let tree: Value = serde_json::from_str(
        &keel
            .run(["runs", "show", &run_id, "--tree", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(tree["children"].as_array().unwrap().len(), 2);
}

#[test]
fn workflows_are_listed_shown_and_drawn() {
    let ws = triage_workspace("http://127.0.0.1:9/v1").build();
    let keel = keel_in(&ws);
    let listed = keel.run(["workflows", "list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(listed.stdout.contains("triage"));
    assert!(listed.stdout.contains("notify"));
    let shown = keel.run(["workflows", "show", "triage"]);
    assert!(
        shown
            .stdout
            .contains("classify → gate when /severity == \"high\""),
        "{}",
        shown.stdout
    );
    let graph = keel.run(["workflows", "graph", "triage"]);
    assert_eq!(graph.code, Some(0));
    insta::assert_snapshot!("triage_mermaid", graph.stdout);
    let missing = keel.run(["workflows", "show", "nope"]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.contains("no workflow `nope`"),
        "{}",
        missing.stderr
    );
}
