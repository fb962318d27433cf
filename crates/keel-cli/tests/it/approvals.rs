//! Approvals are stored, survive restarts, and are decided exactly once even when two
//! processes decide at the same moment.

use keel_types::{ApprovalStore, RunLog};
use std::process::Stdio;

use keel::{RequestId, RunRecord};
use keel_store::SqliteStore;
use keel_test_support::{CliOutput, WorkspaceBuilder, fixtures};

use crate::common::keel_in;

async fn pending_approval(ws: &std::path::Path) -> String {
    let store = SqliteStore::open(ws).unwrap();
    let run = RunRecord::new(RequestId::generate(), None, "a", "deploy please");
    store.create_run(&run).await.unwrap();
    let approval = fixtures::approval(&run.request_id, "a");
    store.create_approval(&approval).await.unwrap();
    approval.approval_id
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_deciding_at_once_decide_exactly_once() {
    let ws = WorkspaceBuilder::new().build();
    let keel = keel_in(&ws);
    for _ in 0..5 {
        let id = pending_approval(ws.path()).await;
        // A fresh process sees it: approvals live in the store, not in a process.
        let listed = keel.run(["approvals", "list", "--json"]).stdout;
        assert!(listed.contains(&id), "{listed}");

        let approve = keel
            .command(["approvals", "approve", &id, "--reason", "looks fine"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deny = keel
            .command(["approvals", "deny", &id, "--reason", "no"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (a, d) = tokio::task::block_in_place(|| {
            (
                CliOutput::from_output(&approve.wait_with_output().unwrap()),
                CliOutput::from_output(&deny.wait_with_output().unwrap()),
            )
        });
        let wins = [a.success(), d.success()];
        assert_eq!(
            wins.iter().filter(|w| **w).count(),
            1,
            "exactly one decision: {wins:?}"
        );
        let loser = if a.success() { &d } else { &a };
        assert!(loser.stderr.contains("was already"), "{}", loser.stderr);

        let shown = keel.run(["approvals", "show", &id]).json();
        let expected = if a.success() { "approved" } else { "denied" };
        assert_eq!(shown["status"], expected);
        assert!(shown["decidedBy"].as_str().unwrap().ends_with("cli"));
        assert!(shown["decidedAt"].is_string());
    }
    let pending = keel.run(["approvals", "list", "--json"]).stdout;
    assert_eq!(pending.lines().count(), 0, "nothing is left pending");
    let all = keel
        .run(["approvals", "list", "--status", "all", "--json"])
        .stdout;
    assert_eq!(all.lines().count(), 5);
}
