//! Round trips on both stores (contract tests): run records, events, listing and filters,
//! sessions and transcripts, pruning, group commit; and reopening a SQLite store.

use keel_store::{MirrorStatus, SqliteStore};
use keel_types::RunLog;
use keel_types::{
    ErrorCode, ErrorInfo, FinishReason, Message, RequestId, RunFilter, RunLinks, RunRecord,
    RunStatus, SessionId, SessionOwner, StoreError, ToolCall, Usage,
};

use crate::backends::Backend;
use crate::{
    assert_mirror_matches, completed, delta, record, run_with_events, started, stored_seqs,
};

fn ids(runs: Vec<RunRecord>) -> Vec<String> {
    runs.into_iter().map(|r| r.request_id.0).collect()
}

fn at(id: &str, agent: &str, status: RunStatus, started_at: &str) -> RunRecord {
    let mut run = record(id, agent, status);
    run.started_at = started_at.into();
    run
}

async fn a_run_record_round_trips_with_every_field(backend: &Backend) {
    let store = backend.shared();
    let mut run = RunRecord::new(
        RequestId::from("run_full"),
        Some(SessionId::from("ses_1")),
        "writer",
        "write a poem",
    );
    store.create_run(&run).await.unwrap();
    assert_eq!(
        store.get_run(&run.request_id).await.unwrap(),
        Some(run.clone())
    );

    run.status = RunStatus::Failed;
    run.output = Some("half a poem".into());
    run.error = Some(ErrorInfo::new(ErrorCode::ModelUnavailable, "503 twice"));
    run.finish_reason = Some(FinishReason::ModelError);
    run.usage = Usage {
        prompt_tokens: 10,
        completion_tokens: 20,
        total_tokens: 30,
        ..Usage::default()
    };
    run.steps = 3;
    run.ended_at = Some("2026-11-22T12:00:09.000Z".into());
    run.event_count = 42;
    run.links = RunLinks {
        parent_id: Some(RequestId::from("run_parent")),
        retry_of: Some(RequestId::from("run_before")),
        replay_of: Some(RequestId::from("run_replayed")),
        forked_from: Some(RequestId::from("run_forked")),
        fork_seq: Some(7),
        resumed: 2,
        root_id: Some(RequestId::from("run_root")),
        parent_call: Some("call_7".into()),
    };
    run.value = Some(serde_json::json!({"severity": "high", "files": [1, 2]}));
    store.update_run(&run).await.unwrap();
    assert_eq!(
        store.get_run(&run.request_id).await.unwrap(),
        Some(run.clone())
    );

    // The columns a run usually keeps are replaced too (SQLite writes them apart).
    run.session_id = Some(SessionId::from("ses_2"));
    run.agent = "editor".into();
    run.owner = Some("ana".into());
    run.started_at = "2026-11-22T11:00:00.000Z".into();
    run.links.parent_id = None;
    store.update_run(&run).await.unwrap();
    assert_eq!(store.get_run(&run.request_id).await.unwrap(), Some(run));
    let by_session = store
        .list_runs(&RunFilter {
            session: Some(SessionId::from("ses_2")),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(by_session), ["run_full"]);
}

async fn a_run_starts_with_its_first_events_and_ends_with_its_record_in_one_write(
    backend: &Backend,
) {
    let store = backend.shared();
    let mut run = record("run_1", "a", RunStatus::Running);
    let before = backend.write_stats();
    store
        .create_run_with(&run, &[started("run_1", 1), delta("run_1", 2)])
        .await
        .unwrap();
    assert_eq!(
        store.get_run(&run.request_id).await.unwrap(),
        Some(run.clone())
    );
    assert_eq!(stored_seqs(store.as_ref(), "run_1").await, [1, 2]);

    // Events of another run, a taken id: refused, and nothing more is stored.
    let other = store
        .create_run_with(
            &record("run_2", "a", RunStatus::Running),
            &[started("run_1", 3)],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&other, StoreError::Invalid(m) if m.contains("run_2")),
        "{other}"
    );
    assert_eq!(
        store.get_run(&RequestId::from("run_2")).await.unwrap(),
        None
    );
    let taken = store
        .create_run_with(&run, &[started("run_1", 1)])
        .await
        .unwrap_err();
    assert!(matches!(taken, StoreError::Invalid(_)), "{taken}");
    assert_eq!(stored_seqs(store.as_ref(), "run_1").await, [1, 2]);

    // The end: a refused batch (a gap) leaves the record as it was.
    run.status = RunStatus::Completed;
    run.output = Some("done".into());
    run.event_count = 3;
    let gap = store
        .append_and_update(&[completed("run_1", 4)], &run)
        .await
        .unwrap_err();
    assert!(matches!(gap, StoreError::Invalid(_)), "{gap}");
    let stored = store.get_run(&run.request_id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Running);
    store
        .append_and_update(&[completed("run_1", 3)], &run)
        .await
        .unwrap();
    assert_eq!(store.get_run(&run.request_id).await.unwrap(), Some(run));
    assert_eq!(stored_seqs(store.as_ref(), "run_1").await, [1, 2, 3]);
    backend.assert_mirror("run_1").await;
    // The writer took one command for the start and one for the end, record included (the
    // refused writes commit nothing or are refused before the writer).
    let after = backend.write_stats();
    assert_eq!(after.events - before.events, 3);
    assert_eq!(after.commands - before.commands, 2, "{after:?}");
}

