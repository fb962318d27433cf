//! Approvals are stored, survive restarts, and are decided exactly once even when two
//! processes decide at the same moment.

use std::process::Stdio;

use keel::{ApprovalRecord, ApprovalScope, ApprovalStatus, RequestId, RunRecord, RunStore};
use keel_store::SqliteStore;
use serde_json::{Value, json};

use crate::common::{keel, run, stderr, stdout};

async fn pending_approval(ws: &std::path::Path) -> String {
    let store = SqliteStore::open(ws).unwrap();
    let run = RunRecord::new(RequestId::generate(), None, "a", "deploy please");
    store.create_run(&run).await.unwrap();
    let approval = ApprovalRecord {
        approval_id: keel::types::new_id("apr"),
        request_id: run.request_id.clone(),
        session_id: None,
        agent: "a".into(),
        tool: "shell".into(),
        arguments: json!({ "command": "./deploy.sh" }),
        call_id: Some("call_1".into()),
        asked_by: "Policy/default rules[0]".into(),
        ask_reason: Some("deploys need a human".into()),
        status: ApprovalStatus::Pending,
        scope: ApprovalScope::Once,
        decided_by: None,
        decided_at: None,
        decision_reason: None,
        created_at: keel::types::now_rfc3339(),
    };
    store.create_approval(&approval).await.unwrap();
    approval.approval_id
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_deciding_at_once_decide_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let ws = dir.path().to_str().unwrap().to_owned();
    for _ in 0..5 {
        let id = pending_approval(dir.path()).await;
        // A fresh process sees it: approvals live in the store, not in a process.
        let listed = stdout(&run(&["approvals", "list", "-w", &ws, "--json"]));
        assert!(listed.contains(&id), "{listed}");

        let approve = keel()
            .args([
                "approvals",
                "approve",
                "-w",
                &ws,
                &id,
                "--reason",
                "looks fine",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deny = keel()
            .args(["approvals", "deny", "-w", &ws, &id, "--reason", "no"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (a, d) = tokio::task::block_in_place(|| {
            (
                approve.wait_with_output().unwrap(),
                deny.wait_with_output().unwrap(),
            )
        });
        let wins = [a.status.success(), d.status.success()];
        assert_eq!(
            wins.iter().filter(|w| **w).count(),
            1,
            "exactly one decision: {wins:?}"
        );
        let loser = if a.status.success() { &d } else { &a };
        assert!(stderr(loser).contains("was already"), "{}", stderr(loser));

        let shown: Value =
            serde_json::from_str(&stdout(&run(&["approvals", "show", "-w", &ws, &id]))).unwrap();
        let expected = if a.status.success() {
            "approved"
        } else {
            "denied"
        };
        assert_eq!(shown["status"], expected);
        assert!(shown["decidedBy"].as_str().unwrap().ends_with("cli"));
        assert!(shown["decidedAt"].is_string());
    }
    let pending = stdout(&run(&["approvals", "list", "-w", &ws, "--json"]));
    assert_eq!(pending.lines().count(), 0, "nothing is left pending");
    let all = stdout(&run(&[
        "approvals",
        "list",
        "-w",
        &ws,
        "--status",
        "all",
        "--json",
    ]));
    assert_eq!(all.lines().count(), 5);
}
