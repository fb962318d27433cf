//! `RunLog::health`: a usable store answers its schema version after a real, data-neutral
//! commit; a database file deleted or replaced under an open store is reported, not written
//! into the void.

use keel_store::{SCHEMA_VERSION, SqliteStore};
use keel_types::RunLog;
use keel_types::{RunStatus, StoreError, StoreHealth};

use super::record;
use crate::backends::Backend;

#[tokio::test]
async fn a_usable_store_commits_a_neutral_write_and_reports_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    store
        .create_run(&record("run_1", "a", RunStatus::Completed))
        .await
        .unwrap();
    let commits = store.write_stats().commits;
    let health = store.health().await.unwrap();
    assert_eq!(
        health,
        StoreHealth {
            kind: "sqlite".into(),
            schema_version: Some(SCHEMA_VERSION),
            writable: Some(true),
        }
    );
    // The probe really went through the writer and committed.
    assert_eq!(store.write_stats().commits, commits + 1);
    // …without changing any data, so the store still opens at the same version.
    drop(store);
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    assert_eq!(store.list_runs(&Default::default()).await.unwrap().len(), 1);
    assert_eq!(
        store.health().await.unwrap().schema_version,
        Some(SCHEMA_VERSION)
    );
}

#[tokio::test]
async fn a_deleted_database_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    std::fs::remove_dir_all(dir.path().join(".keel")).unwrap();
    let error = store.health().await.unwrap_err();
    let StoreError::Io { path, message } = &error else {
        panic!("expected an i/o error, got {error:?}");
    };
    assert!(path.ends_with("keel.db"), "{path}");
    assert!(message.contains("deleted or moved"), "{message}");
}

#[tokio::test]
async fn a_replaced_database_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path(), keel_store::MirrorLayout::PerRun).unwrap();
    let db = dir.path().join(".keel").join("keel.db");
    std::fs::rename(&db, dir.path().join("moved.db")).unwrap();
    std::fs::copy(dir.path().join("moved.db"), &db).unwrap();
    let error = store.health().await.unwrap_err();
    assert!(error.to_string().contains("replaced"), "{error}");
}

/// Both stores answer their kind and current schema version after a write.
async fn a_usable_store_reports_its_kind_and_version(backend: &Backend) {
    let health = backend.runs().health().await.unwrap();
    let supported = match backend.kind {
        "sqlite" => SCHEMA_VERSION,
        _ => keel_store::PG_SCHEMA_VERSION,
    };
    assert_eq!(
        health,
        StoreHealth {
            kind: backend.kind.into(),
            schema_version: Some(supported),
            writable: Some(true),
        }
    );
}

crate::contract!(a_usable_store_reports_its_kind_and_version);
