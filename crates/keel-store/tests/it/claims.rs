//! Exactly one winner, on both stores: of several processes claiming one interrupted run,
//! and of several deciding one approval.

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus, RequestId, RunStatus, StoreError};

use crate::backends::Backend;
use crate::record;

async fn one_of_several_claimers_takes_an_interrupted_run(backend: &Backend) {
    let store = backend.runs();
    store
        .create_run(&record("run_1", "a", RunStatus::Interrupted))
        .await
        .unwrap();
    let mut claimers = Vec::new();
    for _ in 0..6 {
        let other = backend.reopen().await;
        claimers.push(tokio::spawn(async move {
            other.claim(&RequestId::from("run_1")).await
        }));
    }
    let mut won = Vec::new();
    for claimer in claimers {
        match claimer.await.unwrap() {
            Ok(run) => won.push(run),
            Err(StoreError::Invalid(message)) => assert!(message.contains("running"), "{message}"),
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one claimer wins");
    assert_eq!(won[0].status, RunStatus::Running);
    assert_eq!(won[0].links.resumed, 1);
    let stored = store
        .get_run(&RequestId::from("run_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, won[0]);
    let missing = store.claim(&RequestId::from("run_9")).await.unwrap_err();
    assert!(matches!(missing, StoreError::NotFound(_)), "{missing}");
}

async fn one_of_several_deciders_decides_an_approval(backend: &Backend) {
    let store = backend.runs();
    store
        .create_run(&record("run_1", "a", RunStatus::WaitingApproval))
        .await
        .unwrap();
    let asked = ApprovalRecord::pending(
        &record("run_1", "a", RunStatus::WaitingApproval),
        "call_1",
        "shell".into(),
        serde_json::json!({"command": "ls"}),
        "policy",
        None,
    );
    store.create_approval(&asked).await.unwrap();
    let mut deciders = Vec::new();
    for n in 0..6 {
        let other = backend.reopen().await;
        let id = asked.approval_id.clone();
        deciders.push(tokio::spawn(async move {
            let status = match n % 2 {
                0 => ApprovalStatus::Approved,
                _ => ApprovalStatus::Denied,
            };
            other
                .decide_approval(&id, status, ApprovalScope::Once, &format!("op{n}"), None)
                .await
        }));
    }
    let mut won = Vec::new();
    for decider in deciders {
        match decider.await.unwrap() {
            Ok(decided) => won.push(decided),
            Err(StoreError::Invalid(message)) => {
                assert!(message.contains("was already"), "{message}");
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one decision");
    let stored = store
        .get_approval(&asked.approval_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, won[0]);
    assert_eq!(
        store
            .list_approvals(Some(ApprovalStatus::Pending))
            .await
            .unwrap()
            .len(),
        0
    );
}

crate::contract!(
    one_of_several_claimers_takes_an_interrupted_run,
    one_of_several_deciders_decides_an_approval,
);
