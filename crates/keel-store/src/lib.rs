//! Run storage behind the [`RunStore`](keel_types::RunStore) port.
//!
//! [`SqliteStore`] is the default: one SQLite database per workspace (`.keel/keel.db`) that
//! group-commits writes from a dedicated writer thread, plus a JSONL mirror of every run's log
//! under `.keel/runs/<requestId>/events.jsonl` that never disagrees with it. Start reading at
//! [`sqlite`] (the store, its crash recovery and mirror repair), then `sqlite::writer` (the
//! group commit).
//!
//! [`JsonlStore`] is the earlier file-only store, kept while callers move over. [`mirror`] is
//! the JSONL format both use: reading, torn-tail handling and repair.

mod batch;
mod jsonl;
pub mod mirror;
mod owner;
pub mod sqlite;

pub use jsonl::{JsonlStore, RUN_FILE};
pub use mirror::{EVENTS_FILE, MirrorStatus, read_events_file};
pub use sqlite::{DB_FILE, SCHEMA_VERSION, SqliteStore, WriteStats};
