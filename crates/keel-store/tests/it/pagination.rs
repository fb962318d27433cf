//! Run lists page with cursors and filter by owner; counts by status and by minute; the owner column is
//! added to stores made before it existed.

use keel_types::{RunLog, SessionStore};
use std::collections::HashSet;

use keel_store::{SCHEMA_VERSION, SqliteStore};
use keel_types::{RequestId, RunCursor, RunFilter, RunRecord, RunStatus};

use crate::backends::Backend;
use crate::record;

async fn paging_with_cursors_yields_each_run_once_in_order_even_with_equal_start_times(
    backend: &Backend,
) {
    let store = backend.runs();
    // 25 runs over 5 distinct start times: 5 runs share each time.
    for i in 0..25 {
        let mut run = record(&format!("run_{i:02}"), "a", RunStatus::Completed);
        run.started_at = format!("2026-11-22T12:00:0{}.000Z", i / 5);
        store.create_run(&run).await.unwrap();
    }
    let everything = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(everything.len(), 25);

    let mut paged: Vec<RunRecord> = Vec::new();
    let mut before = None;
    let mut pages = 0;
    loop {
        let page = store
            .list_runs(&RunFilter {
                before: before.clone(),
                limit: Some(10),
                ..Default::default()
            })
            .await
            .unwrap();
        pages += 1;
        let Some(last) = page.last() else { break };
        // The cursor travels as an opaque token.
        let token = RunCursor::of(last).encode();
        before = Some(RunCursor::decode(&token).unwrap());
        paged.extend(page);
    }
    assert_eq!(pages, 4, "10 + 10 + 5, then an empty page");
    assert_eq!(paged, everything, "every run once, in list order");
    let unique: HashSet<&RequestId> = paged.iter().map(|r| &r.request_id).collect();
    assert_eq!(unique.len(), 25);
}

async fn runs_filter_by_owner_and_page_within_the_filter(backend: &Backend) {
    let store = backend.runs();
    for i in 0..6 {
        let mut run = record(&format!("run_{i}"), "a", RunStatus::Completed);
        run.started_at = format!("2026-11-22T12:00:0{i}.000Z");
        run.owner = match i % 3 {
            0 => Some("alice".into()),
            1 => Some("bob".into()),
            _ => None,
        };
        store.create_run(&run).await.unwrap();
    }
    let alice = RunFilter {
        owner: Some("alice".into()),
        ..Default::default()
    };
    let runs = store.list_runs(&alice).await.unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids, ["run_3", "run_0"]);
    assert_eq!(runs[0].owner.as_deref(), Some("alice"));
    let next = store
        .list_runs(&RunFilter {
            before: Some(RunCursor::of(&runs[0])),
            ..alice
        })
        .await
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].request_id.as_str(), "run_0");
    // The owner survives an update of the record.
    let mut run = store
        .get_run(&RequestId::from("run_1"))
        .await
        .unwrap()
        .unwrap();
    run.status = RunStatus::Failed;
    store.update_run(&run).await.unwrap();
    let again = store.get_run(&run.request_id).await.unwrap().unwrap();
    assert_eq!(again.owner.as_deref(), Some("bob"));
}

async fn run_counts_group_runs_by_status(backend: &Backend) {
    let store = backend.runs();
    assert!(store.run_counts().await.unwrap().is_empty());
    for (i, status) in [
        RunStatus::Completed,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Interrupted,
        RunStatus::Completed,
    ]
    .into_iter()
    .enumerate()
    {
        store
            .create_run(&record(&format!("run_{i}"), "a", status))
            .await
            .unwrap();
    }
    let mut counts = store.run_counts().await.unwrap();
    counts.sort_by_key(|(status, _)| status.as_str());
    assert_eq!(
        counts,
        [
            (RunStatus::Completed, 3),
            (RunStatus::Failed, 1),
            (RunStatus::Interrupted, 1)
        ]
    );
}

async fn started_by_minute_counts_the_runs_of_each_minute_by_status(backend: &Backend) {
    let store = backend.runs();
    for (i, (at, status)) in [
        ("2026-11-22T11:59:59.999Z", RunStatus::Completed),
        ("2026-11-22T12:00:00.000Z", RunStatus::Completed),
        ("2026-11-22T12:00:30.500Z", RunStatus::Failed),
        ("2026-11-22T12:00:59.999Z", RunStatus::Completed),
        ("2026-11-22T12:03:00.000Z", RunStatus::Running),
    ]
    .into_iter()
    .enumerate()
    {
        let mut run = record(&format!("run_{i}"), "a", status);
        run.started_at = at.to_owned();
        store.create_run(&run).await.unwrap();
    }
    // The run before `since` is left out; each minute's runs are counted by status.
    let counts = store
        .started_by_minute("2026-11-22T12:00:00.000Z")
        .await
        .unwrap();
    assert_eq!(
        counts,
        [
            ("2026-11-22T12:00".to_owned(), RunStatus::Completed, 2),
            ("2026-11-22T12:00".to_owned(), RunStatus::Failed, 1),
            ("2026-11-22T12:03".to_owned(), RunStatus::Running, 1),
        ]
    );
    assert!(
        store
            .started_by_minute("2026-11-22T12:04:00.000Z")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_store_from_before_run_owners_gains_the_column_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let runs = dir.path().join("runs");
    // A version-3 database with one run, as an older Keel left it.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        for sql in [
            include_str!("../../migrations/0001_init.sql"),
            include_str!("../../migrations/0002_tasks.sql"),
            include_str!("../../migrations/0003_approvals.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 3).unwrap();
        conn.execute(
            r#"INSERT INTO runs (request_id, agent, status, input, usage, started_at)
               VALUES ('run_old', 'a', 'completed', 'hi',
               '{"promptTokens":0,"completionTokens":0,"totalTokens":0}',
               '2026-01-01T00:00:00.000Z')"#,
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO sessions (id, agent, created_at, updated_at) \
             VALUES ('ses_old', 'a', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
            [],
        )
        .unwrap();
    }
    let store = SqliteStore::open_at(&db, &runs).unwrap();
    let old = store
        .get_run(&RequestId::from("run_old"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.owner, None);
    let version: u32 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(
        SCHEMA_VERSION, 12,
        "0005 added skill candidates, 0006 memory, 0007 run trees and structured output, \
         0008 a partial session index, 0009 session owners, 0010 session summaries, \
         0011 run traces, 0012 eval results"
    );
    // A session from before owners were recorded has none (anyone may continue it).
    let old = store
        .get_session(&keel_types::SessionId::from("ses_old"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.owner, None);
    assert_eq!(old.summary, None, "nor a summary");
    // The partial index still serves lookups by session.
    let plan: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "EXPLAIN QUERY PLAN SELECT request_id FROM runs WHERE session_id = 'ses_x' \
             ORDER BY started_at DESC, request_id DESC",
            [],
            |row| row.get(3),
        )
        .unwrap();
    assert!(plan.contains("runs_by_session"), "{plan}");
}

crate::contract!(
    paging_with_cursors_yields_each_run_once_in_order_even_with_equal_start_times,
    runs_filter_by_owner_and_page_within_the_filter,
    run_counts_group_runs_by_status,
    started_by_minute_counts_the_runs_of_each_minute_by_status,
);
