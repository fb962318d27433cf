//! [`PgStore`]: runs, events, sessions, approvals, tasks, skill candidates, memory and
//! (optionally) artifacts on PostgreSQL, for several `keel serve` replicas sharing one
//! database.
//!
//! - **Schema** (`migrations/postgres/*.sql`, embedded; `schema.rs`): versioned, applied in
//!   one transaction under an advisory lock, recorded in `keel_schema`.
//! - **Appends** (`writer.rs`): one task group-commits the appends queued while the previous
//!   transaction ran — one statement, one commit, one WAL flush for many runs — and checks
//!   every run's continuity and this process's fencing token in that statement.
//! - **Leases and fencing** (`cluster.rs`): a process that creates or claims runs holds a
//!   lease (a row in `leases` with a token from a sequence) renewed by heartbeat. A run is
//!   owned by a token; an append or record update by any other token, or by a lease that
//!   expired, is [`StoreError::Fenced`]. `recover` takes over the active runs of expired
//!   leases (they become `interrupted`, reserved for the taker, which resumes them).
//! - **Queue and signals** (`cluster.rs`): queued runs are claimed with
//!   `FOR UPDATE SKIP LOCKED`; `LISTEN/NOTIFY` carries queue, cancel, append and approval
//!   signals between replicas.
//!
//! The record types are stored as JSON text (`jsonb` cannot hold a NUL character) beside the columns lists filter and sort on,
//! so a record round-trips exactly.

mod artifacts;
mod cluster;
mod copy;
mod memory;
mod records;
mod runs;
mod schema;
mod writer;

use keel_types::{ApprovalStore, EvalStore, RunLog, SessionStore, SkillCandidateStore, TaskStore};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{
    Event, Message, RequestId, RunFilter, RunRecord, SessionId, SessionMessage, SessionRecord,
    StoreError, StoreHealth,
};
use sqlx_core::pool::PoolOptions;
use sqlx_postgres::{PgConnectOptions, PgPool, Postgres};

pub use artifacts::PgArtifacts;
pub use copy::CopyReport;
pub use schema::SCHEMA_VERSION as PG_SCHEMA_VERSION;

use cluster::Leases;
use writer::Writer;

/// How a [`PgStore`] connects.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user@host:port/database`.
    pub url: String,
    /// A schema to use instead of `public` (created if missing); tests use one each.
    pub schema: Option<String>,
    /// How long a lease lasts without a heartbeat (renewed every third of it).
    pub lease_ttl: Duration,
    /// Connections in the pool (the writer and the listener have their own).
    pub max_connections: u32,
    /// A name for this process in `leases` and `/api/health`; `host:pid` by default.
    pub replica: Option<String>,
}

impl PgOptions {
    /// Defaults for `url`: the `public` schema, a 15 s lease, 8 connections.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: None,
            lease_ttl: Duration::from_secs(15),
            max_connections: 8,
            replica: None,
        }
    }
}

/// The PostgreSQL run store. Cheap to clone: clones share the pool, the writer and the lease.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    /// The URL without its password, for errors and logs.
    shown: String,
    options: PgOptions,
    /// Set once the schema exists and is migrated (retried until it succeeds).
    ready: tokio::sync::OnceCell<()>,
    /// The group-commit task, started by the first append.
    writer: std::sync::OnceLock<Writer>,
    leases: Leases,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.inner.shown)
            .field("schema", &self.inner.options.schema)
            .finish_non_exhaustive()
    }
}

/// A `sqlx` error as a [`StoreError`] naming the database.
pub(crate) fn db_error(shown: &str, error: &sqlx_core::Error) -> StoreError {
    StoreError::Io {
        path: shown.to_owned(),
        message: error.to_string(),
    }
}

/// A JSON column that does not parse as what it should hold.
pub(crate) fn corrupt(table: &str, key: &str, error: &serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        location: format!("{table} `{key}`"),
        message: error.to_string(),
    }
}

/// A record as JSON text for a `record` column.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &credentials[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A schema name safe to splice into SQL: letters, digits and `_`, not starting with a digit.
fn check_schema(schema: &str) -> Result<(), StoreError> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match ok {
        true => Ok(()),
        false => Err(StoreError::Invalid(format!(
            "schema `{schema}` must be lower-case letters, digits and `_` (at most 63)"
        ))),
    }
}

