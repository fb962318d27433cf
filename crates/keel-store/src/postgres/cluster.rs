//! Leases, takeover, the queue and signals of the PostgreSQL store (the [`Cluster`] port).
//!
//! A process registers a lease (a row of `leases`, token from the `lease_tokens` sequence)
//! the first time it creates or claims a run, and a task renews it every third of its
//! lifetime. A renewal that finds the lease expired or gone loses it for good: the runs it
//! owned can no longer be written by this process (the writer checks the token and the expiry
//! on every append), and the next write registers a new lease with a new token.
//!
//! `take_over` (the store's `recover`) deletes expired leases and, in the same transaction,
//! gives their runs to the caller: a run that never stored an event goes back to the queue;
//! any other active run becomes `interrupted`, reserved for the taker, which resumes it.
//!
//! A run's writes carry the token this process took it under ([`Leases::hold`]), not
//! whichever lease the process holds when it writes: after a lost lease, what was still
//! running under the old token stays refused, even once the process holds a new lease and
//! even if it took the run back itself (then only the launch that claimed it writes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{
    Claimed, Cluster, ClusterStatus, ErrorCode, ErrorInfo, FinishReason, Lease, RequestId,
    RunRecord, RunStatus, Signal, SignalSink, StoreError,
};
use sqlx_core::row::Row;
use sqlx_postgres::{PgListener, Postgres};

use super::{Inner, PgOptions, PgStore, runs, to_json};

/// The channel every signal travels on.
const CHANNEL: &str = "keel";

/// How a lease's expiry is shown: RFC 3339 UTC with milliseconds.
const SHOW_EXPIRY: &str =
    "to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";

fn query(
    sql: &'static str,
) -> sqlx_core::query::Query<'static, Postgres, sqlx_postgres::PgArguments> {
    sqlx_core::query::query::<Postgres>(sql)
}

/// This process's lease and the task renewing it.
pub(super) struct Leases {
    replica: String,
    ttl: Duration,
    current: Mutex<Option<Lease>>,
    /// The token each run this process is writing was created or claimed under.
    held: Mutex<HashMap<String, i64>>,
    registering: tokio::sync::Mutex<()>,
    taken_over: AtomicU64,
    /// Dropped (or sent `true`) to stop the heartbeat and listener tasks.
    stop: tokio::sync::watch::Sender<bool>,
}

