//! [`SqliteStore`]: the default run store — one SQLite database per workspace
//! (`.keel/keel.db`, WAL, synced at every commit) plus a JSONL mirror of the committed events:
//! shared segments (`.keel/log/*.jsonl`, the default, repaired as a whole at open — see
//! `crate::segments`) or a file per run (`.keel/runs/<requestId>/events.jsonl`, what the rest
//! of this page describes).
//!
//! Writes go to one writer thread that group-commits them, then mirrors and answers
//! (`writer`); reads use a small pool of read-only connections on
//! blocking threads. Start with [`SqliteStore::open`], then the [`RunStore`](keel_types::RunStore) impls below;
//! `connection` holds the open sequence and migrations, `writes` the write operations
//! other than appends, `rows` the mapping between rows and DTOs.
//!
//! # The mirror and the store never disagree
//!
//! The store is the truth; the mirror is written only after a commit, by the writer thread,
//! in commit order. A crash between a commit and its mirror write leaves the mirror *behind*
//! (missing its newest events, perhaps with a torn last line). That is repaired, never
//! rewritten: `recover` (for the runs it interrupts) and `claim` read the whole mirror, check
//! that every line is the stored event of its `seq`, cut a torn tail and append the missing
//! events from the store. When the writer reopens a mirror it did not have open (after a
//! restart or eviction) it does the same from the file's last line, cheaply.
//!
//! A mirror with a *damaged* line (not a torn tail), or one that disagrees with the store, is
//! left exactly as it is: the operation that needed it gets (or logs) a
//! [`StoreError::Corrupt`] naming `file:line`, later appends leave that mirror alone, and
//! [`SqliteStore::verify_mirror`] reports it. The store's events stay readable throughout.

mod approvals;
mod candidates;
mod connection;
mod evals;
mod json_rows;
mod memory;
mod rows;
mod tasks;
mod writer;
mod writes;

use keel_types::{ApprovalStore, EvalStore, RunLog, SessionStore, SkillCandidateStore, TaskStore};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_types::{
    Event, Message, RequestId, RunFilter, RunRecord, SessionId, SessionMessage, SessionRecord,
    StoreError, StoreHealth,
};
use rusqlite::Connection;

pub use connection::SCHEMA_VERSION;
pub use writer::WriteStats;

use crate::batch;
use crate::mirror::{self, MirrorFiles, MirrorStatus};
use crate::owner::Owner;
use crate::segments::{LOG_DIR, MirrorLayout, SEGMENT_BYTES, Segments};
use rows::RunColumns;
use writer::{FinisherParts, NewRun, RecordWrite, Writer};

/// File name of the database inside `.keel`.
pub const DB_FILE: &str = "keel.db";

/// Mirrors kept open at once (active runs); the least recently used is closed beyond this.
const OPEN_MIRRORS: usize = 256;
/// Idle read connections kept for reuse.
const IDLE_READERS: usize = 4;

