//! The writer thread and its group commit — the heart of the SQLite store.
//!
//! One thread owns the write connection. Callers send it [`Command`]s over a channel and wait
//! on a oneshot reply. The writer blocks for the first command, drains whatever else is queued
//! (up to [`MAX_COMMANDS`] commands or about [`MAX_EVENTS`] events), and runs them all in ONE
//! `BEGIN IMMEDIATE` transaction (when eight or more were waiting, it first waits a quarter
//! of a millisecond for more: [`COMMIT_DELAY`]). A command that fails (a `seq` gap, an
//! unknown run) fails alone and the rest of the batch commits: an append checks everything
//! that can refuse it before its first write (and a failure after that — an I/O error —
//! rolls the whole batch back), any other write runs in its own `SAVEPOINT`.
//! One commit, one WAL sync, for the whole batch.
//!
//! The same thread then finishes the committed — so durable (`synchronous = FULL`) — batch:
//! it writes the JSONL mirror lines of its committed events (one `write` to the shared log, or
//! one per run with the per-run layout), runs the jobs' follow-ups and only then replies to
//! every caller. (A separate finisher thread used to do this while the writer ran the next
//! batch; the hand-off cost a thread wake-up per commit, more than the overlap saved: the
//! mirror write is one buffered `write`, the sync is the commit's.)
//!
//! The writer also checkpoints the WAL itself, replacing SQLite's automatic checkpoint (which
//! ran inside whichever commit crossed the size, holding up every caller of that batch and
//! every batch queued behind it): when it has had nothing to do for [`QUIET`] with at least
//! [`QUIET_CHECKPOINT_PAGES`] in the WAL, and — so the WAL stays bounded under endless load —
//! after answering a batch that left [`CHECKPOINT_PAGES`] or more. A checkpoint only copies
//! committed pages into the database file; it changes nothing about what a commit promises.
//!
//! So an event is durable, and mirrored, before any caller — and therefore any subscriber —
//! sees it, without a sync per event. If the transaction itself is lost (the commit fails,
//! SQLite rolls it back after an I/O error, or another process holds the lock for longer than
//! the busy timeout), every command of the batch gets the error and nothing is mirrored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use keel_types::{RequestId, StoreError};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::connection::{CHECKPOINT_PAGES, sql_error};
use super::rows::{self, RunColumns};
use super::writes;
use crate::batch::{self, EncodedBatch};
use crate::mirror::{MirrorFiles, StoredLine};
use crate::owner::Owner;
use crate::segments::Segments;

/// At most this many commands share one transaction.
pub(crate) const MAX_COMMANDS: usize = 512;
/// A batch stops taking commands once it holds this many events.
pub(crate) const MAX_EVENTS: usize = 4096;
/// A batch that found this many commands waiting waits [`COMMIT_DELAY`] for more before it
/// commits (PostgreSQL's `commit_siblings` and `commit_delay`): under load, a fraction of a
/// sync's time buys batches several times larger, so fewer syncs and fewer wake-ups per
/// event; a lone writer never waits.
const BUSY: usize = 8;
/// How long a busy batch waits for more commands.
const COMMIT_DELAY: Duration = Duration::from_micros(250);
/// How long the writer must have had nothing to do before it checkpoints a WAL of at least
/// [`QUIET_CHECKPOINT_PAGES`].
const QUIET: Duration = Duration::from_millis(100);
/// The WAL pages (4 KiB each) worth a checkpoint in a quiet moment.
const QUIET_CHECKPOINT_PAGES: u32 = 256;

