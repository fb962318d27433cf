//! Bad input on disk gives clear errors and is never overwritten: a damaged mirror line, a
//! database from a newer Keel, a file that is not a database, a store that is not writable.

use keel_types::RunLog;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use keel_store::{SCHEMA_VERSION, SqliteStore};
use keel_types::{RequestId, StoreError};

use crate::{dead_pid, delta, raw_db, run_with_events, stored_seqs};

/// The names and contents of every file in a folder.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = fs::read(&path).unwrap_or_default();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn a_damaged_mirror_line_is_reported_with_its_line_and_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let id = RequestId::from("run_1");
    {
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_1", 4).await;
    }
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    let path = store.events_path(&id);
    // Line 2 of 4 is damaged (not a torn tail); the last two events never reached the file.
    let text = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let damaged = format!("{}\nnot json at all\n", lines[0]);
    fs::write(&path, &damaged).unwrap();
    raw_db(store.db_path())
        .execute(
            "UPDATE runs SET owner_pid = ?1",
            rusqlite::params![dead_pid()],
        )
        .unwrap();

    let error = store.verify_mirror(&id).unwrap_err();
    match &error {
        StoreError::Corrupt { location, .. } => {
            assert!(location.ends_with("events.jsonl:2"), "{location}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // Recovery interrupts the run but leaves its damaged mirror exactly as it is.
    assert_eq!(store.recover().await.unwrap(), std::slice::from_ref(&id));
    assert_eq!(fs::read_to_string(&path).unwrap(), damaged);
    // The store keeps the truth: the run can be claimed and continued...
    store.claim(&id).await.unwrap();
    store.append(&[delta("run_1", 5)]).await.unwrap();
    assert_eq!(stored_seqs(&store, "run_1").await, [1, 2, 3, 4, 5]);
    // ...and its mirror is still not touched.
    assert_eq!(fs::read_to_string(&path).unwrap(), damaged);
    assert!(matches!(
        store.verify_mirror(&id),
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn a_mirror_with_an_event_the_store_does_not_have_is_reported_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    run_with_events(&store, "run_1", 2).await;
    let id = RequestId::from("run_1");
    let path = store.events_path(&id);
    // Another event with seq 2 in place of the stored one.
    let text = fs::read_to_string(&path).unwrap();
    let first = text.lines().next().unwrap().to_owned();
    let other = serde_json::to_string(&delta("run_1", 2)).unwrap();
    let diverged = format!("{first}\n{other}\n");
    fs::write(&path, &diverged).unwrap();
    let error = store.verify_mirror(&id).unwrap_err();
    assert!(
        matches!(&error, StoreError::Corrupt { location, .. } if location.ends_with(":2")),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), diverged);
}

#[tokio::test]
async fn a_database_from_a_newer_keel_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let keel = dir.path().join(".keel");
    let db = keel.join("keel.db");
    {
        let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
        run_with_events(&store, "run_1", 2).await;
    }
    raw_db(&db)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let before = snapshot(&keel);
    assert!(!keel.join("keel.db-wal").exists());

    let error = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
    assert_eq!(
        error,
        StoreError::Version {
            path: db.display().to_string(),
            found: SCHEMA_VERSION + 1,
            supported: SCHEMA_VERSION,
        }
    );
    assert!(error.to_string().contains("upgrade keel"), "{error}");
    assert_eq!(snapshot(&keel), before, "nothing in .keel changed");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_reported_as_corrupt_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let keel = dir.path().join(".keel");
    fs::create_dir(&keel).unwrap();
    fs::write(
        keel.join("keel.db"),
        "these are not the pages you are looking for\n".repeat(200),
    )
    .unwrap();
    let before = snapshot(&keel);
    let error = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
    assert!(
        matches!(&error, StoreError::Corrupt { location, message }
            if location.ends_with("keel.db") && message.contains("not a SQLite database")),
        "{error}"
    );
    assert_eq!(snapshot(&keel), before);
}

/// Whether file permissions bind this process (they do not for root).
fn permissions_are_enforced(read_only_dir: &Path) -> bool {
    let probe = read_only_dir.join("probe");
    match fs::write(&probe, "x") {
        Ok(()) => {
            fs::remove_file(probe).unwrap();
            false
        }
        Err(_) => true,
    }
}

#[tokio::test]
async fn a_store_that_cannot_be_written_gives_a_clear_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let keel = dir.path().join(".keel");
    fs::create_dir(&keel).unwrap();
    fs::set_permissions(&keel, fs::Permissions::from_mode(0o555)).unwrap();
    if permissions_are_enforced(&keel) {
        // A read-only store folder.
        let error =
            SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
        assert!(
            matches!(&error, StoreError::Io { path, message }
                if path.contains(".keel") && message.contains("read-only (not writable)")),
            "{error}"
        );
        assert!(snapshot(&keel).is_empty(), "nothing created");
        fs::set_permissions(&keel, fs::Permissions::from_mode(0o755)).unwrap();

        // A read-only database file in a writable folder.
        {
            let store =
                SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
            run_with_events(&store, "run_1", 1).await;
        }
        let db = keel.join("keel.db");
        fs::set_permissions(&db, fs::Permissions::from_mode(0o444)).unwrap();
        let before = fs::read(&db).unwrap();
        let error =
            SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
        assert!(
            matches!(&error, StoreError::Io { path, message }
                if path.ends_with("keel.db") && message.contains("read-only")),
            "{error}"
        );
        assert_eq!(fs::read(&db).unwrap(), before);

        // An existing store whose folder became read-only (no -wal or -shm can be made).
        fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&keel, fs::Permissions::from_mode(0o555)).unwrap();
        let before = snapshot(&keel);
        let error =
            SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
        assert!(
            matches!(&error, StoreError::Io { path, message }
                if path.ends_with(".keel") && message.contains("read-only (not writable)")),
            "{error}"
        );
        assert_eq!(snapshot(&keel), before);
        fs::set_permissions(&keel, fs::Permissions::from_mode(0o755)).unwrap();
    } else {
        // Root ignores permissions; what root cannot do is create the store where a regular
        // file stands.
        fs::set_permissions(&keel, fs::Permissions::from_mode(0o755)).unwrap();
        let other = tempfile::tempdir().unwrap();
        let file = other.path().join(".keel");
        fs::write(&file, "a file, not a folder").unwrap();
        let error =
            SqliteStore::open_with(other.path(), keel_store::MirrorLayout::PerRun).unwrap_err();
        assert!(
            matches!(&error, StoreError::Io { path, message }
                if path.ends_with(".keel") && message.contains("not a directory")),
            "{error}"
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "a file, not a folder");
    }
}
