//! Group commit of appends on PostgreSQL. One task takes the appends queued while its
//! previous transaction ran and stores them all with ONE statement in one transaction (one
//! commit, one WAL flush):
//!
//! 1. `UPDATE runs … FROM unnest(…)` advances `last_seq` of each run whose log the batch
//!    continues, owned by this process's token whose lease has not expired (fencing), and
//!    notifies `keel_events` for it (delivered at commit). A run's last batch brings its final
//!    record ([`Replace`]), written by the same statement: a log that ended never sits beside
//!    a record that says the run is still going;
//! 2. `INSERT INTO runs … FROM unnest(…)` creates the runs whose first batch this is
//!    ([`Create`]: a new run's record with its opening event, so a run costs no transaction
//!    of its own), owned by the same token under the same lease check, and touches their
//!    sessions;
//! 3. `INSERT INTO events … SELECT … FROM unnest(…)` stores the events of the runs steps 1
//!    and 2 accepted — the same snapshot, so a refused batch writes nothing.
//!
//! A statement carries one fencing token and each run at most once: an append of another
//! token (sent before this process lost its lease, or after it registered a new one) or a
//! second append of one run waits for the next round. A batch that was refused is diagnosed
//! after the commit: unknown run, a `seq` that does not continue the log, or a lost lease
//! ([`StoreError::Fenced`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use keel_types::StoreError;
use sqlx_core::row::Row;
use sqlx_postgres::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

use crate::batch::{EncodedBatch, continuity_error};

/// Appends taken into one statement at most.
const MAX_GROUP: usize = 256;
/// Group commits in flight at once: while one waits for its commit (a WAL flush), the other
/// gathers what arrived meanwhile and sends it. Each has its own queue and a run's appends
/// always go to the same one (by a hash of its id), so they are stored in the order they were
/// sent, as with one writer.
const WRITERS: usize = 2;

struct Append {
    batch: EncodedBatch,
    token: i64,
    write: RecordWrite,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// What an append does to its run's row besides advancing its log.
pub(super) enum RecordWrite {
    /// Nothing more: the run goes on.
    Keep,
    /// The run's last batch: its final record.
    Replace(Replace),
    /// The run's first batch: the row is created with it.
    Create(Box<Create>),
}

/// A new run's row, created with its first batch (its columns as the store keeps them).
pub(super) struct Create {
    pub session_id: Option<String>,
    pub agent: String,
    pub status: &'static str,
    pub started_at: String,
    pub owner: Option<String>,
    pub parent_id: Option<String>,
    pub root_id: Option<String>,
    /// The record as JSON text.
    pub record: String,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    commands: AtomicU64,
    events: AtomicU64,
}

/// A run's status and record, replaced when its batch is stored (the other columns of a run
/// do not change once it has started).
pub(super) struct Replace {
    pub status: keel_types::RunStatus,
    /// The record as JSON text.
    pub record: String,
}

/// The handle to the writer task.
pub(super) struct Writer {
    /// One queue per group-commit task.
    txs: Vec<mpsc::UnboundedSender<Append>>,
    counters: Arc<Counters>,
}

impl Writer {
    pub(super) fn start(pool: PgPool, shown: String) -> Self {
        let counters = Arc::new(Counters::default());
        let txs = (0..WRITERS)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(run(pool.clone(), shown.clone(), rx, counters.clone()));
                tx
            })
            .collect();
        Self { txs, counters }
    }

    pub(super) async fn append(
        &self,
        batch: EncodedBatch,
        token: i64,
        write: RecordWrite,
    ) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Io {
            path: "postgres".into(),
            message: "the store's writer task has stopped".into(),
        };
        // A run's appends all go to one task, so they keep their order.
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(batch.request_id.as_str(), &mut hasher);
        let queue = std::hash::Hasher::finish(&hasher) as usize % self.txs.len();
        self.txs[queue]
            .send(Append {
                batch,
                token,
                write,
                reply,
            })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    pub(super) fn stats(&self) -> crate::WriteStats {
        crate::WriteStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            commands: self.counters.commands.load(Ordering::Relaxed),
            events: self.counters.events.load(Ordering::Relaxed),
            checkpoints: 0,
        }
    }
}

