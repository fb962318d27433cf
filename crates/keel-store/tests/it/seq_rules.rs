//! The append contract of both stores: dense `seq` continuing the stored log, nothing
//! derived, refused batches write nothing — and a refused batch does not hurt the other
//! commands committed in the same group.

use keel_types::{EventPayload, RequestId, RunStatus, StoreError};

use crate::backends::Backend;
use crate::{delta, event, record, run_with_events, started, stored_seqs};

async fn gaps_duplicates_and_derived_events_are_refused_and_nothing_is_written(backend: &Backend) {
    let store = backend.shared();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    let not_first = store.append(&[started("run_1", 2)]).await.unwrap_err();
    assert!(
        matches!(&not_first, StoreError::Invalid(m) if m.contains("expected 1")),
        "{not_first}"
    );
    store.append(&[started("run_1", 1)]).await.unwrap();

    let gap = store.append(&[delta("run_1", 3)]).await.unwrap_err();
    assert!(
        matches!(&gap, StoreError::Invalid(m) if m.contains("expected 2")),
        "{gap}"
    );
    let duplicate = store.append(&[delta("run_1", 1)]).await.unwrap_err();
    assert!(matches!(duplicate, StoreError::Invalid(_)), "{duplicate}");
    let narration = event(
        "run_1",
        2,
        EventPayload::Narration {
            text: "thinking".into(),
            provider: "template".into(),
            source_event_types: vec![],
            source_event_ids: vec![],
            style: "concise".into(),
        },
    );
    let derived = store.append(&[narration]).await.unwrap_err();
    assert!(
        matches!(&derived, StoreError::Invalid(m) if m.contains("derived")),
        "{derived}"
    );
    // A batch with a gap in the middle, or mixing runs, writes none of it.
    assert!(
        store
            .append(&[delta("run_1", 2), delta("run_1", 4)])
            .await
            .is_err()
    );
    assert!(
        store
            .append(&[delta("run_1", 2), delta("run_other", 3)])
            .await
            .is_err()
    );

    assert_eq!(stored_seqs(store.as_ref(), "run_1").await, [1]);
    backend.assert_mirror("run_1").await;
    store
        .append(&[delta("run_1", 2), delta("run_1", 3)])
        .await
        .unwrap();
    assert_eq!(stored_seqs(store.as_ref(), "run_1").await, [1, 2, 3]);
    backend.assert_mirror("run_1").await;
}

async fn a_refused_batch_in_a_shared_commit_does_not_affect_the_others(backend: &Backend) {
    const RUNS: usize = 32;
    const EVENTS: u64 = 60;
    let store = backend.shared();
    store
        .create_run(&record("run_bad", "a", RunStatus::Running))
        .await
        .unwrap();
    store.append(&[started("run_bad", 1)]).await.unwrap();

    let mut tasks = Vec::new();
    for n in 0..RUNS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            run_with_events(store.as_ref(), &format!("run_{n:02}"), EVENTS).await;
        }));
    }
    // Meanwhile, one task keeps sending bad batches: gaps, duplicates, a mixed batch.
    let bad = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut refused = 0;
            for i in 0..200u64 {
                let batch = match i % 3 {
                    0 => vec![delta("run_bad", 5)],
                    1 => vec![delta("run_bad", 1)],
                    _ => vec![delta("run_bad", 2), delta("run_bad", 4)],
                };
                if let Err(StoreError::Invalid(_)) = store.append(&batch).await {
                    refused += 1;
                }
                tokio::task::yield_now().await;
            }
            refused
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(bad.await.unwrap(), 200, "every bad batch is refused");

    let stats = backend.write_stats();
    assert!(stats.commits < stats.commands, "batches formed: {stats:?}");
    for n in 0..RUNS {
        let id = format!("run_{n:02}");
        assert_eq!(
            stored_seqs(store.as_ref(), &id).await,
            (1..=EVENTS).collect::<Vec<_>>(),
            "{id}"
        );
        backend.assert_mirror(&id).await;
    }
    assert_eq!(stored_seqs(store.as_ref(), "run_bad").await, [1]);
    backend.assert_mirror("run_bad").await;
    assert_eq!(
        store
            .events(&RequestId::from("run_bad"), 0)
            .await
            .unwrap()
            .len(),
        1
    );
}

crate::contract!(
    gaps_duplicates_and_derived_events_are_refused_and_nothing_is_written,
    a_refused_batch_in_a_shared_commit_does_not_affect_the_others,
);