impl PgStore {
    /// Connects, creates the schema if asked for one, and applies pending migrations.
    ///
    /// Errors: [`StoreError::Io`] naming the database (password hidden) when it cannot be
    /// reached; [`StoreError::Version`] when it was migrated by a newer Keel (nothing is
    /// changed then).
    pub async fn connect(options: PgOptions) -> Result<Self, StoreError> {
        let store = Self::lazy(options)?;
        store.ready().await?;
        Ok(store)
    }

    /// A store that connects and migrates at its first use (for synchronous set-up, e.g. the
    /// SDK's builder); the errors of [`PgStore::connect`] then come from that first call.
    pub fn lazy(options: PgOptions) -> Result<Self, StoreError> {
        let shown = without_password(&options.url);
        let mut connect = PgConnectOptions::from_str(&options.url).map_err(|e| {
            StoreError::Invalid(format!("the database URL `{shown}` is not valid: {e}"))
        })?;
        connect = connect.application_name("keel");
        if let Some(schema) = &options.schema {
            check_schema(schema)?;
            connect = connect.options([("search_path", schema.as_str())]);
        }
        let pool = PoolOptions::<Postgres>::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(connect);
        let leases = Leases::new(&options);
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                shown,
                options,
                ready: tokio::sync::OnceCell::new(),
                writer: std::sync::OnceLock::new(),
                leases,
            }),
        })
    }

    /// Connects without migrating (`keel store check`): only the schema version is read.
    pub async fn inspect(options: PgOptions) -> Result<(Self, u32), StoreError> {
        let store = Self::lazy(options)?;
        let version = schema::version(&store.inner.pool, &store.inner.shown).await?;
        Ok((store, version))
    }

    /// The schema exists and is migrated (once per process).
    pub(crate) async fn ready(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        inner
            .ready
            .get_or_try_init(|| async {
                // The schema is created under the migrations' lock: `CREATE SCHEMA IF NOT
                // EXISTS` run by replicas starting together can fail on the catalogue's
                // unique index.
                let schema = inner.options.schema.as_deref();
                schema::migrate(&inner.pool, &inner.shown, schema)
                    .await
                    .map(|_| ())
            })
            .await
            .map(|_| ())
    }

    fn writer(&self) -> &Writer {
        self.inner
            .writer
            .get_or_init(|| Writer::start(self.inner.pool.clone(), self.inner.shown.clone()))
    }

    /// The URL with its password hidden.
    pub fn shown_url(&self) -> &str {
        &self.inner.shown
    }

    /// The schema version of the database (0 when it was never migrated).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        schema::version(&self.inner.pool, &self.inner.shown).await
    }

    /// Drops the store's schema and everything in it (tests' clean-up). Refused for `public`.
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        let Some(schema) = &self.inner.options.schema else {
            return Err(StoreError::Invalid(
                "only a store in its own schema can be dropped".into(),
            ));
        };
        self.inner.leases.stop();
        sqlx_core::query::query(sqlx_core::sql_str::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE"
        )))
        .execute(&self.inner.pool)
        .await
        .map_err(|e| self.db_error(&e))?;
        Ok(())
    }

    /// Totals of the group-committing writer since the store was opened.
    pub fn write_stats(&self) -> crate::WriteStats {
        self.inner
            .writer
            .get()
            .map(Writer::stats)
            .unwrap_or_default()
    }

    /// The pool, once the schema is ready. Every operation starts here.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    pub(crate) fn db_error(&self, error: &sqlx_core::Error) -> StoreError {
        db_error(&self.inner.shown, error)
    }

    /// This process's fencing token, registering a lease first if it has none.
    pub(crate) async fn token(&self) -> Result<i64, StoreError> {
        Ok(self.inner.leases.current(self).await?.token)
    }

    /// Stores `batch` (and replaces its run's record) under the token its run was taken
    /// under.
    async fn write(
        &self,
        batch: crate::batch::EncodedBatch,
        replace: Option<writer::Replace>,
    ) -> Result<(), StoreError> {
        let token = match self.inner.leases.token_for(&batch.request_id.0) {
            Some(token) => token,
            None => self.token().await?,
        };
        // The run whose end this stores, to forget once it is stored.
        let ended = replace
            .as_ref()
            .filter(|r| r.status.is_terminal())
            .map(|_| batch.request_id.0.clone());
        let write = match replace {
            Some(replace) => writer::RecordWrite::Replace(replace),
            None => writer::RecordWrite::Keep,
        };
        let result = self.writer().append(batch, token, write).await;
        match (&result, ended) {
            (Ok(()), Some(id)) => self.inner.leases.let_go(&id),
            // Refused: if it was because our lease ran out, forget it now (the next write
            // registers a new one) rather than at the next heartbeat.
            (Err(StoreError::Fenced(_)), _) if self.inner.leases.token_if_any() == Some(token) => {
                let _ = self.inner.leases.renew(self, token).await;
            }
            _ => {}
        }
        result
    }
}

