//! Runs through faults, seen from outside: a live SSE stream follows a run through its
//! interruption and resume to its final event; a cancelled run closes the approval it waited
//! on.

use std::time::Duration;

use keel_test_support::MockLlm;

use crate::common::keel_in;
use crate::governance::{deploy_then_answer, deploy_waiting_for_approval, signal, workspace};

/// Reads SSE frames from `response` until a frame of type `last` or the end of the stream;
/// returns the `(id, event)` pairs with an `id:` (stored events).
async fn frames_until(response: &mut reqwest::Response, last: &str) -> Vec<(u64, String)> {
    let mut frames: Vec<(u64, String)> = Vec::new();
    let mut buffer = String::new();
    while frames.last().is_none_or(|(_, event)| event != last) {
        let chunk = tokio::time::timeout(Duration::from_secs(120), response.chunk())
            .await
            .expect("the stream went silent for two minutes")
            .unwrap();
        let Some(chunk) = chunk else { break };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let id = frame
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .and_then(|v| v.trim().parse().ok());
            let event = frame.lines().find_map(|l| l.strip_prefix("event: "));
            if let (Some(id), Some(event)) = (id, event) {
                frames.push((id, event.to_owned()));
            }
        }
    }
    frames
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_stream_follows_a_run_through_its_interruption_to_its_final_event() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .runtime("{ limits: { approvalTimeout: 60s } }")
        .build();
    let keel = keel_in(&ws);
    let serving = keel.serve();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let events_url = |id: &str, after: u64| {
        format!(
            "http://{}/api/requests/{id}/events?after={after}",
            serving.addr()
        )
    };
    let follow = |url: String| {
        let http = http.clone();
        async move {
            http.get(url)
                .header("accept", "text/event-stream")
                .send()
                .await
                .unwrap()
        }
    };

    // A run executing in another process waits for approval; a stream follows it.
    let (mut first, asked) = deploy_waiting_for_approval(&keel).await;
    let id = asked[0]["requestId"].as_str().unwrap().to_owned();
    let mut live = follow(events_url(&id, 0)).await;
    let head = frames_until(&mut live, "runtime.approval.requested").await;
    assert_eq!(
        head.last().map(|(_, e)| e.as_str()),
        Some("runtime.approval.requested")
    );

    // Its process dies; the run is recorded `interrupted` (by the next process that opens the
    // store), and a second stream starts after the last stored event.
    signal(&first, "-KILL");
    tokio::task::block_in_place(|| first.wait().unwrap());
    let listed = keel.run(["runs", "list", "--json"]);
    assert!(
        listed.stdout.contains("\"interrupted\""),
        "{}",
        listed.stdout
    );
    let stored = keel.json_lines(["runs", "events", &id, "--json"]).len() as u64;
    let mut late = follow(events_url(&id, stored)).await;

    // Approved and resumed: both streams go on to the final event, past the interruption.
    let approval_id = asked[0]["approvalId"].as_str().unwrap();
    assert_eq!(
        keel.run(["approvals", "approve", approval_id]).code,
        Some(0)
    );
    let resumed = tokio::task::block_in_place(|| keel.run(["runs", "resume", &id]));
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    let log = keel.json_lines(["runs", "events", &id, "--json"]);
    assert_eq!(
        log.last().unwrap()["type"],
        "runtime.request.completed",
        "{log:?}"
    );
    let rest = frames_until(&mut live, "runtime.request.completed").await;
    let seen: Vec<u64> = head.iter().chain(&rest).map(|(seq, _)| *seq).collect();
    assert_eq!(
        seen,
        (1..=log.len() as u64).collect::<Vec<_>>(),
        "the first stream saw every event once, to the final one: {rest:?}"
    );
    let tail = frames_until(&mut late, "runtime.request.completed").await;
    let seen: Vec<u64> = tail.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seen,
        (stored + 1..=log.len() as u64).collect::<Vec<_>>(),
        "the stream opened while the run was interrupted waited for the rest: {tail:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_run_closes_the_approval_it_waited_on() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .runtime("{ limits: { approvalTimeout: 60s } }")
        .build();
    let keel = keel_in(&ws);
    let (mut child, asked) = deploy_waiting_for_approval(&keel).await;
    signal(&child, "-INT");
    let exit = tokio::task::block_in_place(|| child.wait().unwrap());
    assert_eq!(exit.code(), Some(130));
    assert_eq!(keel.newest_run()["status"], "cancelled");

    // Nothing is left pending, and the approval can no longer be approved.
    let pending = keel.json_lines(["approvals", "list", "--json"]);
    assert!(pending.is_empty(), "{pending:?}");
    let approval_id = asked[0]["approvalId"].as_str().unwrap();
    let late = keel.run(["approvals", "approve", approval_id]);
    assert_ne!(late.code, Some(0), "{}", late.stdout);
    let all = keel.json_lines(["approvals", "list", "--status", "all", "--json"]);
    assert_eq!(all.len(), 1, "{all:?}");
    let shown = &all[0];
    assert_eq!(shown["status"], "expired", "{shown}");
    assert_eq!(shown["decidedBy"], "runtime", "{shown}");
    assert!(!ws.exists("deployed.txt"));
}

#[test]
fn a_log_written_to_a_file_or_pipe_has_no_colour_codes() {
    let ws = keel_test_support::WorkspaceBuilder::new()
        .openai_model_at("mock", "http://127.0.0.1:9")
        .agent("a", "{ model: mock }")
        .build();
    // The first open of the store logs its migration (INFO) to stderr, here a pipe.
    let listed = keel_in(&ws).env("KEEL_LOG", "info").run(["runs", "list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(
        listed.stderr.contains("Store schema migrated."),
        "{}",
        listed.stderr
    );
    assert!(
        !listed.stderr.contains('\u{1b}'),
        "colour codes in a log that is not a terminal: {:?}",
        listed.stderr
    );
}