/// The SQLite run store of a workspace. Cheap to clone: clones share one writer thread and one
/// pool of readers.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: PathBuf,
    /// The identity of the database file opened, to notice it deleted or replaced.
    file: Option<connection::FileId>,
    mirror_root: PathBuf,
    /// The shared segments' folder, when the mirror is written there.
    log: Option<PathBuf>,
    owner: Owner,
    writer: Writer,
    readers: Readers,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("db", &self.inner.db)
            .field("mirror_root", &self.inner.mirror_root)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the store of the workspace at `workspace_root`: `.keel/keel.db`, with mirrors
    /// under `.keel/runs/`. Creates both on first use; applies pending migrations.
    ///
    /// Errors: [`StoreError::Version`] for a database from a newer Keel and
    /// [`StoreError::Corrupt`] for a file that is not a database (both left untouched);
    /// [`StoreError::Io`] naming the path when the folder or file is not writable.
    pub fn open(workspace_root: &Path) -> Result<Self, StoreError> {
        Self::open_with(workspace_root, MirrorLayout::default())
    }

    /// [`SqliteStore::open`] with the JSONL mirror in `layout`: shared segments under
    /// `.keel/log/` (the default), or a file per run under `.keel/runs/`.
    pub fn open_with(workspace_root: &Path, layout: MirrorLayout) -> Result<Self, StoreError> {
        let keel = workspace_root.join(".keel");
        let log = (layout == MirrorLayout::Segments).then(|| keel.join(LOG_DIR));
        Self::open_layout(&keel.join(DB_FILE), &keel.join("runs"), log.as_deref())
    }

    /// Opens the store with its database at `db_path` and a mirror file per run under
    /// `mirror_root`.
    pub fn open_at(db_path: &Path, mirror_root: &Path) -> Result<Self, StoreError> {
        Self::open_layout(db_path, mirror_root, None)
    }

    fn open_layout(
        db_path: &Path,
        mirror_root: &Path,
        log: Option<&Path>,
    ) -> Result<Self, StoreError> {
        if let Some(dir) = db_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            connection::ensure_dir(dir)?;
        }
        let conn = connection::open_writer(db_path)?;
        let readers = Readers {
            db: db_path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
        };
        // Fail now, not at the first read, if readers cannot open.
        readers.with(|_| Ok(()))?;
        let (mirrors, segments) = match log {
            Some(dir) => {
                let reader = connection::open_reader(db_path)?;
                let mut fetch =
                    |id: &RequestId, seq: u64| rows::lines_after(&reader, db_path, id, seq);
                // Without its log the store still works: the log is what may be missing.
                let segments = match Segments::open(dir, SEGMENT_BYTES, &mut fetch) {
                    Ok(segments) => Some(segments),
                    Err(error) => {
                        tracing::error!(path = %dir.display(), %error, "No JSONL event log: the store keeps every event (`keel runs export` writes a run's lines).");
                        None
                    }
                };
                (MirrorFiles::disabled(mirror_root.to_path_buf()), segments)
            }
            None => {
                connection::ensure_dir(mirror_root)?;
                (
                    MirrorFiles::new(mirror_root.to_path_buf(), OPEN_MIRRORS),
                    None,
                )
            }
        };
        let writer = Writer::start(
            conn,
            db_path.to_path_buf(),
            FinisherParts {
                reader: connection::open_reader(db_path)?,
                mirrors,
                segments,
            },
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                file: connection::FileId::of(db_path),
                db: db_path.to_path_buf(),
                mirror_root: mirror_root.to_path_buf(),
                log: log.map(Path::to_path_buf),
                owner: Owner::current(),
                writer,
                readers,
            }),
        })
    }

    /// Where the JSONL mirror goes: the segments' folder, or none when each run has a file
    /// ([`SqliteStore::events_path`]).
    pub fn log_dir(&self) -> Option<&Path> {
        self.inner.log.as_deref()
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.inner.db
    }

    /// The folder holding one run's mirror.
    pub fn run_dir(&self, id: &RequestId) -> PathBuf {
        self.inner.mirror_root.join(id.as_str())
    }

    /// A run's JSONL mirror, for `tail -f` and export.
    pub fn events_path(&self, id: &RequestId) -> PathBuf {
        mirror::mirror_path(&self.inner.mirror_root, id)
    }

    /// Totals of the group-committing writer since the store was opened.
    pub fn write_stats(&self) -> WriteStats {
        self.inner.writer.stats()
    }

    /// Compares a run's mirror with the store, reading both in full (blocking; from async code
    /// call it in `spawn_blocking`). Never writes.
    ///
    /// [`MirrorStatus::Behind`] is normal while the run is being written and after a crash
    /// (until `recover`/`claim` repair it). A damaged line, an event that differs from the
    /// stored one, or more events than the store has is [`StoreError::Corrupt`] naming
    /// `file:line`; an unknown run is [`StoreError::NotFound`].
    pub fn verify_mirror(&self, id: &RequestId) -> Result<MirrorStatus, StoreError> {
        if self.inner.log.is_some() {
            return Ok(MirrorStatus::Shared);
        }
        let path = self.events_path(id);
        // The mirror first: it is only ever a prefix of what is committed, so reading the
        // store second cannot make a mirror that is merely behind look ahead.
        let contents = mirror::read_mirror(&path)?;
        let db = &self.inner.db;
        let stored = self.inner.readers.with(|conn| {
            if !rows::run_exists(conn, db, id)? {
                return Err(StoreError::NotFound(id.to_string()));
            }
            rows::events(conn, db, id, 0)
        })?;
        for (index, line) in contents.lines.iter().enumerate() {
            let location = format!("{}:{}", path.display(), line.line);
            match stored.get(index) {
                Some(event) if event == &line.event => {}
                Some(event) => {
                    return Err(StoreError::Corrupt {
                        location,
                        message: format!(
                            "event seq {} ({}) differs from the stored event seq {} ({})",
                            line.event.seq, line.event.id, event.seq, event.id
                        ),
                    });
                }
                None => {
                    return Err(StoreError::Corrupt {
                        location,
                        message: format!(
                            "the mirror has more events than the store ({})",
                            stored.len()
                        ),
                    });
                }
            }
        }
        let (mirrored, stored) = (contents.lines.len() as u64, stored.len() as u64);
        Ok(if mirrored == stored && !contents.torn_tail {
            MirrorStatus::InSync { events: stored }
        } else {
            MirrorStatus::Behind {
                mirrored,
                stored,
                torn_tail: contents.torn_tail,
            }
        })
    }

    /// Runs a query on a read connection, on a blocking thread.
    /// A write other than an append, in the writer's next transaction.
    async fn job<T, F>(&self, execute: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Path) -> Result<T, StoreError> + Send + 'static,
    {
        self.inner.writer.job(execute, |_, _| {}).await
    }

    async fn read<T, F>(&self, query: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Path) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || inner.readers.with(|conn| query(conn, &inner.db)))
            .await
            .map_err(|e| StoreError::Io {
                path: self.inner.db.display().to_string(),
                message: format!("a store read task failed: {e}"),
            })?
    }
}

