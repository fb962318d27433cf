//! The SQLite writer checkpoints the WAL itself: once it has had nothing to do for a moment
//! with a WAL worth folding back, the committed pages reach the database file — without a
//! reader, a reopen or a checkpoint of the test's own.

use keel_types::RunLog;
use std::time::{Duration, Instant};

use keel_store::SqliteStore;
use keel_types::RequestId;

use super::run_with_events;

#[tokio::test]
async fn a_quiet_writer_checkpoints_the_wal_into_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let db = dir.path().join(".keel").join("keel.db");
    let size = || std::fs::metadata(&db).unwrap().len();
    let before = size();
    // One commit per append: a few pages each, well past the quiet checkpoint's 256.
    run_with_events(&store, "run_1", 300).await;
    assert_eq!(store.write_stats().commits, 301);

    let deadline = Instant::now() + Duration::from_secs(60);
    while store.write_stats().checkpoints == 0 {
        assert!(
            Instant::now() < deadline,
            "no checkpoint within 60 s of quiet"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        size() > before,
        "the checkpoint copied the WAL's pages into the database file ({before} → {} bytes)",
        size()
    );
    // Nothing was lost or reordered on the way.
    let events = store.events(&RequestId::from("run_1"), 0).await.unwrap();
    assert_eq!(events.len(), 300);
    assert!(events.iter().zip(1..).all(|(e, seq)| e.seq == seq));
}
