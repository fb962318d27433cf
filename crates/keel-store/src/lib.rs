//! Run storage behind the [`RunStore`](keel_types::RunStore) port.
//!
//! [`SqliteStore`] is the default: one SQLite database per workspace (`.keel/keel.db`) that
//! group-commits writes from a dedicated writer thread, plus a JSONL mirror of every committed
//! event that never disagrees with it — by default append-only [`segments`] shared by every
//! run (`.keel/log/*.jsonl`), or a file per run (`.keel/runs/<requestId>/events.jsonl`,
//! [`MirrorLayout::PerRun`]). Start reading at [`sqlite`] (the store, its crash recovery and
//! mirror repair), then `sqlite::writer` (the group commit).
//!
//! [`mirror`] is the JSONL format of the mirrors and of `keel runs export`: reading, torn-tail
//! handling and repair. [`postgres`] is the store for several replicas on one database.

pub mod artifacts;
mod batch;
mod memory_rules;
pub mod mirror;
mod owner;
#[cfg(feature = "postgres")]
pub mod postgres;
mod refusals;
pub mod segments;
pub mod sqlite;

pub use artifacts::FsArtifacts;
pub use mirror::{EVENTS_FILE, MirrorStatus, read_events_file};
#[cfg(feature = "postgres")]
pub use postgres::{CopyReport, PG_SCHEMA_VERSION, PgArtifacts, PgOptions, PgStore};
pub use segments::{LOG_DIR, MirrorLayout, SEGMENT_BYTES};
pub use sqlite::{DB_FILE, SCHEMA_VERSION, SqliteStore, WriteStats};
