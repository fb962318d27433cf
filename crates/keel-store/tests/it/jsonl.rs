//! The JSONL run store on real files: ordering rules, torn and corrupt logs, listing.

use std::io::Write;

use keel_store::JsonlStore;
use keel_types::{EventPayload, RequestId, RunFilter, RunRecord, RunStatus, RunStore, StoreError};

use crate::{event, record, started};

#[tokio::test]
async fn events_round_trip_in_order_and_after_filters() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    store
        .append(&[started("run_1", 1), started("run_1", 2)])
        .await
        .unwrap();
    store.append(&[started("run_1", 3)]).await.unwrap();

    let all = store.events(&RequestId::from("run_1"), 0).await.unwrap();
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    let after = store.events(&RequestId::from("run_1"), 2).await.unwrap();
    assert_eq!(after.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3]);
}

#[tokio::test]
async fn gaps_duplicates_and_derived_events_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    store.append(&[started("run_1", 1)]).await.unwrap();

    let gap = store.append(&[started("run_1", 3)]).await.unwrap_err();
    assert!(
        matches!(gap, StoreError::Invalid(ref m) if m.contains("expected 2")),
        "{gap}"
    );
    let duplicate = store.append(&[started("run_1", 1)]).await.unwrap_err();
    assert!(matches!(duplicate, StoreError::Invalid(_)));
    let narration = event(
        "run_1",
        2,
        EventPayload::Narration {
            text: "x".into(),
            source_event_ids: vec![],
        },
    );
    assert!(store.append(&[narration]).await.is_err());
    // A batch with a bad event in the middle writes none of it.
    let mixed = store
        .append(&[started("run_1", 2), started("run_1", 4)])
        .await;
    assert!(mixed.is_err());

    let events = store.events(&RequestId::from("run_1"), 0).await.unwrap();
    assert_eq!(events.len(), 1);
    store.append(&[started("run_1", 2)]).await.unwrap();
}

#[tokio::test]
async fn a_torn_last_line_is_skipped_on_read_and_cut_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    store
        .append(&[started("run_1", 1), started("run_1", 2)])
        .await
        .unwrap();
    let path = store.events_path(&RequestId::from("run_1"));
    // A crash mid-write leaves half a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(br#"{"id":"evt_x","seq":3,"ts":"#)
        .unwrap();

    // A fresh store (a restarted process) reads the two whole events.
    let reopened = JsonlStore::open(dir.path()).unwrap();
    let events = reopened.events(&RequestId::from("run_1"), 0).await.unwrap();
    assert_eq!(events.len(), 2);

    // Appending continues at seq 3 on a clean line.
    reopened.append(&[started("run_1", 3)]).await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(!text.contains(r#""ts":{"#));
    let events = reopened.events(&RequestId::from("run_1"), 0).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[tokio::test]
async fn a_corrupt_line_in_the_middle_is_reported_with_its_line_and_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    store.append(&[started("run_1", 1)]).await.unwrap();
    let path = store.events_path(&RequestId::from("run_1"));
    let good = std::fs::read_to_string(&path).unwrap();
    let damaged = format!("{good}not json at all\n{good}");
    std::fs::write(&path, &damaged).unwrap();

    let reopened = JsonlStore::open(dir.path()).unwrap();
    let error = reopened
        .events(&RequestId::from("run_1"), 0)
        .await
        .unwrap_err();
    match &error {
        StoreError::Corrupt { location, .. } => {
            assert!(location.ends_with("events.jsonl:2"), "{location}")
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(reopened.append(&[started("run_1", 2)]).await.is_err());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "nothing is overwritten"
    );
}

#[tokio::test]
async fn runs_are_listed_newest_first_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Completed))
        .await
        .unwrap();
    store
        .create_run(&record("run_2", "b", RunStatus::Failed))
        .await
        .unwrap();
    store
        .create_run(&record("run_3", "a", RunStatus::Failed))
        .await
        .unwrap();

    let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.request_id.0).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list_runs(&RunFilter::default()).await.unwrap()),
        vec!["run_3", "run_2", "run_1"]
    );
    let failed_a = RunFilter {
        status: Some(RunStatus::Failed),
        agent: Some("a".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(store.list_runs(&failed_a).await.unwrap()),
        vec!["run_3"]
    );
    let limited = RunFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(ids(store.list_runs(&limited).await.unwrap()).len(), 2);

    let mut updated = record("run_1", "a", RunStatus::Completed);
    updated.output = Some("done".into());
    store.update_run(&updated).await.unwrap();
    let got = store
        .get_run(&RequestId::from("run_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.output.as_deref(), Some("done"));
    assert!(
        store
            .get_run(&RequestId::from("run_9"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        store.events(&RequestId::from("run_9"), 0).await,
        Err(StoreError::NotFound(_))
    ));
}