impl Leases {
    pub(super) fn new(options: &PgOptions) -> Self {
        let replica = options.replica.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "localhost".into());
            format!("{host}:{}", std::process::id())
        });
        Self {
            replica,
            ttl: options.lease_ttl.max(Duration::from_millis(300)),
            current: Mutex::new(None),
            held: Mutex::default(),
            registering: tokio::sync::Mutex::new(()),
            taken_over: AtomicU64::new(0),
            stop: tokio::sync::watch::channel(false).0,
        }
    }

    fn get(&self) -> Option<Lease> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    fn set(&self, lease: Option<Lease>) {
        if let Ok(mut current) = self.current.lock() {
            *current = lease;
        }
    }

    /// The token of the lease this process holds, if any (no registration).
    pub(super) fn token_if_any(&self) -> Option<i64> {
        self.get().map(|l| l.token)
    }

    /// Run `id` is this process's to write under `token` (it created or claimed it).
    pub(super) fn hold(&self, id: &str, token: i64) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(id.to_owned(), token);
        }
    }

    /// The token run `id` was created or claimed under, while this process holds it (its
    /// end is not stored yet).
    pub(super) fn held(&self, id: &str) -> Option<i64> {
        self.held.lock().ok().and_then(|h| h.get(id).copied())
    }

    /// The runs this process holds now.
    fn held_ids(&self) -> Vec<String> {
        self.held
            .lock()
            .map(|held| held.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The token to write run `id` with: the one it was taken under, else the current one.
    pub(super) fn token_for(&self, id: &str) -> Option<i64> {
        self.held(id).or_else(|| self.token_if_any())
    }

    /// Run `id` has ended (its end was stored): nothing writes it any more.
    pub(super) fn let_go(&self, id: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(id);
        }
    }

    /// Stops the background tasks.
    pub(super) fn stop(&self) {
        self.stop.send_replace(true);
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// The lease, registered (and its heartbeat started) when this process has none.
    pub(super) async fn current(&self, store: &PgStore) -> Result<Lease, StoreError> {
        if let Some(lease) = self.get() {
            return Ok(lease);
        }
        let _one = self.registering.lock().await;
        if let Some(lease) = self.get() {
            return Ok(lease);
        }
        let row = sqlx_core::query::query::<Postgres>(sqlx_core::sql_str::AssertSqlSafe(format!(
            "INSERT INTO leases (token, replica, host, pid, expires_at) \
                 VALUES (nextval('lease_tokens'), $1, $2, $3, \
                 clock_timestamp() + $4 * interval '1 millisecond') \
                 RETURNING token, {SHOW_EXPIRY}"
        )))
        .bind(&self.replica)
        .bind(self.replica.rsplit_once(':').map_or("", |(h, _)| h))
        .bind(i32::try_from(std::process::id()).unwrap_or(0))
        .bind(self.ttl_ms())
        .fetch_one(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
        let lease = Lease {
            replica: self.replica.clone(),
            token: row.try_get(0).map_err(|e| store.db_error(&e))?,
            expires_at: row.try_get(1).map_err(|e| store.db_error(&e))?,
        };
        tracing::info!(replica = %lease.replica, token = lease.token, "Registered a store lease.");
        self.set(Some(lease.clone()));
        tokio::spawn(heartbeat(
            Arc::downgrade(&store.inner),
            lease.token,
            self.ttl / 3,
            self.stop.subscribe(),
        ));
        Ok(lease)
    }

    /// Renews lease `token`; `Fenced` (and the lease forgotten) when it was lost.
    pub(super) async fn renew(&self, store: &PgStore, token: i64) -> Result<Lease, StoreError> {
        let row = sqlx_core::query::query::<Postgres>(sqlx_core::sql_str::AssertSqlSafe(format!(
            "UPDATE leases SET heartbeat_at = clock_timestamp(), \
                 expires_at = clock_timestamp() + $2 * interval '1 millisecond' \
                 WHERE token = $1 AND expires_at > clock_timestamp() RETURNING {SHOW_EXPIRY}"
        )))
        .bind(token)
        .bind(self.ttl_ms())
        .fetch_optional(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
        match row {
            Some(row) => {
                let lease = Lease {
                    replica: self.replica.clone(),
                    token,
                    expires_at: row.try_get(0).map_err(|e| store.db_error(&e))?,
                };
                if self.token_if_any() == Some(token) {
                    self.set(Some(lease.clone()));
                }
                Ok(lease)
            }
            None => {
                if self.token_if_any() == Some(token) {
                    self.set(None);
                }
                tracing::error!(
                    token,
                    "This process lost its store lease: its runs may have been taken over, and it can no longer write them."
                );
                Err(StoreError::Fenced(format!(
                    "the lease with token {token} expired or was taken over"
                )))
            }
        }
    }
}

/// Renews the lease until it is lost, the store is dropped or stopped.
async fn heartbeat(
    store: Weak<Inner>,
    token: i64,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        let Some(inner) = store.upgrade() else { return };
        let store = PgStore { inner };
        match store.inner.leases.renew(&store, token).await {
            Ok(_) => {}
            Err(StoreError::Fenced(_)) => return,
            Err(error) => {
                tracing::warn!(%error, "Cannot renew the store lease; trying again.");
            }
        }
    }
}

/// Deletes expired leases and takes their active runs: never-started queued runs go back to
/// the queue; the others become `interrupted`, reserved for this process. Returns those, with
/// the interrupted runs reserved for this process earlier and not resumed yet.
pub(super) async fn take_over(store: &PgStore) -> Result<Vec<RequestId>, StoreError> {
    // Our own lease must be alive, or we would take our own runs under a dead token.
    let mut lease = store.inner.leases.current(store).await?;
    if store.inner.leases.renew(store, lease.token).await.is_err() {
        lease = store.inner.leases.current(store).await?;
    }
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let mut tx = store.pool().begin().await.map_err(e)?;
    let dead: Vec<i64> = sqlx_core::query_scalar::query_scalar::<Postgres, i64>(
        "DELETE FROM leases WHERE expires_at < clock_timestamp() RETURNING token",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(e)?;
    // A run whose owner is a dead lease, or a lease that no longer exists.
    const ORPHAN: &str = "owner_token IS NOT NULL AND owner_token <> $2 \
         AND (owner_token = ANY($1) OR NOT EXISTS (SELECT 1 FROM leases l WHERE l.token = runs.owner_token))";
    // A queued request claimed but with nothing stored yet goes back to the queue, where it
    // starts afresh with all its options: its claimer died; or it is ours but stopped
    // interrupted before its first event was stored (a resume needs a log to continue); or
    // ours but not held here — the claim committed and its answer was lost with the
    // connection, so no launch here has it.
    let held = store.inner.leases.held_ids();
    let requeued = sqlx_core::query::query::<Postgres>(sqlx_core::sql_str::AssertSqlSafe(format!(
        "UPDATE runs SET status = 'queued', owner_token = NULL \
                          WHERE status IN ('running', 'interrupted') AND last_seq = 0 AND queued IS NOT NULL \
             AND (({ORPHAN}) OR (owner_token = $2 \
                  AND (status = 'interrupted' OR NOT (request_id = ANY($3)))))"
    )))
    .bind(&dead)
    .bind(lease.token)
    .bind(&held)
    .execute(&mut *tx)
    .await
    .map_err(e)?;
    // `fresh`: taken from another lease now (not reserved for us by an earlier call).
    let rows = sqlx_core::query::query::<Postgres>(sqlx_core::sql_str::AssertSqlSafe(format!(
        "WITH taken AS (SELECT request_id, owner_token AS previous FROM runs \
           WHERE status IN ('running', 'waiting_approval', 'interrupted') \
           AND (({ORPHAN}) OR (status = 'interrupted' AND owner_token = $2)) FOR UPDATE) \
         UPDATE runs SET status = 'interrupted', owner_token = $2 \
                    FROM taken t WHERE runs.request_id = t.request_id \
         RETURNING runs.request_id, t.previous IS DISTINCT FROM $2"
    )))
    .bind(&dead)
    .bind(lease.token)
    .fetch_all(&mut *tx)
    .await
    .map_err(e)?;
    let mut taken = Vec::with_capacity(rows.len());
    let mut fresh = 0;
    for row in rows {
        taken.push(row.try_get::<String, _>(0).map_err(e)?);
        if row.try_get::<bool, _>(1).map_err(e)? {
            fresh += 1;
        }
    }
    tx.commit().await.map_err(e)?;
    if requeued.rows_affected() > 0 {
        tracing::warn!(
            runs = requeued.rows_affected(),
            "Queued runs claimed by a process whose lease expired went back to the queue."
        );
        let _ = publish(store, &Signal::Queued).await;
    }
    for id in &taken {
        tracing::warn!(request_id = %id, "Run taken over: its process's lease expired.");
    }
    store
        .inner
        .leases
        .taken_over
        .fetch_add(fresh, Ordering::Relaxed);
    Ok(taken.into_iter().map(RequestId::from).collect())
}

async fn publish(store: &PgStore, signal: &Signal) -> Result<(), StoreError> {
    let payload = match signal {
        Signal::Queued => "queued".to_owned(),
        Signal::Cancel(id) => format!("cancel {id}"),
        Signal::Appended(id, seq) => format!("appended {id} {seq}"),
        Signal::Decided(id) => format!("decided {id}"),
    };
    query("SELECT pg_notify('keel', $1)")
        .bind(payload)
        .execute(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    Ok(())
}

/// A notification's payload as a signal (`None` for one this Keel does not know).
fn parse_signal(payload: &str) -> Option<Signal> {
    let mut words = payload.split(' ');
    match (words.next()?, words.next(), words.next()) {
        ("queued", None, None) => Some(Signal::Queued),
        ("cancel", Some(id), None) => Some(Signal::Cancel(RequestId::from(id))),
        ("decided", Some(id), None) => Some(Signal::Decided(id.to_owned())),
        ("appended", Some(id), Some(seq)) => {
            Some(Signal::Appended(RequestId::from(id), seq.parse().ok()?))
        }
        _ => None,
    }
}

/// Delivers notifications to `sink` until the store is stopped; reconnects after a failure
/// (signals sent meanwhile are lost: every waiter also polls the store).
async fn listen(
    store: PgStore,
    sink: Arc<dyn SignalSink>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let listener = async {
            let mut listener = PgListener::connect_with(&store.inner.pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx_core::Error>(listener)
        };
        let mut listener = tokio::select! {
            listener = listener => listener,
            _ = stop.changed() => return,
        };
        match listener.as_mut() {
            Ok(listener) => {
                backoff = Duration::from_millis(100);
                loop {
                    let next = tokio::select! {
                        next = listener.try_recv() => next,
                        _ = stop.changed() => return,
                    };
                    match next {
                        Ok(Some(notification)) => {
                            if let Some(signal) = parse_signal(notification.payload()) {
                                sink.signal(&signal);
                            }
                        }
                        // The connection dropped: signals may have been missed; reconnect.
                        Ok(None) => {
                            tracing::warn!("The store's signal connection dropped; reconnecting.");
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "The store's signal listener failed; reconnecting.");
                            break;
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "Cannot listen for store signals; retrying.");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

#[async_trait]
impl Cluster for PgStore {
    async fn lease(&self) -> Result<Lease, StoreError> {
        self.ready().await?;
        self.inner.leases.current(self).await
    }

    async fn heartbeat(&self) -> Result<Lease, StoreError> {
        self.ready().await?;
        let lease = self.inner.leases.current(self).await?;
        self.inner.leases.renew(self, lease.token).await
    }

    async fn release(&self) -> Result<(), StoreError> {
        self.ready().await?;
        let Some(token) = self.inner.leases.token_if_any() else {
            return Ok(());
        };
        self.inner.leases.set(None);
        query("DELETE FROM leases WHERE token = $1")
            .bind(token)
            .execute(self.pool())
            .await
            .map_err(|e| self.db_error(&e))?;
        // Runs this process left interrupted can be taken over now.
        let _ = publish(self, &Signal::Queued).await;
        Ok(())
    }

    async fn enqueue(
        &self,
        run: &RunRecord,
        request: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.ready().await?;
        if run.status != RunStatus::Queued {
            return Err(StoreError::Invalid(format!(
                "run `{}` is {}; only a queued run can be enqueued",
                run.request_id,
                run.status.as_str()
            )));
        }
        runs::insert(self, run, None, Some(request)).await?;
        publish(self, &Signal::Queued).await
    }

    async fn claim_queued(&self, limit: usize) -> Result<Vec<Claimed>, StoreError> {
        self.ready().await?;
        let token = self.inner.leases.current(self).await?.token;
        let rows = query(
            "UPDATE runs r SET status = 'running', owner_token = $1 \
                          FROM (SELECT request_id FROM runs WHERE status = 'queued' \
                   ORDER BY started_at, request_id FOR UPDATE SKIP LOCKED LIMIT $2) q \
             WHERE r.request_id = q.request_id \
               AND EXISTS (SELECT 1 FROM leases l WHERE l.token = $1 AND l.expires_at > clock_timestamp()) \
             RETURNING r.record, r.status, r.queued",
        )
        .bind(token)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(|e| self.db_error(&e))?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in rows {
            let run = runs::run_from(&row, 0)?;
            self.inner.leases.hold(run.request_id.as_str(), token);
            let request: Option<String> = row.try_get(2).map_err(|e| self.db_error(&e))?;
            let request = serde_json::from_str(request.as_deref().unwrap_or("null"))
                .map_err(|e| super::corrupt("runs.queued", run.request_id.as_str(), &e))?;
            claimed.push(Claimed { run, request });
        }
        // Claimed in the queue's order, oldest first.
        claimed.sort_by(|a, b| {
            (&a.run.started_at, &a.run.request_id).cmp(&(&b.run.started_at, &b.run.request_id))
        });
        Ok(claimed)
    }

    async fn cancel_queued(&self, id: &RequestId) -> Result<bool, StoreError> {
        self.ready().await?;
        let Some(mut run) = runs::get(self, id).await? else {
            return Err(StoreError::NotFound(id.to_string()));
        };
        if run.status != RunStatus::Queued {
            return Ok(false);
        }
        run.status = RunStatus::Cancelled;
        run.finish_reason = Some(FinishReason::Cancelled);
        run.error = Some(ErrorInfo::new(
            ErrorCode::Cancelled,
            "cancelled while queued, before any replica started it",
        ));
        run.ended_at = Some(keel_types::now_rfc3339());
        let changed = query(
            "UPDATE runs SET status = 'cancelled', record = $2, queued = NULL \
             WHERE request_id = $1 AND status = 'queued'",
        )
        .bind(id.as_str())
        .bind(to_json(&run)?)
        .execute(self.pool())
        .await
        .map_err(|e| self.db_error(&e))?;
        Ok(changed.rows_affected() == 1)
    }

    async fn publish(&self, signal: &Signal) -> Result<(), StoreError> {
        self.ready().await?;
        publish(self, signal).await
    }

    fn listen(&self, sink: Arc<dyn SignalSink>) {
        tokio::spawn(listen(
            self.clone(),
            sink,
            self.inner.leases.stop.subscribe(),
        ));
    }

    async fn status(&self) -> Result<ClusterStatus, StoreError> {
        self.ready().await?;
        let lease = self.inner.leases.get();
        let row = query(
            "SELECT (SELECT count(*) FROM leases WHERE expires_at > clock_timestamp()), \
             (SELECT count(*) FROM runs WHERE status = 'queued'), \
             (SELECT count(*) FROM runs WHERE owner_token = $1 \
                AND status IN ('running', 'waiting_approval'))",
        )
        .bind(lease.as_ref().map(|l| l.token))
        .fetch_one(self.pool())
        .await
        .map_err(|e| self.db_error(&e))?;
        let count = |i: usize| -> Result<u64, StoreError> {
            let n: i64 = row.try_get(i).map_err(|e| self.db_error(&e))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(ClusterStatus {
            lease,
            replicas: count(0)?,
            queue_depth: count(1)?,
            owned_runs: count(2)?,
            taken_over: self.inner.leases.taken_over.load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_round_trip_through_their_payloads() {
        assert_eq!(parse_signal("queued"), Some(Signal::Queued));
        assert_eq!(
            parse_signal("appended run_1 42"),
            Some(Signal::Appended(RequestId::from("run_1"), 42))
        );
        assert_eq!(
            parse_signal("cancel run_1"),
            Some(Signal::Cancel(RequestId::from("run_1")))
        );
        assert_eq!(
            parse_signal("decided apr_1"),
            Some(Signal::Decided("apr_1".into()))
        );
        assert_eq!(parse_signal("appended run_1 x"), None);
        assert_eq!(parse_signal("reboot"), None);
    }
}
