//! The Runtime document's `store`: which backend keeps the runs (SQLite in `.keel/`, or
//! PostgreSQL for several replicas) and where artifacts go.

use std::time::Duration as StdDuration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// Where runs are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreSpec {
    /// `sqlite` (the default: `.keel/keel.db`) or `postgres` (several replicas on one
    /// database); taken from the URL's scheme when left out.
    pub kind: Option<StoreKind>,
    /// `sqlite://.keel/keel.db`, or `postgres://user@host:port/database` (often
    /// `${DATABASE_URL}`).
    pub url: String,
    /// PostgreSQL: a schema to keep Keel's tables in instead of `public`.
    pub schema: Option<String>,
    /// PostgreSQL: how long a replica's lease lasts without a heartbeat; its runs are taken
    /// over by another replica after that.
    pub lease_ttl: Duration,
    /// How long ended runs are kept: what `keel runs prune` removes when no age is given.
    pub retention: Duration,
    /// Where artifacts (large tool outputs) go.
    pub artifacts: ArtifactsSpec,
    /// SQLite: how committed events are mirrored as JSONL — `segments` (files shared by every
    /// run, `.keel/log/`) or `perRun` (`.keel/runs/<requestId>/events.jsonl`, what hooks get
    /// as `transcript_path`).
    pub mirror: MirrorSpec,
}

/// The JSONL mirror's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MirrorSpec {
    #[default]
    Segments,
    PerRun,
}

/// The store backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

/// Where artifacts are kept.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ArtifactsSpec {
    /// `filesystem` (the default: `.keel/artifacts`, or `path`) or `database` (in the
    /// PostgreSQL store, so every replica reads them without a shared filesystem).
    pub kind: ArtifactsKind,
    /// `filesystem`: a folder instead of `.keel/artifacts` (relative to the workspace), e.g.
    /// a filesystem every replica mounts.
    pub path: Option<String>,
}

/// The artifact backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactsKind {
    #[default]
    Filesystem,
    Database,
}

/// The SQLite store's URL, the default.
pub const DEFAULT_STORE_URL: &str = "sqlite://.keel/keel.db";

impl StoreSpec {
    /// The backend: `kind`, or the URL's scheme.
    pub fn backend(&self) -> StoreKind {
        match self.kind {
            Some(kind) => kind,
            None if is_postgres_url(&self.url) => StoreKind::Postgres,
            None => StoreKind::Sqlite,
        }
    }
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl Default for StoreSpec {
    fn default() -> Self {
        Self {
            kind: None,
            url: DEFAULT_STORE_URL.into(),
            schema: None,
            lease_ttl: Duration(StdDuration::from_secs(15)),
            retention: Duration(StdDuration::from_secs(30 * 24 * 3600)),
            artifacts: ArtifactsSpec::default(),
            mirror: MirrorSpec::default(),
        }
    }
}