/// Both stores write a run's record and its first events in one transaction (PostgreSQL in
/// its writer's group commit): a start whose events are refused leaves no record behind.
async fn a_refused_start_leaves_no_record(backend: &Backend) {
    let store = backend.store();
    let run = record("run_1", "a", RunStatus::Running);
    let refused = store
        .create_run_with(&run, &[delta("run_1", 2)])
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::Invalid(m) if m.contains("expected 1")),
        "{refused}"
    );
    assert_eq!(store.get_run(&run.request_id).await.unwrap(), None);
    store
        .create_run_with(&run, &[started("run_1", 1)])
        .await
        .unwrap();
    assert_eq!(stored_seqs(store, "run_1").await, [1]);
    backend.assert_mirror("run_1").await;
}

async fn unknown_runs_are_not_found_and_duplicates_are_refused(backend: &Backend) {
    let store = backend.shared();
    let missing = RequestId::from("run_9");
    assert_eq!(store.get_run(&missing).await.unwrap(), None);
    assert!(matches!(
        store.events(&missing, 0).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .update_run(&record("run_9", "a", RunStatus::Completed))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.append(&[started("run_9", 1)]).await,
        Err(StoreError::NotFound(_))
    ));

    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    let again = store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap_err();
    assert!(
        matches!(&again, StoreError::Invalid(m) if m.contains("already exists")),
        "{again}"
    );
    if let Some(sqlite) = &backend.sqlite {
        assert!(matches!(
            sqlite.verify_mirror(&RequestId::from("run_9")),
            Err(StoreError::NotFound(_))
        ));
        assert!(sqlite.events_path(&RequestId::from("run_1")).exists());
    }
    // A run without events has an empty (not missing) log (and, on SQLite, an empty mirror).
    assert!(
        store
            .events(&RequestId::from("run_1"), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn events_round_trip_in_order_with_after_and_into_the_mirror(backend: &Backend) {
    let store = backend.shared();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    let sent = vec![started("run_1", 1), delta("run_1", 2), delta("run_1", 3)];
    store.append(&sent[..2]).await.unwrap();
    store.append(&sent[2..]).await.unwrap();
    store.append(&[]).await.unwrap();

    let id = RequestId::from("run_1");
    assert_eq!(store.events(&id, 0).await.unwrap(), sent);
    assert_eq!(store.events(&id, 2).await.unwrap(), sent[2..]);
    assert!(store.events(&id, 3).await.unwrap().is_empty());
    backend.assert_mirror("run_1").await;
    if let Some(sqlite) = &backend.sqlite {
        assert_eq!(
            sqlite.verify_mirror(&id).unwrap(),
            MirrorStatus::InSync { events: 3 }
        );
    }
}

#[tokio::test]
async fn a_reopened_store_continues_each_log_where_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_1", 3).await;
    }
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    let stale = store.append(&[delta("run_1", 3)]).await.unwrap_err();
    assert!(
        matches!(&stale, StoreError::Invalid(m) if m.contains("expected 4")),
        "{stale}"
    );
    store.append(&[delta("run_1", 4)]).await.unwrap();
    store.append(&[completed("run_1", 5)]).await.unwrap();
    assert_eq!(stored_seqs(&store, "run_1").await, vec![1, 2, 3, 4, 5]);
    assert_mirror_matches(&store, "run_1").await;
    assert!(dir.path().join(".keel/keel.db").exists());
}

async fn runs_are_listed_newest_first_with_every_filter(backend: &Backend) {
    let store = backend.shared();
    let mut in_session = at(
        "run_4",
        "b",
        RunStatus::Completed,
        "2026-11-22T12:00:04.000Z",
    );
    in_session.session_id = Some(SessionId::from("ses_1"));
    for run in [
        at(
            "run_1",
            "a",
            RunStatus::Completed,
            "2026-11-22T12:00:01.000Z",
        ),
        at("run_2", "b", RunStatus::Failed, "2026-11-22T12:00:02.000Z"),
        at("run_3", "a", RunStatus::Failed, "2026-11-22T12:00:03.000Z"),
        in_session,
        // Same start as run_4: the id breaks the tie, newest (largest) first.
        at("run_5", "a", RunStatus::Running, "2026-11-22T12:00:04.000Z"),
    ] {
        store.create_run(&run).await.unwrap();
    }

    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { ids(store.list_runs(&filter).await.unwrap()) }
    };
    assert_eq!(
        list(RunFilter::default()).await,
        ["run_5", "run_4", "run_3", "run_2", "run_1"]
    );
    assert_eq!(
        list(RunFilter {
            status: Some(RunStatus::Failed),
            agent: Some("a".into()),
            ..Default::default()
        })
        .await,
        ["run_3"]
    );
    assert_eq!(
        list(RunFilter {
            session: Some(SessionId::from("ses_1")),
            ..Default::default()
        })
        .await,
        ["run_4"]
    );
    assert_eq!(
        list(RunFilter {
            since: Some("2026-11-22T12:00:03.000Z".into()),
            ..Default::default()
        })
        .await,
        ["run_5", "run_4", "run_3"]
    );
    assert_eq!(
        list(RunFilter {
            agent: Some("a".into()),
            limit: Some(2),
            ..Default::default()
        })
        .await,
        ["run_5", "run_3"]
    );
    assert!(
        list(RunFilter {
            agent: Some("nobody".into()),
            ..Default::default()
        })
        .await
        .is_empty()
    );
}