#[async_trait]
impl RunLog for PgStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.ready().await?;
        let token = self.token().await?;
        runs::insert(self, run, Some(token), None).await?;
        self.inner.leases.hold(run.request_id.as_str(), token);
        Ok(())
    }

    /// The record and its opening events in the writer's group commit: a new run costs no
    /// transaction of its own.
    async fn create_run_with(&self, run: &RunRecord, events: &[Event]) -> Result<(), StoreError> {
        keel_types::check_run_of(run, events)?;
        self.ready().await?;
        let Some(batch) = crate::batch::encode(events)? else {
            return self.create_run(run).await;
        };
        if batch.first_seq() != 1 {
            return Err(crate::batch::continuity_error(&batch, 1));
        }
        let token = self.token().await?;
        let create = writer::Create {
            session_id: run.session_id.as_ref().map(|s| s.as_str().to_owned()),
            agent: run.agent.clone(),
            status: run.status.as_str(),
            started_at: run.started_at.clone(),
            owner: run.owner.clone(),
            parent_id: run.links.parent_id.as_ref().map(|p| p.as_str().to_owned()),
            root_id: run.links.root_id.as_ref().map(|p| p.as_str().to_owned()),
            record: to_json(run)?,
        };
        self.writer()
            .append(batch, token, writer::RecordWrite::Create(Box::new(create)))
            .await?;
        self.inner.leases.hold(run.request_id.as_str(), token);
        Ok(())
    }

    async fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        self.ready().await?;
        match crate::batch::encode(events)? {
            Some(batch) => self.write(batch, None).await,
            None => Ok(()),
        }
    }

    /// The events and the record in one statement: a run's end is stored whole or not at all.
    async fn append_and_update(&self, events: &[Event], run: &RunRecord) -> Result<(), StoreError> {
        keel_types::check_run_of(run, events)?;
        self.ready().await?;
        let replace = writer::Replace {
            status: run.status,
            record: to_json(run)?,
        };
        match crate::batch::encode(events)? {
            Some(batch) => self.write(batch, Some(replace)).await,
            None => self.update_run(run).await,
        }
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.ready().await?;
        runs::update(self, run).await?;
        if run.status.is_terminal() {
            self.inner.leases.let_go(run.request_id.as_str());
        }
        Ok(())
    }

    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        self.ready().await?;
        runs::get(self, id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.ready().await?;
        runs::list(self, filter).await
    }

    async fn run_counts(&self) -> Result<Vec<(keel_types::RunStatus, u64)>, StoreError> {
        self.ready().await?;
        runs::counts(self).await
    }

    async fn started_by_minute(
        &self,
        since: &str,
    ) -> Result<Vec<(String, keel_types::RunStatus, u64)>, StoreError> {
        self.ready().await?;
        runs::started_by_minute(self, since).await
    }

    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError> {
        self.ready().await?;
        runs::events(self, id, after).await
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        self.ready().await?;
        cluster::take_over(self).await
    }

    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError> {
        self.ready().await?;
        let token = self.token().await?;
        let run = runs::claim(self, id, token).await?;
        self.inner.leases.hold(id.as_str(), token);
        Ok(run)
    }

    async fn prune(&self, before: &str) -> Result<u64, StoreError> {
        self.ready().await?;
        runs::prune(self, before).await
    }

    async fn tool_stats(&self) -> Result<Vec<keel_types::ToolStats>, StoreError> {
        self.ready().await?;
        records::tool_stats(self).await
    }

    fn cluster(&self) -> Option<Arc<dyn keel_types::Cluster>> {
        Some(Arc::new(self.clone()))
    }

    /// A read (the schema version) and a write that changes nothing but proves the database
    /// takes commits (the version written back, in a transaction).
    async fn health(&self) -> Result<StoreHealth, StoreError> {
        self.ready().await?;
        let version = schema::probe_write(&self.inner.pool, &self.inner.shown).await?;
        Ok(StoreHealth {
            kind: "postgres".into(),
            schema_version: Some(version),
            writable: Some(true),
        })
    }
}

#[async_trait]
impl SessionStore for PgStore {
    async fn ensure_session(
        &self,
        id: &SessionId,
        agent: &str,
        owner: &keel_types::SessionOwner,
    ) -> Result<SessionRecord, StoreError> {
        self.ready().await?;
        runs::ensure_session(self, id, agent, owner).await
    }