/// Read-only connections, reused. A connection is used by one thread at a time.
struct Readers {
    db: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    fn with<T>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match idle {
            Some(conn) => conn,
            None => connection::open_reader(&self.db)?,
        };
        let result = query(&conn);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < IDLE_READERS
        {
            idle.push(conn);
        }
        result
    }
}

#[async_trait]
impl RunLog for SqliteStore {
    fn log_path(&self, id: &RequestId) -> Option<PathBuf> {
        // A run has a file of its own only with the per-run layout.
        self.inner.log.is_none().then(|| self.events_path(id))
    }

    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let columns = RunColumns::from_record(run)?;
        let owner = self.inner.owner.clone();
        let now = keel_types::now_rfc3339();
        self.inner
            .writer
            .job(
                move |conn, db| writes::insert_run(conn, db, &columns, &owner, &now),
                |id: &RequestId, after| {
                    if let Err(error) = after.mirrors.create(id) {
                        tracing::warn!(request_id = %id, %error, "Cannot create the run's mirror; the store has its events.");
                    }
                },
            )
            .await
            .map(|_| ())
    }

    async fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        match batch::encode(events)? {
            Some(batch) => self.inner.writer.append(batch, RecordWrite::Keep).await,
            None => Ok(()),
        }
    }

    async fn create_run_with(&self, run: &RunRecord, events: &[Event]) -> Result<(), StoreError> {
        keel_types::check_run_of(run, events)?;
        let Some(batch) = batch::encode(events)? else {
            return self.create_run(run).await;
        };
        let new = NewRun {
            columns: RunColumns::from_record(run)?,
            owner: self.inner.owner.clone(),
            now: keel_types::now_rfc3339(),
        };
        let record = RecordWrite::Create(Box::new(new));
        self.inner.writer.append(batch, record).await
    }

    async fn append_and_update(&self, events: &[Event], run: &RunRecord) -> Result<(), StoreError> {
        keel_types::check_run_of(run, events)?;
        let Some(batch) = batch::encode(events)? else {
            return self.update_run(run).await;
        };
        let record = RecordWrite::Replace(Box::new(RunColumns::from_record(run)?));
        self.inner.writer.append(batch, record).await
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let columns = RunColumns::from_record(run)?;
        self.inner
            .writer
            .job(
                move |conn, db| writes::update_run(conn, db, &columns),
                |_, _| {},
            )
            .await
    }

    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        let id = id.clone();
        self.read(move |conn, db| rows::get_run(conn, db, &id))
            .await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn, db| rows::list_runs(conn, db, &filter))
            .await
    }

    async fn run_counts(&self) -> Result<Vec<(keel_types::RunStatus, u64)>, StoreError> {
        self.read(rows::run_counts).await
    }

    async fn started_by_minute(
        &self,
        since: &str,
    ) -> Result<Vec<(String, keel_types::RunStatus, u64)>, StoreError> {
        let since = since.to_owned();
        self.read(move |conn, db| rows::started_by_minute(conn, db, &since))
            .await
    }

    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError> {
        let id = id.clone();
        self.read(move |conn, db| {
            let events = rows::events(conn, db, &id, after)?;
            if events.is_empty() && !rows::run_exists(conn, db, &id)? {
                return Err(StoreError::NotFound(id.to_string()));
            }
            Ok(events)
        })
        .await
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        self.inner
            .writer
            .job(writes::interrupt_orphans, |ids: &Vec<RequestId>, after| {
                for id in ids {
                    tracing::warn!(request_id = %id, "Run interrupted: its process is gone.");
                    after.repair_mirror(id);
                }
            })
            .await
    }

    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError> {
        let id = id.clone();
        let owner = self.inner.owner.clone();
        self.inner
            .writer
            .job(
                move |conn, db| writes::claim_run(conn, db, &id, &owner),
                |run: &RunRecord, after| after.repair_mirror(&run.request_id),
            )
            .await
    }

    async fn prune(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        let ids = self
            .inner
            .writer
            .job(
                move |conn, db| writes::delete_ended_runs(conn, db, &before),
                |ids: &Vec<RequestId>, after| {
                    for id in ids {
                        after.mirrors.forget(id);
                        writes::remove_mirror_dir(after.mirrors.path(id).parent());
                    }
                },
            )
            .await?;
        Ok(ids.len() as u64)
    }

    async fn tool_stats(&self) -> Result<Vec<keel_types::ToolStats>, StoreError> {
        self.read(tasks::tool_stats).await
    }

    /// Checks that the database file at its path is still the one opened (not deleted or
    /// replaced), that a read connection answers, and that the writer commits a write that
    /// changes nothing (the schema version written back, under the write lock).
    async fn health(&self) -> Result<StoreHealth, StoreError> {
        connection::FileId::check(self.inner.file, &self.inner.db)?;
        self.read(connection::schema_version).await?;
        let schema_version = self
            .inner
            .writer
            .job(writes::probe_write, |_, _| {})
            .await?;
        Ok(StoreHealth {
            kind: "sqlite".into(),
            schema_version: Some(schema_version),
            writable: Some(true),
        })
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn ensure_session(
        &self,
        id: &SessionId,
        agent: &str,
        owner: &keel_types::SessionOwner,
    ) -> Result<SessionRecord, StoreError> {
        let (id, agent) = (id.clone(), agent.to_owned());
        let owner = serde_json::to_string(owner).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let now = keel_types::now_rfc3339();
        self.inner
            .writer
            .job(
                move |conn, db| writes::ensure_session(conn, db, &id, &agent, &owner, &now),
                |_, _| {},
            )
            .await
    }

    async fn get_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.clone();
        self.read(move |conn, db| rows::get_session(conn, db, &id))
            .await
    }

    async fn list_sessions(&self, limit: Option<usize>) -> Result<Vec<SessionRecord>, StoreError> {
        self.read(move |conn, db| rows::list_sessions(conn, db, limit))
            .await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        let id = id.clone();
        self.inner
            .writer
            .job(
                move |conn, db| writes::delete_session(conn, db, &id),
                |_, _| {},
            )
            .await
    }

    async fn set_session_summary(
        &self,
        id: &SessionId,
        summary: &keel_types::SessionSummary,
    ) -> Result<bool, StoreError> {
        let id = id.clone();
        let summary = serde_json::to_string(summary).map_err(|e| StoreError::Corrupt {
            location: format!("the summary of session {id}"),
            message: e.to_string(),
        })?;
        self.inner
            .writer
            .job(
                move |conn, db| writes::set_session_summary(conn, db, &id, &summary),
                |_, _| {},
            )
            .await
    }

    async fn session_messages(&self, id: &SessionId) -> Result<Vec<SessionMessage>, StoreError> {
        let id = id.clone();
        self.read(move |conn, db| rows::session_messages(conn, db, &id))
            .await
    }

    async fn append_session_messages(
        &self,
        id: &SessionId,
        request_id: &RequestId,
        messages: &[Message],
    ) -> Result<(), StoreError> {
        let encoded = messages
            .iter()
            .map(|m| serde_json::to_string(m).map_err(|e| StoreError::Invalid(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let (id, request_id) = (id.clone(), request_id.clone());
        let now = keel_types::now_rfc3339();
        self.inner
            .writer
            .job(
                move |conn, db| writes::append_messages(conn, db, &id, &request_id, &encoded, &now),
                |_, _| {},
            )
            .await
    }
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn create_approval(
        &self,
        approval: &keel_types::ApprovalRecord,
    ) -> Result<(), StoreError> {
        let approval = approval.clone();
        self.inner
            .writer
            .job(
                move |conn, db| approvals::create(conn, db, &approval),
                |_, _| {},
            )
            .await
    }

    async fn get_approval(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::ApprovalRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| approvals::get(conn, db, &id))
            .await
    }

    async fn list_approvals(
        &self,
        status: Option<keel_types::ApprovalStatus>,
    ) -> Result<Vec<keel_types::ApprovalRecord>, StoreError> {
        self.read(move |conn, db| approvals::list(conn, db, status))
            .await
    }

    async fn decide_approval(
        &self,
        id: &str,
        status: keel_types::ApprovalStatus,
        scope: keel_types::ApprovalScope,
        decided_by: &str,
        reason: Option<&str>,
    ) -> Result<keel_types::ApprovalRecord, StoreError> {
        let (id, decided_by, reason) = (
            id.to_owned(),
            decided_by.to_owned(),
            reason.map(str::to_owned),
        );
        let now = keel_types::now_rfc3339();
        self.inner
            .writer
            .job(
                move |conn, db| {
                    approvals::decide(
                        conn,
                        db,
                        &id,
                        &approvals::Verdict {
                            status,
                            scope,
                            decided_by: &decided_by,
                            reason: reason.as_deref(),
                            now: &now,
                        },
                    )
                },
                |_, _| {},
            )
            .await
    }
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn put_task(&self, task: &keel_types::TaskRecord) -> Result<(), StoreError> {
        let task = task.clone();
        self.inner
            .writer
            .job(move |conn, db| tasks::put(conn, db, &task), |_, _| {})
            .await
    }

    async fn get_task(&self, id: &str) -> Result<Option<keel_types::TaskRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| tasks::get(conn, db, &id)).await
    }

    async fn list_tasks(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<keel_types::TaskRecord>, StoreError> {
        self.read(move |conn, db| tasks::list(conn, db, limit))
            .await
    }

    async fn delete_task(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.inner
            .writer
            .job(move |conn, db| tasks::delete(conn, db, &id), |_, _| {})
            .await
    }
}