async fn run(
    pool: PgPool,
    shown: String,
    mut rx: mpsc::UnboundedReceiver<Append>,
    counters: Arc<Counters>,
) {
    let mut held: Option<Append> = None;
    loop {
        let first = match held.take() {
            Some(first) => first,
            None => match rx.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let token = first.token;
        let mut group = vec![first];
        let mut runs: HashSet<String> = HashSet::from([group[0].batch.request_id.0.clone()]);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(next) => {
                    // One token per statement (appends sent before this process lost its
                    // lease and after it registered a new one can wait side by side), and
                    // one run once per statement: keep the append for the next round.
                    if next.token != token || !runs.insert(next.batch.request_id.0.clone()) {
                        held = Some(next);
                        break;
                    }
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        match commit(&pool, &group).await {
            Ok(accepted) => {
                // What was stored: a refused append counts for nothing.
                let stored = group
                    .iter()
                    .filter(|a| accepted.contains(&a.batch.request_id.0));
                let (commands, events) = stored.fold((0, 0), |(commands, events), append| {
                    (commands + 1, events + append.batch.events.len() as u64)
                });
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters.commands.fetch_add(commands, Ordering::Relaxed);
                counters.events.fetch_add(events, Ordering::Relaxed);
                for append in group {
                    let result = match accepted.contains(&append.batch.request_id.0) {
                        true => Ok(()),
                        false => Err(diagnose(&pool, &shown, &append).await),
                    };
                    let _ = append.reply.send(result);
                }
            }
            Err(error) => {
                let error = super::db_error(&shown, &error);
                for append in group {
                    let _ = append.reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Stores the group; returns the runs whose batches were accepted.
async fn commit(pool: &PgPool, group: &[Append]) -> Result<HashSet<String>, sqlx_core::Error> {
    let token = group[0].token;
    // Runs that go on (or end): their rows advance.
    let (mut run_ids, mut firsts, mut lasts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut statuses, mut records) = (Vec::new(), Vec::new());
    // Runs that start: their rows are created.
    let mut new = NewRows::default();
    let (mut ids, mut seqs, mut types, mut bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for append in group {
        let batch = &append.batch;
        match &append.write {
            RecordWrite::Create(create) => new.push(batch, create),
            write => {
                let replace = match write {
                    RecordWrite::Replace(replace) => Some(replace),
                    _ => None,
                };
                run_ids.push(batch.request_id.0.as_str());
                firsts.push(batch.first_seq() as i64);
                lasts.push(batch.last_seq() as i64);
                statuses.push(replace.map(|r| r.status.as_str()));
                records.push(replace.map(|r| r.record.as_str()));
            }
        }
        for event in &batch.events {
            ids.push(batch.request_id.0.as_str());
            seqs.push(event.seq as i64);
            types.push(event.type_name);
            bodies.push(event.body.as_str());
        }
    }
    // Every append of a group carries the same token (`run` groups them so).
    let mut tx = pool.begin().await?;
    let rows = sqlx_core::query::query::<Postgres>(
        "WITH batch AS (\
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $9::text[], $10::text[]) \
             AS b(request_id, first_seq, last_seq, status, record)\
         ), lease AS (\
           SELECT EXISTS (SELECT 1 FROM leases l WHERE l.token = $4 \
             AND l.expires_at > clock_timestamp()) AS valid\
         ), accepted AS (\
           UPDATE runs r SET last_seq = b.last_seq, status = COALESCE(b.status, r.status), \
             record = COALESCE(b.record, r.record), \
             owner_token = CASE WHEN b.status IN ('completed', 'failed', 'cancelled') THEN NULL \
               ELSE r.owner_token END FROM batch b \
           WHERE r.request_id = b.request_id AND r.last_seq = b.first_seq - 1 \
             AND r.owner_token = $4 AND (SELECT valid FROM lease) \
           RETURNING r.request_id, b.last_seq, pg_notify('keel', 'appended ' || r.request_id || ' ' || b.last_seq) \
         ), created AS (\
           INSERT INTO runs (request_id, session_id, agent, status, started_at, owner, parent_id, \
             root_id, record, owner_token, last_seq) \
           SELECT c.request_id, c.session_id, c.agent, c.status, c.started_at, c.owner, \
             c.parent_id, c.root_id, c.record, $4, c.last_seq \
           FROM unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], \
             $16::text[], $17::text[], $18::text[], $19::text[], $20::bigint[]) \
             AS c(request_id, session_id, agent, status, started_at, owner, parent_id, root_id, \
               record, last_seq) \
           WHERE (SELECT valid FROM lease) \
           ON CONFLICT (request_id) DO NOTHING \
           RETURNING request_id, session_id, \
             pg_notify('keel', 'appended ' || request_id || ' ' || last_seq)\
         ), touched AS (\
           UPDATE sessions s SET updated_at = $21 \
           FROM (SELECT DISTINCT session_id FROM created WHERE session_id IS NOT NULL) c \
           WHERE s.id = c.session_id AND s.updated_at < $21 RETURNING 1\
         ), stored AS (\
           INSERT INTO events (request_id, seq, type, body) \
           SELECT e.request_id, e.seq, e.type, e.body \
           FROM unnest($5::text[], $6::bigint[], $7::text[], $8::text[]) AS e(request_id, seq, type, body) \
           WHERE e.request_id IN (SELECT request_id FROM accepted \
             UNION ALL SELECT request_id FROM created) \
           RETURNING 1\
         ) SELECT request_id FROM accepted UNION ALL SELECT request_id FROM created",
    )
    .bind(&run_ids)
    .bind(&firsts)
    .bind(&lasts)
    .bind(token)
    .bind(&ids)
    .bind(&seqs)
    .bind(&types)
    .bind(&bodies)
    .bind(&statuses)
    .bind(&records)
    .bind(&new.ids)
    .bind(&new.sessions)
    .bind(&new.agents)
    .bind(&new.statuses)
    .bind(&new.started)
    .bind(&new.owners)
    .bind(&new.parents)
    .bind(&new.roots)
    .bind(&new.records)
    .bind(&new.lasts)
    .bind(keel_types::now_rfc3339())
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.iter().map(|row| row.try_get::<String, _>(0)).collect()
}

/// The columns of the runs a group creates, one array each (bound to `unnest`).
#[derive(Default)]
struct NewRows<'a> {
    ids: Vec<&'a str>,
    sessions: Vec<Option<&'a str>>,
    agents: Vec<&'a str>,
    statuses: Vec<&'a str>,
    started: Vec<&'a str>,
    owners: Vec<Option<&'a str>>,
    parents: Vec<Option<&'a str>>,
    roots: Vec<Option<&'a str>>,
    records: Vec<&'a str>,
    lasts: Vec<i64>,
}

impl<'a> NewRows<'a> {
    fn push(&mut self, batch: &'a EncodedBatch, create: &'a Create) {
        self.ids.push(batch.request_id.0.as_str());
        self.sessions.push(create.session_id.as_deref());
        self.agents.push(&create.agent);
        self.statuses.push(create.status);
        self.started.push(&create.started_at);
        self.owners.push(create.owner.as_deref());
        self.parents.push(create.parent_id.as_deref());
        self.roots.push(create.root_id.as_deref());
        self.records.push(&create.record);
        self.lasts.push(batch.last_seq() as i64);
    }
}

/// Why a batch was refused.
async fn diagnose(pool: &PgPool, shown: &str, append: &Append) -> StoreError {
    let id = &append.batch.request_id;
    if let RecordWrite::Create(_) = append.write {
        return diagnose_create(pool, shown, append).await;
    }
    let row = sqlx_core::query::query::<Postgres>(
        "SELECT r.last_seq, r.owner_token, \
         EXISTS (SELECT 1 FROM leases l WHERE l.token = $2 AND l.expires_at > clock_timestamp()) \
         FROM runs r WHERE r.request_id = $1",
    )
    .bind(id.as_str())
    .bind(append.token)
    .fetch_optional(pool)
    .await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => return StoreError::NotFound(id.to_string()),
        Err(error) => return super::db_error(shown, &error),
    };
    let last: i64 = row.try_get(0).unwrap_or_default();
    let owner: Option<i64> = row.try_get(1).unwrap_or_default();
    let lease_valid: bool = row.try_get(2).unwrap_or_default();
    if owner.is_none() {
        return StoreError::Fenced(format!(
            "run `{id}` has ended or is queued; it takes no more events"
        ));
    }
    if owner != Some(append.token) {
        return StoreError::Fenced(format!(
            "run `{id}` is not owned by this process's lease (token {}); another process took it over",
            append.token
        ));
    }
    if !lease_valid {
        return StoreError::Fenced(format!(
            "this process's lease (token {}) expired; run `{id}` may be taken over",
            append.token
        ));
    }
    continuity_error(&append.batch, u64::try_from(last).unwrap_or(0) + 1)
}

/// Why a new run's first batch was refused: the run exists, or the lease has expired.
async fn diagnose_create(pool: &PgPool, shown: &str, append: &Append) -> StoreError {
    let id = &append.batch.request_id;
    let row = sqlx_core::query::query::<Postgres>(
        "SELECT EXISTS (SELECT 1 FROM runs WHERE request_id = $1)",
    )
    .bind(id.as_str())
    .fetch_one(pool)
    .await;
    match row.map(|row| row.try_get::<bool, _>(0).unwrap_or_default()) {
        Ok(true) => StoreError::Invalid(format!("run `{id}` already exists")),
        Ok(false) => StoreError::Fenced(format!(
            "this process's lease (token {}) expired before run `{id}` was created",
            append.token
        )),
        Err(error) => super::db_error(shown, &error),
    }
}
