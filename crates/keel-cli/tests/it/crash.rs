//! Crash recovery end to end: 20 `keel run` processes against a slow model are killed with
//! SIGKILL mid-flight; afterwards every run is `completed` or `interrupted`, every log is
//! dense with no torn or duplicated record (store and JSONL mirror agree), and
//! `keel runs resume` completes each interrupted run. It also has 20 processes writing to one
//! store at the same time. And a power cut, as far as a process can have one: `keel serve`
//! killed with SIGKILL in the middle of a burst of requests loses no run it acknowledged.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// Requests in flight at once in the burst, and how many completions it waits for before the
/// kill.
const BURST_CONCURRENCY: usize = 24;
const ACKED_BEFORE_KILL: usize = 40;

#[tokio::test(flavor = "multi_thread")]
async fn every_run_acknowledged_before_a_sigkill_is_in_the_store_after_restart() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| match request.last_role() {
        Some("user") => {
            MockResponse::tool_calls([MockToolCall::new("c1", "list_dir", [r#"{"path":"."}"#])])
        }
        _ => MockResponse::text(["All ", "listed."]).chunk_delay(Duration::from_millis(5)),
    });
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);
    let mut serving = keel.serve();
    let url = format!("http://{}/api/requests", serving.addr());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();

    // Each client sends requests one after another: every other one waits for the run's end
    // (200: acknowledged as completed), the others are answered at once (202: acknowledged
    // as stored). What each acknowledgement named goes to `acked`.
    let (acked_tx, mut acked) = tokio::sync::mpsc::unbounded_channel::<(String, bool)>();
    let completed = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..BURST_CONCURRENCY)
        .map(|_| {
            let (http, url, acked_tx) = (http.clone(), url.clone(), acked_tx.clone());
            let (completed, next) = (completed.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let wait = n % 2 == 0;
                    let body = serde_json::json!({ "input": format!("burst {n}"), "wait": wait });
                    // Once the server is gone, requests fail: the burst is over.
                    let Ok(response) = http.post(&url).json(&body).send().await else {
                        return;
                    };
                    let status = response.status().as_u16();
                    let Ok(answer) = response.json::<Value>().await else {
                        return;
                    };
                    let id = answer["requestId"].as_str().unwrap_or_default().to_owned();
                    match (wait, status) {
                        (true, 200) => {
                            assert_eq!(answer["status"], "completed", "{answer}");
                            completed.fetch_add(1, Ordering::Relaxed);
                            let _ = acked_tx.send((id, true));
                        }
                        (false, 202) => {
                            let _ = acked_tx.send((id, false));
                        }
                        _ => panic!("request {n}: {status} {answer}"),
                    }
                }
            })
        })
        .collect();
    drop(acked_tx);

    // The kill lands once enough runs were acknowledged, with the rest of the burst in flight.
    let mut acknowledged: Vec<(String, bool)> = Vec::new();
    while completed.load(Ordering::Relaxed) < ACKED_BEFORE_KILL {
        let ack = tokio::time::timeout(Duration::from_secs(120), acked.recv())
            .await
            .expect("the burst stalled")
            .expect("the clients stopped before the kill");
        acknowledged.push(ack);
    }
    serving.child().kill().unwrap();
    tokio::task::block_in_place(|| serving.child().wait()).unwrap();
    for client in clients {
        client.await.unwrap();
    }
    // Acknowledgements that were on their way when the server died count too.
    while let Some(ack) = acked.recv().await {
        acknowledged.push(ack);
    }

    // A new process opens the store (recovering the dead server's runs) and has every run it
    // acknowledged: a completed one whole, a stored one as completed or interrupted.
    let listed = keel.run(["runs", "list", "--json", "--limit", "100000"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let statuses: std::collections::HashMap<String, String> = listed
        .json_lines()
        .iter()
        .map(|r| {
            let id = r["requestId"].as_str().unwrap().to_owned();
            (id, r["status"].as_str().unwrap().to_owned())
        })
        .collect();
    for (id, waited) in &acknowledged {
        let status = statuses
            .get(id)
            .unwrap_or_else(|| panic!("run {id} was acknowledged but is not in the store"));
        if *waited {
            assert_eq!(status, "completed", "run {id}");
            let events = keel.json_lines(["runs", "events", id, "--json"]);
            for (i, event) in events.iter().enumerate() {
                assert_eq!(event["seq"], i as u64 + 1, "run {id}: seq must be dense");
            }
            let last = events.last().unwrap();
            assert_eq!(last["type"], "runtime.request.completed", "run {id}");
            assert_eq!(last["output"], "All listed.", "run {id}");
        } else {
            // Completed, or caught mid-flight by the kill (which one is timing's choice).
            assert!(
                status == "completed" || status == "interrupted",
                "run {id} is {status}"
            );
        }
    }
    assert!(
        acknowledged.iter().filter(|(_, waited)| *waited).count() >= ACKED_BEFORE_KILL,
        "{acknowledged:?}"
    );
}
