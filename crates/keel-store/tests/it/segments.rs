//! The default mirror: committed events in shared, append-only segment files
//! (`.keel/log/*.jsonl`), no file per run, repaired from the store when a crash left it behind
//! or torn.

use keel_types::RunLog;
use std::path::{Path, PathBuf};

use keel_store::{LOG_DIR, MirrorStatus, SqliteStore};
use keel_types::{Event, RequestId, RunStatus};

use crate::{completed, delta, record, started};

fn log_dir(root: &Path) -> PathBuf {
    root.join(".keel").join(LOG_DIR)
}

/// Every line of every segment, oldest first, parsed.
fn logged(root: &Path) -> Vec<Event> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(log_dir(root))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    segments.sort();
    segments
        .iter()
        .flat_map(|p| keel_store::read_events_file(p).unwrap())
        .collect()
}

/// Two interleaved runs, committed in this order.
async fn two_runs(store: &SqliteStore) -> Vec<Event> {
    let mut sent = Vec::new();
    for id in ["run_a", "run_b"] {
        store
            .create_run(&record(id, "a", RunStatus::Running))
            .await
            .unwrap();
    }
    for (id, seq) in [
        ("run_a", 1),
        ("run_b", 1),
        ("run_a", 2),
        ("run_b", 2),
        ("run_a", 3),
    ] {
        let event = if seq == 1 {
            started(id, seq)
        } else {
            delta(id, seq)
        };
        store.append(std::slice::from_ref(&event)).await.unwrap();
        sent.push(event);
    }
    let done = completed("run_b", 3);
    store.append(std::slice::from_ref(&done)).await.unwrap();
    sent.push(done);
    sent
}

#[tokio::test]
async fn every_committed_event_is_logged_in_commit_order_without_a_file_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let sent = two_runs(&store).await;
    assert_eq!(logged(dir.path()), sent);
    assert!(!dir.path().join(".keel/runs").exists(), "no folder per run");
    let id = RequestId::from("run_a");
    assert_eq!(store.log_path(&id), None, "no file of its own for hooks");
    assert_eq!(store.verify_mirror(&id).unwrap(), MirrorStatus::Shared);
    assert_eq!(store.log_dir(), Some(log_dir(dir.path()).as_path()));
}

#[tokio::test]
async fn a_log_left_behind_or_torn_by_a_crash_is_repaired_from_the_store_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let sent = two_runs(&store).await;
    drop(store);
    // A crash after the last two commits, in the middle of writing their lines.
    let segment = log_dir(dir.path()).join("00000001.jsonl");
    let text = std::fs::read_to_string(&segment).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[..lines.len() - 2].join("\n") + "\n";
    std::fs::write(&segment, format!("{kept}{}", &lines[lines.len() - 2][..20])).unwrap();

    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        logged(dir.path()),
        sent,
        "the missing lines are back, once, in order"
    );
    let text = std::fs::read_to_string(&segment).unwrap();
    assert!(text.ends_with('\n'), "no torn line left");
    // Writing goes on after the repaired end.
    let more = delta("run_a", 4);
    store.append(std::slice::from_ref(&more)).await.unwrap();
    assert_eq!(logged(dir.path()).last(), Some(&more));
}

/// A crash left the log behind, and the run of its last lines was pruned before the next
/// start: the repair looks back to the newest logged event still stored and appends what was
/// committed after it.
#[tokio::test]
async fn a_log_whose_last_run_was_pruned_is_still_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut sent = Vec::new();
    store
        .create_run(&record("run_new", "a", RunStatus::Running))
        .await
        .unwrap();
    let mut old = record("run_old", "a", RunStatus::Completed);
    old.started_at = "2020-01-01T00:00:00.000Z".into();
    store.create_run(&old).await.unwrap();
    for batch in [
        vec![started("run_new", 1), delta("run_new", 2)],
        vec![started("run_old", 1), completed("run_old", 2)],
        vec![delta("run_new", 3), delta("run_new", 4)],
    ] {
        store.append(&batch).await.unwrap();
        sent.extend(batch);
    }
    assert_eq!(store.prune("2021-01-01T00:00:00.000Z").await.unwrap(), 1);
    drop(store);
    // The crash: the last commit's lines never reached the log, whose last lines are now of a
    // pruned run.
    let segment = log_dir(dir.path()).join("00000001.jsonl");
    let text = std::fs::read_to_string(&segment).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&segment, lines[..lines.len() - 2].join("\n") + "\n").unwrap();

    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        logged(dir.path()),
        sent,
        "run_new's last events are back, once"
    );
    let more = completed("run_new", 5);
    store.append(std::slice::from_ref(&more)).await.unwrap();
    assert_eq!(logged(dir.path()).last(), Some(&more));
}

#[tokio::test]
async fn a_second_process_on_the_workspace_does_not_repair_under_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let first = SqliteStore::open(dir.path()).unwrap();
    first
        .create_run(&record("run_a", "a", RunStatus::Running))
        .await
        .unwrap();
    first.append(&[started("run_a", 1)]).await.unwrap();
    // Another process (here: another handle) opens the log while the first has it open: it
    // must not append what the first is about to write itself.
    let second = SqliteStore::open(dir.path()).unwrap();
    first.append(&[delta("run_a", 2)]).await.unwrap();
    second
        .create_run(&record("run_b", "a", RunStatus::Running))
        .await
        .unwrap();
    second.append(&[started("run_b", 1)]).await.unwrap();
    let seqs: Vec<(String, u64)> = logged(dir.path())
        .iter()
        .map(|e| (e.request_id.to_string(), e.seq))
        .collect();
    assert_eq!(
        seqs,
        [
            ("run_a".to_owned(), 1),
            ("run_a".to_owned(), 2),
            ("run_b".to_owned(), 1)
        ]
    );
}

#[tokio::test]
async fn a_damaged_log_never_stops_the_store_and_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    two_runs(&store).await;
    drop(store);
    let segment = log_dir(dir.path()).join("00000001.jsonl");
    let mut damaged = std::fs::read_to_string(&segment).unwrap();
    damaged.push_str("not an event\n");
    std::fs::write(&segment, &damaged).unwrap();

    let store = SqliteStore::open(dir.path()).unwrap();
    let more = delta("run_a", 4);
    store.append(std::slice::from_ref(&more)).await.unwrap();
    let text = std::fs::read_to_string(&segment).unwrap();
    assert!(
        text.starts_with(&damaged),
        "the damaged line is left as it was"
    );
    assert!(text.ends_with(&format!("{}\n", serde_json::to_string(&more).unwrap())));
    assert_eq!(
        store.events(&RequestId::from("run_a"), 3).await.unwrap(),
        [more]
    );
}
