//! Two processes writing to one workspace store at the same time (a `keel run` while
//! `keel serve` runs). The second process is this test binary again, started with
//! `KEEL_STORE_CHILD` set, which makes [`child_writes_runs_when_asked`] do the child's part.

use keel_types::RunLog;
use std::path::Path;
use std::process::Stdio;

use keel_store::SqliteStore;
use keel_types::{RequestId, RunFilter, RunStatus};

use crate::{assert_mirror_matches, completed, delta, record, started, stored_seqs};

const RUNS: usize = 8;
const EVENTS: u64 = 150;
const CHILD_ENV: &str = "KEEL_STORE_CHILD";

/// Writes `RUNS` runs of `EVENTS` events, concurrently, each ended as `completed`; checks on
/// the way that `recover` never takes a run of a live process.
async fn write_runs(root: &Path, prefix: &str) {
    let store = SqliteStore::open_with(root, keel_store::MirrorLayout::PerRun).unwrap();
    let mut tasks = Vec::new();
    for n in 0..RUNS {
        let store = store.clone();
        let id = format!("run_{prefix}_{n}");
        tasks.push(tokio::spawn(async move {
            store
                .create_run(&record(&id, prefix_agent(&id), RunStatus::Running))
                .await
                .unwrap();
            store.append(&[started(&id, 1)]).await.unwrap();
            for seq in 2..EVENTS {
                store.append(&[delta(&id, seq)]).await.unwrap();
                if seq % 50 == 0 {
                    // Both processes are alive: nothing of theirs may be interrupted.
                    assert_eq!(store.recover().await.unwrap(), Vec::<RequestId>::new());
                }
            }
            store.append(&[completed(&id, EVENTS)]).await.unwrap();
            let mut run = store
                .get_run(&RequestId::from(id.as_str()))
                .await
                .unwrap()
                .unwrap();
            run.status = RunStatus::Completed;
            store.update_run(&run).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

fn prefix_agent(id: &str) -> &'static str {
    if id.contains("child") {
        "child"
    } else {
        "parent"
    }
}

/// The child's part, run only by the test below (as an ignored test, so a normal run does
/// not count it as a pass).
#[test]
#[ignore = "the child process of two_processes_write_runs_to_one_workspace_at_the_same_time"]
fn child_writes_runs_when_asked() {
    let root = std::env::var(CHILD_ENV).expect("started by the two-process test");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(write_runs(Path::new(&root), "child"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_write_runs_to_one_workspace_at_the_same_time() {
    let dir = tempfile::tempdir().unwrap();
    // Started first, so both processes also race to create and migrate the database.
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "multiprocess::child_writes_runs_when_asked",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    write_runs(dir.path(), "parent").await;
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "child failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The child really ran its part (and did not just filter itself out).
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );

    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    let runs = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 2 * RUNS);
    for run in &runs {
        assert_eq!(run.status, RunStatus::Completed, "{}", run.request_id);
        assert_eq!(
            stored_seqs(&store, run.request_id.as_str()).await,
            (1..=EVENTS).collect::<Vec<_>>(),
            "{}",
            run.request_id
        );
        assert_mirror_matches(&store, run.request_id.as_str()).await;
    }
    for agent in ["child", "parent"] {
        let mine = store
            .list_runs(&RunFilter {
                agent: Some(agent.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(mine.len(), RUNS, "{agent}");
    }
}

#[tokio::test]
async fn a_write_lock_held_too_long_elsewhere_is_a_clear_error_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    store.append(&[started("run_1", 1)]).await.unwrap();
    // Another process holds the write lock for longer than the store waits (5 s).
    let other = crate::raw_db(store.db_path());
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let error = store.append(&[delta("run_1", 2)]).await.unwrap_err();
    assert!(
        matches!(&error, keel_types::StoreError::Io { path, message }
            if path.ends_with("keel.db") && message.contains("locked by another process")),
        "{error}"
    );
    other.execute_batch("COMMIT").unwrap();
    // The refused append wrote nothing; the log continues where it was.
    store.append(&[delta("run_1", 2)]).await.unwrap();
    assert_eq!(stored_seqs(&store, "run_1").await, [1, 2]);
    assert_mirror_matches(&store, "run_1").await;
}

#[test]
fn stores_opened_at_once_on_a_new_workspace_all_open() {
    // Each opener switches the new database to WAL while others may already write to it;
    // SQLite answers "database is locked" there at once instead of waiting, so opening retries.
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let start = std::sync::Arc::new(std::sync::Barrier::new(6));
        let openers: Vec<_> = (0..6)
            .map(|n| {
                let root = dir.path().to_path_buf();
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let store = SqliteStore::open_with(&root, keel_store::MirrorLayout::PerRun)?;
                    // Writing at once, as a real opener does, while the others still open.
                    let id = format!("run_{n}");
                    tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap()
                        .block_on(async {
                            store
                                .create_run(&record(&id, "a", RunStatus::Running))
                                .await?;
                            store.append(&[started(&id, 1)]).await
                        })
                })
            })
            .collect();
        for opener in openers {
            opener.join().unwrap().unwrap();
        }
    }
}
