//! Group commit of appends on PostgreSQL. One task takes the appends queued while its
//! previous transaction ran and stores them all with ONE statement in one transaction (one
//! commit, one WAL flush):
//!
//! 1. `UPDATE runs … FROM unnest(…)` advances `last_seq` of each run whose log the batch
//!    continues, owned by this process's token whose lease has not expired (fencing), and
//!    notifies `keel_events` for it (delivered at commit). A run's last batch brings its final
//!    record ([`Replace`]), written by the same statement: a log that ended never sits beside
//!    a record that says the run is still going;
//! 2. `INSERT INTO events … SELECT … FROM unnest(…)` stores the events of the runs step 1
//!    accepted — the same snapshot, so a refused batch writes nothing.
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

struct Append {
    batch: EncodedBatch,
    token: i64,
    replace: Option<Replace>,
    reply: oneshot::Sender<Result<(), StoreError>>,
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
    tx: mpsc::UnboundedSender<Append>,
    counters: Arc<Counters>,
}

impl Writer {
    pub(super) fn start(pool: PgPool, shown: String) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        tokio::spawn(run(pool, shown, rx, counters.clone()));
        Self { tx, counters }
    }

    pub(super) async fn append(
        &self,
        batch: EncodedBatch,
        token: i64,
        replace: Option<Replace>,
    ) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Io {
            path: "postgres".into(),
            message: "the store's writer task has stopped".into(),
        };
        self.tx
            .send(Append {
                batch,
                token,
                replace,
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
    let mut run_ids = Vec::with_capacity(group.len());
    let mut firsts = Vec::with_capacity(group.len());
    let mut lasts = Vec::with_capacity(group.len());
    let mut statuses = Vec::with_capacity(group.len());
    let mut records = Vec::with_capacity(group.len());
    let (mut ids, mut seqs, mut types, mut bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for append in group {
        let batch = &append.batch;
        run_ids.push(batch.request_id.0.as_str());
        firsts.push(batch.first_seq() as i64);
        lasts.push(batch.last_seq() as i64);
        statuses.push(append.replace.as_ref().map(|r| r.status.as_str()));
        records.push(append.replace.as_ref().map(|r| r.record.as_str()));
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
         ), accepted AS (\
           UPDATE runs r SET last_seq = b.last_seq, status = COALESCE(b.status, r.status), \
             record = COALESCE(b.record, r.record), \
             owner_token = CASE WHEN b.status IN ('completed', 'failed', 'cancelled') THEN NULL \
               ELSE r.owner_token END FROM batch b \
           WHERE r.request_id = b.request_id AND r.last_seq = b.first_seq - 1 \
             AND r.owner_token = $4 \
             AND EXISTS (SELECT 1 FROM leases l WHERE l.token = $4 AND l.expires_at > clock_timestamp()) \
           RETURNING r.request_id, b.last_seq, pg_notify('keel', 'appended ' || r.request_id || ' ' || b.last_seq) \
         ), stored AS (\
           INSERT INTO events (request_id, seq, type, body) \
           SELECT e.request_id, e.seq, e.type, e.body \
           FROM unnest($5::text[], $6::bigint[], $7::text[], $8::text[]) AS e(request_id, seq, type, body) \
           WHERE e.request_id IN (SELECT request_id FROM accepted) \
           RETURNING 1\
         ) SELECT request_id FROM accepted",
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
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.iter().map(|row| row.try_get::<String, _>(0)).collect()
}

/// Why a batch was refused.
async fn diagnose(pool: &PgPool, shown: &str, append: &Append) -> StoreError {
    let id = &append.batch.request_id;
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
