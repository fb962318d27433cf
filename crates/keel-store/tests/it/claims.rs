//! Exactly one winner, on both stores: of several processes claiming one interrupted run,
//! and of several deciding one approval.

use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, ErrorCode, ErrorInfo, FinishReason, RequestId,
    RunStatus, StoreError,
};

use crate::backends::Backend;
use crate::{delta, record, started, stored_seqs};

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

async fn a_run_is_claimed_exactly_once_when_claimers_race(backend: &Backend) {
    // Two handles on the same data, as two processes would have.
    let first = backend.shared();
    let second = backend.reopen().await;
    for round in 0..10 {
        let id = format!("run_{round}");
        // An interrupted run as a crashed attempt left it: with its partial outcome.
        let mut run = record(&id, "a", RunStatus::Interrupted);
        run.output = Some("half an answer".into());
        run.error = Some(ErrorInfo::new(ErrorCode::ModelUnavailable, "503"));
        run.finish_reason = Some(FinishReason::ModelError);
        run.ended_at = Some("2026-11-22T12:00:09.000Z".into());
        first.create_run(&run).await.unwrap();
        first.append(&[started(&id, 1)]).await.unwrap();
        let claims: Vec<_> = (0..4)
            .map(|n| {
                let store = if n % 2 == 0 {
                    first.clone()
                } else {
                    second.clone()
                };
                let id = RequestId::from(id.as_str());
                tokio::spawn(async move { (store.claim(&id).await, store) })
            })
            .collect();
        let mut winners = Vec::new();
        for claim in claims {
            match claim.await.unwrap() {
                (Ok(run), store) => {
                    assert_eq!((run.status, run.links.resumed), (RunStatus::Running, 1));
                    assert_eq!(
                        (&run.output, &run.error, run.finish_reason, &run.ended_at),
                        (&None, &None, None, &None),
                        "the resumed run starts without the old outcome"
                    );
                    winners.push(store);
                }
                (Err(StoreError::Invalid(message)), _) => {
                    assert!(message.contains("is running"), "{message}");
                }
                (Err(other), _) => panic!("unexpected error: {other}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}");
        // The winner continues the log.
        winners[0].append(&[delta(&id, 2)]).await.unwrap();
        assert_eq!(
            stored_seqs(first.as_ref(), &id).await,
            [1, 2],
            "round {round}"
        );
    }
    assert!(matches!(
        first.claim(&RequestId::from("run_missing")).await,
        Err(StoreError::NotFound(_))
    ));
    first
        .create_run(&record("run_done", "a", RunStatus::Completed))
        .await
        .unwrap();
    let not_interrupted = first.claim(&RequestId::from("run_done")).await.unwrap_err();
    assert!(
        matches!(&not_interrupted, StoreError::Invalid(m) if m.contains("completed")),
        "{not_interrupted}"
    );
}

crate::contract!(
    one_of_several_claimers_takes_an_interrupted_run,
    a_run_is_claimed_exactly_once_when_claimers_race,
    one_of_several_deciders_decides_an_approval,
);