#[async_trait]
impl EvalStore for SqliteStore {
    async fn save_eval_result(
        &self,
        result: &keel_types::eval::EvalResult,
    ) -> Result<(), StoreError> {
        let result = result.clone();
        self.inner
            .writer
            .job(move |conn, db| evals::save(conn, db, &result), |_, _| {})
            .await
    }

    async fn get_eval_result(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::eval::EvalResult>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| evals::get(conn, db, &id)).await
    }

    async fn list_eval_results(
        &self,
        eval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<keel_types::eval::EvalResult>, StoreError> {
        let eval = eval.map(str::to_owned);
        self.read(move |conn, db| evals::list(conn, db, eval.as_deref(), limit))
            .await
    }
}

#[async_trait]
impl SkillCandidateStore for SqliteStore {
    async fn create_skill_candidate(
        &self,
        candidate: &keel_types::SkillCandidate,
    ) -> Result<(), StoreError> {
        let candidate = candidate.clone();
        self.inner
            .writer
            .job(
                move |conn, db| candidates::create(conn, db, &candidate),
                |_, _| {},
            )
            .await
    }

    async fn get_skill_candidate(
        &self,
        id: &str,
    ) -> Result<Option<keel_types::SkillCandidate>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| candidates::get(conn, db, &id))
            .await
    }

    async fn list_skill_candidates(
        &self,
        status: Option<keel_types::CandidateStatus>,
    ) -> Result<Vec<keel_types::SkillCandidate>, StoreError> {
        self.read(move |conn, db| candidates::list(conn, db, status))
            .await
    }

    async fn decide_skill_candidate(
        &self,
        id: &str,
        status: keel_types::CandidateStatus,
        decided_by: &str,
        reason: Option<&str>,
        path: Option<&str>,
    ) -> Result<keel_types::SkillCandidate, StoreError> {
        let Some(mut decided) = self.get_skill_candidate(id).await? else {
            return Err(StoreError::Invalid(format!("no skill candidate `{id}`")));
        };
        decided.status = status;
        decided.decided_by = Some(decided_by.to_owned());
        decided.decided_at = Some(keel_types::now_rfc3339());
        decided.reason = reason.map(str::to_owned);
        decided.path = path.map(str::to_owned);
        self.inner
            .writer
            .job(
                move |conn, db| candidates::decide(conn, db, &decided),
                |_, _| {},
            )
            .await
    }
}