/// What the writer thread is asked to do.
pub(crate) enum Command {
    /// The hot path: events of one run, with its record written in the same step when the
    /// batch starts or ends the run.
    Append {
        batch: EncodedBatch,
        record: RecordWrite,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Anything else (run records, sessions, recovery, pruning).
    Job(Box<dyn Job>),
}

/// What an append does to the run's record, in the same transaction as its events.
pub(crate) enum RecordWrite {
    /// Nothing: the record exists.
    Keep,
    /// Inserts the record (owned by this process) before the events: a new run's first write.
    Create(Box<NewRun>),
    /// Replaces the record after the events: a run's last write.
    Replace(Box<RunColumns>),
}

/// A run to insert: its columns, its owner, and the time that touches its session.
pub(crate) struct NewRun {
    pub columns: RunColumns,
    pub owner: Owner,
    pub now: String,
}

impl Command {
    fn event_count(&self) -> usize {
        match self {
            Self::Append { batch, .. } => batch.events.len(),
            Self::Job(_) => 1,
        }
    }
}

/// A write other than an append: a step inside the batch transaction, and a step after the
/// batch committed (or failed) that replies.
pub(crate) trait Job: Send {
    /// Runs inside the batch transaction, within the job's own savepoint.
    fn execute(&mut self, conn: &Connection, db: &Path) -> Result<(), StoreError>;
    /// Runs after the commit (with `Ok`) or after a failure; does the job's follow-up work
    /// (mirror files) on success and sends the reply.
    fn finish(self: Box<Self>, outcome: Result<(), StoreError>, after: &mut After<'_>);
}

/// What a job's follow-up step may use, after the commit: a read connection (it sees every
/// committed batch) and the mirrors.
pub(crate) struct After<'a> {
    pub conn: &'a Connection,
    pub db: &'a Path,
    pub mirrors: &'a mut MirrorFiles,
}

impl After<'_> {
    /// Repairs a run's mirror from the store, logging (not failing) when it cannot.
    pub(crate) fn repair_mirror(&mut self, id: &RequestId) {
        let (conn, db) = (self.conn, self.db);
        let mut fetch =
            |id: &RequestId, after: u64, up_to: u64| rows::stored_lines(conn, db, id, after, up_to);
        match self.mirrors.repair(id, &mut fetch) {
            Ok(0) => {}
            Ok(added) => {
                tracing::info!(request_id = %id, added, "Mirror repaired from the store.");
            }
            Err(error) => {
                tracing::warn!(request_id = %id, %error, "Mirror left as it is; the store keeps the events.");
            }
        }
    }
}

/// A job made of two closures: `execute` returns the value, `after` does the follow-up.
struct FnJob<T, E, A> {
    execute: Option<E>,
    after: Option<A>,
    value: Option<T>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, E, A> Job for FnJob<T, E, A>
where
    T: Send,
    E: FnOnce(&Connection, &Path) -> Result<T, StoreError> + Send,
    A: FnOnce(&T, &mut After<'_>) + Send,
{
    fn execute(&mut self, conn: &Connection, db: &Path) -> Result<(), StoreError> {
        let execute = self
            .execute
            .take()
            .ok_or_else(|| StoreError::Invalid("a store job ran twice".into()))?;
        self.value = Some(execute(conn, db)?);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: Result<(), StoreError>, after: &mut After<'_>) {
        let this = *self;
        let result = match (outcome, this.value) {
            (Ok(()), Some(value)) => {
                if let Some(follow_up) = this.after {
                    follow_up(&value, after);
                }
                Ok(value)
            }
            (Ok(()), None) => Err(StoreError::Invalid("a store job never ran".into())),
            (Err(error), _) => Err(error),
        };
        let _ = this.reply.send(result);
    }
}

/// Totals of the writer thread since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed (each one WAL sync).
    pub commits: u64,
    /// Commands (appends and other writes) committed.
    pub commands: u64,
    /// Events committed.
    pub events: u64,
    /// WAL checkpoints the writer ran (SQLite only), in quiet moments or at a full WAL.
    pub checkpoints: u64,
}

#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    commands: AtomicU64,
    events: AtomicU64,
    checkpoints: AtomicU64,
    /// Pages in the WAL after the last commit, as SQLite's WAL hook reports them (0 after a
    /// checkpoint until the next commit).
    wal_pages: AtomicU32,
}

/// The handle on the writer thread. Dropping it lets it finish its queue and stop.
pub(crate) struct Writer {
    tx: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    db: PathBuf,
}