async fn sessions_keep_their_transcript_in_order_and_count_runs_and_messages(backend: &Backend) {
    let store = backend.shared();
    let ses = SessionId::from("ses_1");
    let first = store
        .ensure_session(&ses, "writer", &SessionOwner::default())
        .await
        .unwrap();
    assert_eq!(
        (first.agent.as_str(), first.run_count, first.message_count),
        ("writer", 0, 0)
    );
    // Ensuring again returns the same session; the agent of the first request stays.
    let again = store
        .ensure_session(&ses, "other", &SessionOwner::default())
        .await
        .unwrap();
    assert_eq!(again.agent, "writer");
    assert_eq!(again.created_at, first.created_at);

    let mut run = record("run_1", "writer", RunStatus::Running);
    run.session_id = Some(ses.clone());
    store.create_run(&run).await.unwrap();
    let turn_one = vec![
        Message::user("hello"),
        Message::assistant(
            "",
            vec![ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }],
        ),
        Message::tool_result("call_1", "contents"),
        Message::assistant("hi!", vec![]),
    ];
    store
        .append_session_messages(&ses, &run.request_id, &turn_one)
        .await
        .unwrap();
    store
        .append_session_messages(&ses, &RequestId::from("run_2"), &[Message::user("again")])
        .await
        .unwrap();

    let transcript = store.session_messages(&ses).await.unwrap();
    assert_eq!(
        transcript.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        transcript
            .iter()
            .map(|m| m.message.clone())
            .collect::<Vec<_>>()[..4],
        turn_one[..]
    );
    assert_eq!(transcript[4].request_id, RequestId::from("run_2"));

    let got = store.get_session(&ses).await.unwrap().unwrap();
    assert_eq!((got.run_count, got.message_count), (1, 5));
    assert!(got.updated_at >= first.updated_at);

    // Appending to a session that does not exist is refused and writes nothing.
    let unknown = SessionId::from("ses_unknown");
    assert!(matches!(
        store
            .append_session_messages(&unknown, &run.request_id, &[Message::user("x")])
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert!(store.session_messages(&unknown).await.unwrap().is_empty());
    assert_eq!(store.get_session(&unknown).await.unwrap(), None);
}

/// Creates sessions `ids` in that order, a few milliseconds apart (distinct timestamps).
async fn sessions_one_after_another(backend: &Backend, ids: &[&str]) {
    for id in ids {
        backend
            .shared()
            .ensure_session(&SessionId::from(*id), "a", &SessionOwner::default())
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
}

/// The sessions' ids, most recently updated first.
async fn listed_sessions(backend: &Backend) -> Vec<String> {
    let sessions = backend.shared().list_sessions(None).await.unwrap();
    sessions.into_iter().map(|s| s.session_id.0).collect()
}

/// A new run is activity in its session: started with its first events (one write), the
/// session it is a turn of becomes the most recently updated.
async fn a_run_started_with_its_events_touches_its_session(backend: &Backend) {
    let store = backend.shared();
    sessions_one_after_another(backend, &["ses_a", "ses_b"]).await;
    let mut run = record("run_1", "a", RunStatus::Running);
    run.session_id = Some(SessionId::from("ses_a"));
    store
        .create_run_with(&run, &[started("run_1", 1)])
        .await
        .unwrap();
    assert_eq!(listed_sessions(backend).await, ["ses_a", "ses_b"]);
    let session = store
        .get_session(&SessionId::from("ses_a"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.run_count, 1);
}

async fn sessions_are_listed_by_last_update_and_deleted_with_their_transcript_only(
    backend: &Backend,
) {
    let store = backend.shared();
    sessions_one_after_another(backend, &["ses_a", "ses_b", "ses_c"]).await;
    // Touch the oldest: it becomes the most recent.
    store
        .append_session_messages(
            &SessionId::from("ses_a"),
            &RequestId::from("run_1"),
            &[Message::user("hi")],
        )
        .await
        .unwrap();
    assert_eq!(listed_sessions(backend).await, ["ses_a", "ses_c", "ses_b"]);
    assert_eq!(store.list_sessions(Some(1)).await.unwrap().len(), 1);

    let mut run = record("run_1", "a", RunStatus::Completed);
    run.session_id = Some(SessionId::from("ses_a"));
    store.create_run(&run).await.unwrap();

    assert!(
        store
            .delete_session(&SessionId::from("ses_a"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_session(&SessionId::from("ses_a"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_session(&SessionId::from("ses_a")).await.unwrap(),
        None
    );
    assert!(
        store
            .session_messages(&SessionId::from("ses_a"))
            .await
            .unwrap()
            .is_empty()
    );
    // The run stays, as a record still naming its session.
    let kept = store.get_run(&run.request_id).await.unwrap().unwrap();
    assert_eq!(kept.session_id, Some(SessionId::from("ses_a")));
    // A session created again starts a fresh transcript.
    store
        .ensure_session(&SessionId::from("ses_a"), "a", &SessionOwner::default())
        .await
        .unwrap();
    store
        .append_session_messages(
            &SessionId::from("ses_a"),
            &RequestId::from("run_2"),
            &[Message::user("new")],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .session_messages(&SessionId::from("ses_a"))
            .await
            .unwrap()[0]
            .seq,
        1
    );
}

async fn prune_deletes_old_ended_runs_with_events_and_mirrors_but_keeps_resumable_ones(
    backend: &Backend,
) {
    let store = backend.shared();
    let old = "2026-01-01T00:00:00.000Z";
    let new = "2026-12-01T00:00:00.000Z";
    for (id, status, started_at) in [
        ("run_done", RunStatus::Completed, old),
        ("run_failed", RunStatus::Failed, old),
        ("run_cancelled", RunStatus::Cancelled, old),
        ("run_interrupted", RunStatus::Interrupted, old),
        ("run_running", RunStatus::Running, old),
        ("run_recent", RunStatus::Completed, new),
    ] {
        store
            .create_run(&at(id, "a", status, started_at))
            .await
            .unwrap();
        store
            .append(&[started(id, 1), completed(id, 2)])
            .await
            .unwrap();
    }
    let mirror = |id: &str| {
        backend
            .sqlite
            .as_ref()
            .map(|s| s.run_dir(&RequestId::from(id)))
    };
    let done_dir = mirror("run_done");
    if let Some(dir) = &done_dir {
        assert!(dir.join("events.jsonl").exists());
    }

    assert_eq!(store.prune("2026-06-01T00:00:00.000Z").await.unwrap(), 3);
    let left = ids(store.list_runs(&RunFilter::default()).await.unwrap());
    assert_eq!(left, ["run_recent", "run_running", "run_interrupted"]);
    assert!(done_dir.is_none_or(|dir| !dir.exists()));
    assert!(matches!(
        store.events(&RequestId::from("run_done"), 0).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(stored_seqs(store.as_ref(), "run_interrupted").await, [1, 2]);
    assert!(mirror("run_recent").is_none_or(|dir| dir.exists()));
    assert_eq!(store.prune("2026-06-01T00:00:00.000Z").await.unwrap(), 0);
}

async fn group_commit_shares_transactions_between_concurrent_writers(backend: &Backend) {
    let store = backend.shared();
    let mut tasks = Vec::new();
    for n in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            run_with_events(store.as_ref(), &format!("run_{n}"), 50).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stats = backend.write_stats();
    assert_eq!(stats.events, 16 * 50);
    // SQLite's writer also commits the 16 `create_run`s; PostgreSQL's only appends.
    let creates = if backend.sqlite.is_some() { 16 } else { 0 };
    assert_eq!(stats.commands, 16 * 50 + creates);
    // Not a timing assertion: with 16 writers waiting, batches must have formed at all.
    assert!(stats.commits < stats.commands, "{stats:?}");
}

crate::contract!(
    a_run_record_round_trips_with_every_field,
    a_run_starts_with_its_first_events_and_ends_with_its_record_in_one_write,
    a_refused_start_leaves_no_record,
    a_run_started_with_its_events_touches_its_session,
    unknown_runs_are_not_found_and_duplicates_are_refused,
    events_round_trip_in_order_with_after_and_into_the_mirror,
    runs_are_listed_newest_first_with_every_filter,
    sessions_keep_their_transcript_in_order_and_count_runs_and_messages,
    sessions_are_listed_by_last_update_and_deleted_with_their_transcript_only,
    prune_deletes_old_ended_runs_with_events_and_mirrors_but_keeps_resumable_ones,
    group_commit_shares_transactions_between_concurrent_writers,
);

/// An append fails alone when it is refused (checked before anything is written); a failure
/// after its first write (here a trigger standing in for an I/O error) rolls the whole batch
/// back, so none of its events is stored, and the store goes on.
#[tokio::test]
async fn an_append_that_breaks_part_way_stores_none_of_its_events() {
    let backend = Backend::sqlite();
    let sqlite = backend.sqlite.as_ref().unwrap();
    let store = backend.store();
    run_with_events(store, "run_1", 1).await;
    crate::raw_db(sqlite.db_path())
        .execute_batch(
            "CREATE TRIGGER refuse_completed BEFORE INSERT ON events \
             WHEN NEW.type = 'runtime.request.completed' \
             BEGIN SELECT RAISE(ABORT, 'no room left'); END;",
        )
        .unwrap();
    let broken = store
        .append(&[delta("run_1", 2), completed("run_1", 3)])
        .await
        .unwrap_err();
    assert!(
        matches!(&broken, StoreError::Io { message, .. } if message.contains("rolled back") && message.contains("no room left")),
        "{broken}"
    );
    assert_eq!(stored_seqs(store, "run_1").await, [1]);
    crate::raw_db(sqlite.db_path())
        .execute_batch("DROP TRIGGER refuse_completed")
        .unwrap();
    store
        .append(&[delta("run_1", 2), completed("run_1", 3)])
        .await
        .unwrap();
    assert_eq!(stored_seqs(store, "run_1").await, [1, 2, 3]);
    backend.assert_mirror("run_1").await;
}