    async fn get_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.ready().await?;
        runs::get_session(self, id).await
    }

    async fn list_sessions(&self, limit: Option<usize>) -> Result<Vec<SessionRecord>, StoreError> {
        self.ready().await?;
        runs::list_sessions(self, limit).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.ready().await?;
        runs::delete_session(self, id).await
    }

    async fn set_session_summary(
        &self,
        id: &SessionId,
        summary: &keel_types::SessionSummary,
    ) -> Result<bool, StoreError> {
        self.ready().await?;
        runs::set_session_summary(self, id, summary).await
    }

    async fn session_messages(&self, id: &SessionId) -> Result<Vec<SessionMessage>, StoreError> {
        self.ready().await?;
        runs::session_messages(self, id).await
    }

    async fn append_session_messages(
        &self,
        id: &SessionId,
        request_id: &RequestId,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        self.ready().await?;
        runs::append_messages(self, id, request_id, messages).await
    }
}

#[async_trait]
impl ApprovalStore for PgStore {
    async fn create_approval(
        &self,
        approval: &keel_types::ApprovalRecord,
    ) -> Result<(), StoreError> {
        self.ready().await?;
        records::create_approval(self, approval).await
    }

    async fn get_approval(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::ApprovalRecord>, StoreError> {
        self.ready().await?;
        records::get_approval(self, id).await
    }

    async fn list_approvals(
        &self,
        status: Option<keel_types::ApprovalStatus>,
    ) -> Result<Vec<keel_types::ApprovalRecord>, StoreError> {
        self.ready().await?;
        records::list_approvals(self, status).await
    }

    async fn decide_approval(
        &self,
        id: &str,
        status: keel_types::ApprovalStatus,
        scope: keel_types::ApprovalScope,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<keel_types::ApprovalRecord, StoreError> {
        self.ready().await?;
        records::decide_approval(
            self,
            id,
            &records::Verdict {
                status,
                scope,
                decided_by,
                reason,
            },
        )
        .await
    }
}

#[async_trait]
impl TaskStore for PgStore {
    async fn put_task(&self, task: &keel_types::TaskRecord) -> Result<(), StoreError> {
        self.ready().await?;
        records::put_task(self, task).await
    }

    async fn get_task(&self, id: &str) -> Result<Option<keel_types::TaskRecord>, StoreError> {
        self.ready().await?;
        records::get_task(self, id).await
    }

    async fn list_tasks(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<keel_types::TaskRecord>, StoreError> {
        self.ready().await?;
        records::list_tasks(self, limit).await
    }

    async fn delete_task(&self, id: &str) -> Result<bool, StoreError> {
        self.ready().await?;
        records::delete_task(self, id).await
    }
}

#[async_trait]
impl EvalStore for PgStore {
    async fn save_eval_result(
        &self,
        result: &keel_types::eval::EvalResult,
    ) -> Result<(), StoreError> {
        self.ready().await?;
        records::save_eval(self, result).await
    }

    async fn get_eval_result(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::eval::EvalResult>, StoreError> {
        self.ready().await?;
        records::get_eval(self, id).await
    }

    async fn list_eval_results(
        &self,
        eval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<keel_types::eval::EvalResult>, StoreError> {
        self.ready().await?;
        records::list_evals(self, eval, limit).await
    }
}

#[async_trait]
impl SkillCandidateStore for PgStore {
    async fn create_skill_candidate(
        &self,
        candidate: &keel_types::SkillCandidate,
    ) -> Result<(), StoreError> {
        self.ready().await?;
        records::create_candidate(self, candidate).await
    }

    async fn get_skill_candidate(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::SkillCandidate>, StoreError> {
        self.ready().await?;
        records::get_candidate(self, id).await
    }

    async fn list_skill_candidates(
        &self,
        status: Option<keel_types::CandidateStatus>,
    ) -> Result<Vec<keel_types::SkillCandidate>, StoreError> {
        self.ready().await?;
        records::list_candidates(self, status).await
    }

    async fn decide_skill_candidate(
        &self,
        id: &str,
        status: keel_types::CandidateStatus,
        decided_by: &str,
        reason: Option<&str>,
        path: Option<&str>,
    ) -> Result<keel_types::SkillCandidate, StoreError> {
        self.ready().await?;
        records::decide_candidate(self, id, status, decided_by, reason, path).await
    }
}