/// What finishing a batch needs: a read connection (to fill mirror gaps from the store) and
/// the mirrors.
pub(crate) struct FinisherParts {
    pub reader: Connection,
    pub mirrors: MirrorFiles,
    /// The shared segments, when the store mirrors into them (then `mirrors` is disabled).
    pub segments: Option<Segments>,
}

impl Writer {
    /// Starts the writer thread on an open write connection.
    pub(crate) fn start(
        mut conn: Connection,
        db: PathBuf,
        parts: FinisherParts,
    ) -> Result<Self, StoreError> {
        let (tx, rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        // The hook replaces SQLite's automatic checkpoint: the writer checkpoints (`run`).
        let pages = Arc::clone(&counters);
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, wal_pages: i32| {
            let wal_pages = u32::try_from(wal_pages).unwrap_or(0);
            pages.wal_pages.store(wal_pages, Ordering::Relaxed);
            Ok(())
        }))
        .map_err(|e| sql_error(&db, &e))?;
        let finisher = Finisher {
            reader: parts.reader,
            db: db.clone(),
            mirrors: parts.mirrors,
            segments: parts.segments,
        };
        let writer = WriterThread {
            conn,
            db: db.clone(),
            counters: Arc::clone(&counters),
            finisher,
        };
        let thread = std::thread::Builder::new()
            .name("keel-store-writer".into())
            .spawn(move || writer.run(&rx))
            .map_err(|e| StoreError::Io {
                path: db.display().to_string(),
                message: format!("cannot start the store's writer thread: {e}"),
            })?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            counters,
            db,
        })
    }

    /// Appends a checked batch (and writes the run's record with it); returns once it is
    /// committed, durable and mirrored.
    pub(crate) async fn append(
        &self,
        batch: EncodedBatch,
        record: RecordWrite,
    ) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Append {
            batch,
            record,
            reply,
        })?;
        answer.await.map_err(|_| self.stopped())?
    }

    /// Runs `execute` in a batch transaction and, once durable, `after`; returns `execute`'s
    /// value.
    pub(crate) async fn job<T, E, A>(&self, execute: E, after: A) -> Result<T, StoreError>
    where
        T: Send + 'static,
        E: FnOnce(&Connection, &Path) -> Result<T, StoreError> + Send + 'static,
        A: FnOnce(&T, &mut After<'_>) + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Job(Box::new(FnJob {
            execute: Some(execute),
            after: Some(after),
            value: None,
            reply,
        })))?;
        answer.await.map_err(|_| self.stopped())?
    }

    /// The writer's totals.
    pub(crate) fn stats(&self) -> WriteStats {
        WriteStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            commands: self.counters.commands.load(Ordering::Relaxed),
            events: self.counters.events.load(Ordering::Relaxed),
            checkpoints: self.counters.checkpoints.load(Ordering::Relaxed),
        }
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        self.tx
            .as_ref()
            .ok_or_else(|| self.stopped())?
            .send(command)
            .map_err(|_| self.stopped())
    }

    fn stopped(&self) -> StoreError {
        StoreError::Io {
            path: self.db.display().to_string(),
            message: "the store's writer thread stopped".into(),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the channel ends the writer once it has written (and answered) what was
        // queued; joining means the database is closed (and its WAL checkpointed) when the
        // store is gone.
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A batch the writer committed (or failed), to be finished.
struct Committed {
    commands: Vec<Command>,
    outcomes: Vec<Result<(), StoreError>>,
}

struct WriterThread {
    conn: Connection,
    db: PathBuf,
    counters: Arc<Counters>,
    finisher: Finisher,
}

impl WriterThread {
    fn run(mut self, rx: &mpsc::Receiver<Command>) {
        while let Some(first) = self.next_command(rx) {
            let mut commands = Vec::with_capacity(64);
            let mut events = first.event_count();
            commands.push(first);
            let mut drain = |commands: &mut Vec<Command>| {
                while commands.len() < MAX_COMMANDS && events < MAX_EVENTS {
                    match rx.try_recv() {
                        Ok(command) => {
                            events += command.event_count();
                            commands.push(command);
                        }
                        Err(_) => break,
                    }
                }
            };
            drain(&mut commands);
            if (BUSY..MAX_COMMANDS).contains(&commands.len()) {
                // A busy store: let the writers that are about to send join this commit.
                std::thread::sleep(COMMIT_DELAY);
                drain(&mut commands);
            }
            let outcomes = self.execute_all(&mut commands);
            self.count(&commands, &outcomes);
            self.finisher.finish(Committed { commands, outcomes });
            // After the answers: the next batch waits for the checkpoint, this one did not.
            if self.wal_pages() >= CHECKPOINT_PAGES {
                self.checkpoint();
            }
        }
        tracing::debug!(path = %self.db.display(), "Store writer stopped.");
    }

    /// Waits for the next command (`None` once every sender is gone). A WAL worth folding back
    /// is checkpointed if no command comes for [`QUIET`].
    fn next_command(&self, rx: &mpsc::Receiver<Command>) -> Option<Command> {
        if self.wal_pages() >= QUIET_CHECKPOINT_PAGES {
            match rx.recv_timeout(QUIET) {
                Ok(command) => return Some(command),
                Err(mpsc::RecvTimeoutError::Timeout) => self.checkpoint(),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
        rx.recv().ok()
    }

    fn wal_pages(&self) -> u32 {
        self.counters.wal_pages.load(Ordering::Relaxed)
    }

    /// Copies the WAL's committed pages into the database file, as far as no reader's snapshot
    /// needs them (`PASSIVE`: it never waits); SQLite starts the WAL over at the next commit
    /// once all of it is copied.
    fn checkpoint(&self) {
        match self.conn.wal_checkpoint_v2(
            Some(rusqlite::MAIN_DB),
            rusqlite::wal::CheckpointMode::PASSIVE,
        ) {
            Ok((frames, copied)) => {
                self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(path = %self.db.display(), frames, copied, "Checkpointed the WAL.");
            }
            Err(e) => {
                let error = sql_error(&self.db, &e);
                tracing::warn!(%error, "Could not checkpoint the WAL; a later quiet moment or full WAL retries.");
            }
        }
        self.counters.wal_pages.store(0, Ordering::Relaxed);
    }

    fn count(&self, commands: &[Command], outcomes: &[Result<(), StoreError>]) {
        let mut committed = 0;
        let mut events = 0;
        for (command, outcome) in commands.iter().zip(outcomes) {
            if outcome.is_ok() {
                committed += 1;
                if let Command::Append { batch, .. } = command {
                    events += batch.events.len() as u64;
                }
            }
        }
        if committed > 0 {
            self.counters.commits.fetch_add(1, Ordering::Relaxed);
            self.counters
                .commands
                .fetch_add(committed, Ordering::Relaxed);
            self.counters.events.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// Runs every command in one transaction and commits. Appends of one event need no
    /// savepoint (a failed single INSERT undoes itself); anything larger runs in its own, so
    /// a command's failure fails only that command. A lost transaction fails them all.
    fn execute_all(&self, batch: &mut [Command]) -> Vec<Result<(), StoreError>> {
        let (conn, db) = (&self.conn, self.db.as_path());
        let count = batch.len();
        let all_fail = |error: StoreError| vec![Err(error); count];
        if let Err(e) = run(conn, "BEGIN IMMEDIATE") {
            return all_fail(sql_error(db, &e));
        }
        let mut outcomes = Vec::with_capacity(count);
        for command in batch.iter_mut() {
            let outcome = match command {
                // No savepoint: everything that can refuse an append is checked before its
                // first write, and a failure after that ends the whole batch (below).
                Command::Append { batch, record, .. } => {
                    match execute_append(conn, db, batch, record) {
                        Ok(()) => Ok(()),
                        Err(Step::Refused(error)) => Err(error),
                        Err(Step::Broken(error)) => {
                            tracing::warn!(path = %db.display(), %error, "A write failed part-way; the batch is rolled back.");
                            if !conn.is_autocommit() {
                                let _ = run(conn, "ROLLBACK");
                            }
                            return all_fail(StoreError::Io {
                                path: db.display().to_string(),
                                message: format!("the batch was rolled back: {error}"),
                            });
                        }
                    }
                }
                Command::Job(job) => in_savepoint(conn, db, |conn| job.execute(conn, db)),
            };
            if let Err(error) = &outcome
                && conn.is_autocommit()
            {
                // SQLite rolled the whole transaction back (I/O error, disk full…): nothing
                // of this batch is stored, and later commands must not run outside it.
                return all_fail(StoreError::Io {
                    path: db.display().to_string(),
                    message: format!("the batch was rolled back: {error}"),
                });
            }
            outcomes.push(outcome);
        }
        match run(conn, "COMMIT") {
            Ok(()) => outcomes,
            Err(e) => {
                let error = sql_error(db, &e);
                tracing::warn!(path = %db.display(), %error, "Store commit failed; the batch is lost.");
                if !conn.is_autocommit() {
                    let _ = run(conn, "ROLLBACK");
                }
                all_fail(error)
            }
        }
    }
}

/// What follows a commit: writes the mirror lines of the committed batch, runs the jobs'
/// follow-ups and answers the callers.
struct Finisher {
    reader: Connection,
    db: PathBuf,
    mirrors: MirrorFiles,
    segments: Option<Segments>,
}

/// The events of one run committed in the batches at hand, ready for its mirror.
struct MirrorBatch {
    first_seq: u64,
    last_seq: u64,
    lines: Vec<u8>,
    terminal: bool,
}

impl Finisher {
    fn finish(&mut self, batch: Committed) {
        self.write_mirrors(&batch);
        self.answer(batch);
    }

    /// Writes the committed events to the shared segments (one write, in commit order) or to
    /// their runs' mirrors (one write per run).
    fn write_mirrors(&mut self, batch: &Committed) {
        let committed = batch.commands.iter().zip(&batch.outcomes);
        if let Some(segments) = &mut self.segments {
            let size = committed
                .clone()
                .filter_map(|(command, outcome)| match (command, outcome) {
                    (Command::Append { batch, .. }, Ok(())) => Some(batch.bytes()),
                    _ => None,
                })
                .sum();
            let mut lines = Vec::with_capacity(size);
            for (command, outcome) in committed {
                if let (Command::Append { batch, .. }, Ok(())) = (command, outcome) {
                    for event in &batch.events {
                        lines.extend_from_slice(event.body.as_bytes());
                        lines.push(b'\n');
                    }
                }
            }
            if let Err(error) = segments.append(&lines) {
                // Writing on could leave a gap; the next start repairs the log from the store.
                tracing::error!(path = %segments.current().display(), %error, "The event log stopped: the store keeps every event, and the log is repaired from it at the next start.");
                self.segments = None;
            }
            return;
        }
        let mut order: Vec<&RequestId> = Vec::new();
        let mut runs: HashMap<&RequestId, MirrorBatch> = HashMap::new();
        for (command, outcome) in committed {
            let (Command::Append { batch, record, .. }, Ok(())) = (command, outcome) else {
                continue;
            };
            if let RecordWrite::Create(_) = record
                && let Err(error) = self.mirrors.create(&batch.request_id)
            {
                tracing::warn!(request_id = %batch.request_id, %error, "Cannot create the run's mirror; the store has its events.");
            }
            let entry = runs.entry(&batch.request_id).or_insert_with(|| {
                order.push(&batch.request_id);
                MirrorBatch {
                    first_seq: batch.first_seq(),
                    last_seq: 0,
                    lines: Vec::new(),
                    terminal: false,
                }
            });
            for event in &batch.events {
                entry.lines.extend_from_slice(event.body.as_bytes());
                entry.lines.push(b'\n');
            }
            entry.last_seq = batch.last_seq();
            entry.terminal |= batch.terminal;
        }
        let (conn, db) = (&self.reader, self.db.as_path());
        let mut fetch = |id: &RequestId, after: u64, up_to: u64| -> Result<Vec<StoredLine>, _> {
            rows::stored_lines(conn, db, id, after, up_to)
        };
        for id in order {
            let Some(run) = runs.get(id) else { continue };
            self.mirrors
                .append(id, run.first_seq, run.last_seq, &run.lines, &mut fetch);
            if run.terminal {
                self.mirrors.close(id);
            }
        }
    }

    /// Runs the jobs' follow-ups, then answers every caller.
    fn answer(&mut self, batch: Committed) {
        let mut after = After {
            conn: &self.reader,
            db: &self.db,
            mirrors: &mut self.mirrors,
        };
        let mut replies = Vec::new();
        for (command, outcome) in batch.commands.into_iter().zip(batch.outcomes) {
            match command {
                Command::Job(job) => job.finish(outcome, &mut after),
                Command::Append { reply, .. } => replies.push((reply, outcome)),
            }
        }
        for (reply, outcome) in replies {
            // A caller that stopped waiting (its task was dropped) is no error.
            let _ = reply.send(outcome);
        }
    }
}

/// How an append failed: refused before anything was written (the command fails alone), or
/// broken part-way (the batch must be rolled back).
enum Step {
    Refused(StoreError),
    Broken(StoreError),
}

/// Checks that a batch continues the run's stored log (or, with its record, starts a new
/// run), then writes the record and the events. Nothing is written unless every check passed.
fn execute_append(
    conn: &Connection,
    db: &Path,
    batch: &EncodedBatch,
    record: &RecordWrite,
) -> Result<(), Step> {
    if let RecordWrite::Create(new) = record {
        if rows::run_exists(conn, db, &batch.request_id).map_err(Step::Refused)? {
            return Err(Step::Refused(StoreError::Invalid(format!(
                "run `{}` already exists",
                batch.request_id
            ))));
        }
        if batch.first_seq() != 1 {
            return Err(Step::Refused(batch::continuity_error(batch, 1)));
        }
        writes::write_run(conn, db, &new.columns, &new.owner, &new.now).map_err(Step::Broken)?;
    } else {
        check_continuity(conn, db, batch).map_err(Step::Refused)?;
    }
    insert_events(conn, db, batch).map_err(Step::Broken)?;
    if let RecordWrite::Replace(columns) = record {
        writes::update_run(conn, db, columns).map_err(Step::Broken)?;
    }
    Ok(())
}

/// Checks that a batch continues its run's stored log.
fn check_continuity(conn: &Connection, db: &Path, batch: &EncodedBatch) -> Result<(), StoreError> {
    let id = batch.request_id.as_str();
    let last: Option<u64> = conn
        .prepare_cached("SELECT seq FROM events WHERE request_id = ?1 ORDER BY seq DESC LIMIT 1")
        .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
        .map_err(|e| sql_error(db, &e))?;
    if last.is_none() && !rows::run_exists(conn, db, &batch.request_id)? {
        return Err(StoreError::NotFound(id.to_owned()));
    }
    let expected = last.unwrap_or(0) + 1;
    if batch.first_seq() != expected {
        return Err(batch::continuity_error(batch, expected));
    }
    Ok(())
}

/// Inserts a checked batch's events.
fn insert_events(conn: &Connection, db: &Path, batch: &EncodedBatch) -> Result<(), StoreError> {
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO events (request_id, seq, id, type, ts, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(|e| sql_error(db, &e))?;
    for event in &batch.events {
        insert
            .execute(params![
                batch.request_id.as_str(),
                event.seq,
                event.id,
                event.type_name,
                event.ts,
                event.body
            ])
            .map_err(|e| sql_error(db, &e))?;
    }
    Ok(())
}

/// Runs `f` inside a savepoint: released on success, rolled back (alone) on failure.
fn in_savepoint(
    conn: &Connection,
    db: &Path,
    f: impl FnOnce(&Connection) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    run(conn, "SAVEPOINT command").map_err(|e| sql_error(db, &e))?;
    match f(conn) {
        Ok(()) => run(conn, "RELEASE command").map_err(|e| sql_error(db, &e)),
        Err(error) => {
            if !conn.is_autocommit() {
                let _ = run(conn, "ROLLBACK TO command");
                let _ = run(conn, "RELEASE command");
            }
            Err(error)
        }
    }
}

/// Runs a statement without parameters through the statement cache.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}
