//! Crash recovery on the SQLite store: runs of dead processes (by pid) become `interrupted`,
//! their mirrors are repaired from the store, and live runs are left alone. (That exactly one
//! claimer resumes a run is a contract test of both stores, in `claims.rs`.)

use keel_types::RunLog;
use std::fs;
use std::io::Write;
use std::path::Path;

use keel_store::{MirrorStatus, SqliteStore};
use keel_types::{RequestId, RunStatus};

use crate::{assert_mirror_matches, dead_pid, delta, raw_db, run_with_events, stored_seqs};

/// Makes a run look owned by a process that no longer exists.
fn orphan(db: &Path, id: &str) {
    raw_db(db)
        .execute(
            "UPDATE runs SET owner_pid = ?1 WHERE request_id = ?2",
            rusqlite::params![dead_pid(), id],
        )
        .unwrap();
}

/// Keeps the first `keep` lines of a mirror and adds half of the next line, as a crash in the
/// middle of a mirror write would.
fn tear_mirror(path: &Path, keep: usize) {
    let text = fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut torn: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
    torn.push_str(&lines[keep][..lines[keep].len() / 2]);
    fs::write(path, torn).unwrap();
}

#[tokio::test]
async fn recover_interrupts_runs_of_dead_processes_and_repairs_their_mirrors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".keel/keel.db");
    {
        // The process that will "crash".
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_torn", 6).await;
        run_with_events(&store, "run_no_mirror", 4).await;
        run_with_events(&store, "run_waiting", 3).await;
        let mut waiting = store
            .get_run(&RequestId::from("run_waiting"))
            .await
            .unwrap()
            .unwrap();
        waiting.status = RunStatus::WaitingApproval;
        store.update_run(&waiting).await.unwrap();
        run_with_events(&store, "run_done", 2).await;
        let mut done = store
            .get_run(&RequestId::from("run_done"))
            .await
            .unwrap()
            .unwrap();
        done.status = RunStatus::Completed;
        store.update_run(&done).await.unwrap();
    }
    // The crash: committed events never reached the mirrors, one write was cut in half, and
    // the owner is gone.
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    tear_mirror(&store.events_path(&RequestId::from("run_torn")), 3);
    fs::remove_file(store.events_path(&RequestId::from("run_no_mirror"))).unwrap();
    for id in ["run_torn", "run_no_mirror", "run_waiting", "run_done"] {
        orphan(&db, id);
    }
    assert_eq!(
        store.verify_mirror(&RequestId::from("run_torn")).unwrap(),
        MirrorStatus::Behind {
            mirrored: 3,
            stored: 6,
            torn_tail: true
        }
    );
    // A run of this (live) process, created after the restart.
    run_with_events(&store, "run_live", 2).await;

    let mut recovered = store.recover().await.unwrap();
    recovered.sort();
    assert_eq!(
        recovered,
        ["run_no_mirror", "run_torn", "run_waiting"].map(RequestId::from)
    );
    for id in ["run_torn", "run_no_mirror", "run_waiting"] {
        let run = store.get_run(&RequestId::from(id)).await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Interrupted, "{id}");
        assert_eq!(run.ended_at, None, "{id}");
        assert_mirror_matches(&store, id).await;
        assert!(matches!(
            store.verify_mirror(&RequestId::from(id)).unwrap(),
            MirrorStatus::InSync { .. }
        ));
    }
    let live = store
        .get_run(&RequestId::from("run_live"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.status, RunStatus::Running);
    let done = store
        .get_run(&RequestId::from("run_done"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    // Nothing left to recover.
    assert!(store.recover().await.unwrap().is_empty());

    // The interrupted run is resumed: claimed, then its log continues.
    let claimed = store.claim(&RequestId::from("run_torn")).await.unwrap();
    assert_eq!(
        (claimed.status, claimed.links.resumed),
        (RunStatus::Running, 1)
    );
    store.append(&[delta("run_torn", 7)]).await.unwrap();
    assert_eq!(
        stored_seqs(&store, "run_torn").await,
        (1..=7).collect::<Vec<_>>()
    );
    assert_mirror_matches(&store, "run_torn").await;
    // Claimed by this live process, the run is not interrupted again.
    assert!(store.recover().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_mirror_behind_its_store_is_completed_when_a_restarted_process_appends() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_1", 5).await;
    }
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    tear_mirror(&store.events_path(&RequestId::from("run_1")), 2);
    store.append(&[delta("run_1", 6)]).await.unwrap();
    assert_mirror_matches(&store, "run_1").await;
}

#[tokio::test]
async fn a_torn_mirror_tail_is_cut_before_the_repair_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".keel/keel.db");
    {
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_1", 3).await;
    }
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    let path = store.events_path(&RequestId::from("run_1"));
    // All events are mirrored, but a half-written line follows (a duplicate write cut short).
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(br#"{"id":"evt_x","seq":4,"ts":"#)
        .unwrap();
    orphan(&db, "run_1");
    assert_eq!(store.recover().await.unwrap(), [RequestId::from("run_1")]);
    assert_mirror_matches(&store, "run_1").await;
}
