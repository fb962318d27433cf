//! Crash recovery end to end: 20 `keel run` processes against a slow model are killed with
//! SIGKILL mid-flight; afterwards every run is `completed` or `interrupted`, every log is
//! dense with no torn or duplicated record (store and JSONL mirror agree), and
//! `keel runs resume` completes each interrupted run. It also has 20 processes writing to one
//! store at the same time.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

const RUNS: usize = 20;

fn workspace(base_url: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .openai_model_at("mock", base_url)
        .agent("a", "{ model: mock, tools: [list_dir] }")
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_runs_are_interrupted_consistent_and_resumable() {
    let mock = MockLlm::start().await;
    let slow = Arc::new(AtomicBool::new(true));
    let slow_flag = slow.clone();
    mock.respond_with(move |request| match request.last_role() {
        Some("user") => {
            MockResponse::tool_calls([MockToolCall::new("c1", "list_dir", [r#"{"path":"."}"#])])
        }
        _ if slow_flag.load(Ordering::SeqCst) => {
            MockResponse::text(["Still ", "thinking ", "about ", "it ", "slowly."])
                .chunk_delay(Duration::from_millis(400))
        }
        _ => MockResponse::text(["Done ", "after ", "resume."]),
    });
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);

    let mut children: Vec<Child> = (0..RUNS)
        .map(|i| {
            keel.command(["run", &format!("task {i}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Kill once every run is in its slow second round (or after a generous wait).
    let deadline = Instant::now() + Duration::from_secs(30);
    while mock.request_count() < 2 * RUNS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for child in &children {
        let _ = Command::new("kill")
            .args(["-KILL", &child.id().to_string()])
            .status();
    }
    for child in &mut children {
        let _ = tokio::task::block_in_place(|| child.wait());
    }
    slow.store(false, Ordering::SeqCst);

    // Starting Keel again recovers the runs of the dead processes.
    let listed = keel.run(["runs", "list", "--json", "--limit", "100"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let runs = listed.json_lines();
    assert_eq!(runs.len(), RUNS);
    let mut interrupted = Vec::new();
    for record in &runs {
        let id = record["requestId"].as_str().unwrap();
        match record["status"].as_str().unwrap() {
            "completed" => {}
            "interrupted" => interrupted.push(id.to_owned()),
            other => panic!("run {id} is {other}"),
        }
        let events = keel.json_lines(["runs", "events", id, "--json"]);
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"], i as u64 + 1, "run {id}: seq must be dense");
        }
        // The event log (shared segments) was repaired from the store: this run's lines are
        // its stored events, each once, in order.
        let logged = keel_test_support::logged_lines(ws.path(), id);
        assert_eq!(
            logged
                .iter()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>(),
            events,
            "run {id}: the event log agrees with the store"
        );
    }
    assert!(!interrupted.is_empty(), "the kill landed mid-flight");

    for id in &interrupted {
        let resumed = keel.run(["runs", "resume", id]);
        assert_eq!(resumed.code, Some(0), "resume {id}: {}", resumed.stderr);
        assert!(resumed.stdout.contains("Done after resume."));
        let record: Value =
            serde_json::from_str(&keel.run(["runs", "show", id, "--json"]).stdout).unwrap();
        assert_eq!(record["status"], "completed");
        assert_eq!(record["links"]["resumed"], 1);
        let events = keel.json_lines(["runs", "events", id, "--json"]);
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["seq"], i as u64 + 1);
        }
        assert_eq!(
            events
                .iter()
                .filter(|e| e["type"] == "runtime.request.resumed")
                .count(),
            1
        );
        assert_eq!(events.last().unwrap()["type"], "runtime.request.completed");
    }
}
