//! Run records, event reads, claiming, pruning, sessions and transcripts on PostgreSQL.

use keel_types::{
    Event, Message, RequestId, RunFilter, RunRecord, RunStatus, SessionId, SessionMessage,
    SessionRecord, StoreError,
};
use sqlx_core::row::Row;
use sqlx_core::sql_str::AssertSqlSafe;
use sqlx_postgres::{PgRow, Postgres};

use super::{PgStore, corrupt, to_json};

type Query<'q> = sqlx_core::query::Query<'q, Postgres, sqlx_postgres::PgArguments>;

fn query(sql: &'static str) -> Query<'static> {
    sqlx_core::query::query::<Postgres>(sql)
}

/// The run record in a row's columns `index` (the record) and `index + 1` (the status, which
/// is the truth: replicas change it without rewriting the record).
pub(super) fn run_from(row: &PgRow, index: usize) -> Result<RunRecord, StoreError> {
    let column = |e: sqlx_core::Error| StoreError::Corrupt {
        location: "runs".into(),
        message: e.to_string(),
    };
    let text: String = row.try_get(index).map_err(column)?;
    let status: String = row.try_get(index + 1).map_err(column)?;
    let mut run: RunRecord =
        serde_json::from_str(&text).map_err(|e| corrupt("runs", "record", &e))?;
    run.status = status
        .parse()
        .map_err(|e: keel_types::UnknownName| StoreError::Corrupt {
            location: "runs.status".into(),
            message: e.to_string(),
        })?;
    Ok(run)
}

/// Inserts a run's row unless its id exists: owned by a token (none for a queued or imported
/// run), with a queued request, and the last stored `seq`. Returns whether it was inserted.
async fn insert_row(
    store: &PgStore,
    conn: &mut sqlx_postgres::PgConnection,
    run: &RunRecord,
    (token, queued, last_seq): (Option<i64>, Option<&serde_json::Value>, i64),
) -> Result<bool, StoreError> {
    let inserted = query(
        "INSERT INTO runs (request_id, session_id, agent, status, started_at, owner, parent_id, \
         root_id, record, owner_token, queued, last_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (request_id) DO NOTHING",
    )
    .bind(run.request_id.as_str())
    .bind(run.session_id.as_ref().map(|s| s.as_str()))
    .bind(&run.agent)
    .bind(run.status.as_str())
    .bind(&run.started_at)
    .bind(run.owner.as_deref())
    .bind(run.links.parent_id.as_ref().map(|p| p.as_str()))
    .bind(run.links.root_id.as_ref().map(|p| p.as_str()))
    .bind(to_json(run)?)
    .bind(token)
    .bind(queued.map(serde_json::Value::to_string))
    .bind(last_seq)
    .execute(&mut *conn)
    .await
    .map_err(|e| store.db_error(&e))?;
    Ok(inserted.rows_affected() == 1)
}

/// Inserts a new run owned by `token` (none for a queued run).
pub(super) async fn insert(
    store: &PgStore,
    run: &RunRecord,
    token: Option<i64>,
    queued: Option<&serde_json::Value>,
) -> Result<(), StoreError> {
    let mut tx = store.pool().begin().await.map_err(|e| store.db_error(&e))?;
    let inserted = insert_row(store, &mut tx, run, (token, queued, 0)).await?;
    if !inserted {
        return Err(StoreError::Invalid(format!(
            "run `{}` already exists",
            run.request_id
        )));
    }
    if let Some(session) = &run.session_id {
        // A new request is activity in its session.
        query("UPDATE sessions SET updated_at = $2 WHERE id = $1 AND updated_at < $2")
            .bind(session.as_str())
            .bind(keel_types::now_rfc3339())
            .execute(&mut *tx)
            .await
            .map_err(|e| store.db_error(&e))?;
    }
    tx.commit().await.map_err(|e| store.db_error(&e))
}

/// Replaces a run's record. Fenced: a run owned by another lease (or by this process's
/// expired lease) is refused, and so is a queued run (the queue's until a replica claims it;
/// `cancel_queued` ends one). A run that ended for good gave up its owner token: it is
/// refused to a process that still holds the run from before (a launch whose end was not
/// stored, e.g. one that lost its lease while another process finished the run).
pub(super) async fn update(store: &PgStore, run: &RunRecord) -> Result<(), StoreError> {
    let record = to_json(run)?;
    let token = store.inner.leases.token_for(run.request_id.as_str());
    let row = query(
        "WITH target AS (SELECT request_id, owner_token, status FROM runs WHERE request_id = $1 FOR UPDATE), \
         allowed AS (SELECT t.request_id FROM target t WHERE (t.owner_token IS NULL \
             AND t.status <> 'queued' \
             AND ($11::bigint IS NULL OR t.status NOT IN ('completed', 'failed', 'cancelled'))) \
           OR (t.owner_token = $9 AND EXISTS (SELECT 1 FROM leases l \
               WHERE l.token = $9 AND l.expires_at > clock_timestamp()))), \
         changed AS (UPDATE runs r SET status = $2, session_id = $3, agent = $4, started_at = $5, \
           owner = $6, parent_id = $7, root_id = $8, record = $10, \
           owner_token = CASE WHEN $2 IN ('completed', 'failed', 'cancelled') THEN NULL \
             ELSE r.owner_token END \
           FROM allowed a WHERE r.request_id = a.request_id RETURNING r.request_id) \
         SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM changed)",
    )
    .bind(run.request_id.as_str())
    .bind(run.status.as_str())
    .bind(run.session_id.as_ref().map(|s| s.as_str()))
    .bind(&run.agent)
    .bind(&run.started_at)
    .bind(run.owner.as_deref())
    .bind(run.links.parent_id.as_ref().map(|p| p.as_str()))
    .bind(run.links.root_id.as_ref().map(|p| p.as_str()))
    .bind(token)
    .bind(record)
    .bind(store.inner.leases.held(run.request_id.as_str()))
    .fetch_one(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    let found: i64 = row.try_get(0).map_err(|e| store.db_error(&e))?;
    let changed: i64 = row.try_get(1).map_err(|e| store.db_error(&e))?;
    match (found, changed) {
        (0, _) => Err(StoreError::NotFound(run.request_id.to_string())),
        (_, 0) => Err(StoreError::Fenced(format!(
            "run `{}` is owned by another process's lease, or this process's lease expired, or the run has ended",
            run.request_id
        ))),
        _ => Ok(()),
    }
}

pub(super) async fn get(store: &PgStore, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
    let row = query("SELECT record, status FROM runs WHERE request_id = $1")
        .bind(id.as_str())
        .fetch_optional(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    row.map(|row| run_from(&row, 0)).transpose()
}

pub(super) async fn list(
    store: &PgStore,
    filter: &RunFilter,
) -> Result<Vec<RunRecord>, StoreError> {
    let mut sql = String::from("SELECT record, status FROM runs WHERE true");
    let mut values: Vec<String> = Vec::new();
    let mut add = |sql: &mut String, clause: &str, value: String| {
        values.push(value);
        sql.push_str(&clause.replace('?', &format!("${}", values.len())));
    };
    if let Some(status) = filter.status {
        add(&mut sql, " AND status = ?", status.as_str().to_owned());
    }
    if let Some(agent) = &filter.agent {
        add(&mut sql, " AND agent = ?", agent.clone());
    }
    if let Some(session) = &filter.session {
        add(&mut sql, " AND session_id = ?", session.0.clone());
    }
    if let Some(since) = &filter.since {
        add(&mut sql, " AND started_at >= ?", since.clone());
    }
    if let Some(parent) = &filter.parent {
        add(&mut sql, " AND parent_id = ?", parent.0.clone());
    }
    if let Some(owner) = &filter.owner {
        add(&mut sql, " AND owner = ?", owner.clone());
    }
    if let Some(cursor) = &filter.before {
        add(
            &mut sql,
            " AND (started_at, request_id) < (?",
            cursor.started_at.clone(),
        );
        add(&mut sql, ", ?)", cursor.request_id.0.clone());
    }
    sql.push_str(" ORDER BY started_at DESC, request_id DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {}", limit.min(i64::MAX as usize)));
    }
    let mut q = sqlx_core::query::query::<Postgres>(AssertSqlSafe(sql));
    for value in values {
        q = q.bind(value);
    }
    let rows = q
        .fetch_all(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    rows.iter().map(|row| run_from(row, 0)).collect()
}

pub(super) async fn counts(store: &PgStore) -> Result<Vec<(RunStatus, u64)>, StoreError> {
    let rows = query("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
        .fetch_all(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    let mut counts = Vec::with_capacity(rows.len());
    for row in rows {
        let status: String = row.try_get(0).map_err(|e| store.db_error(&e))?;
        let count: i64 = row.try_get(1).map_err(|e| store.db_error(&e))?;
        let status = status
            .parse::<RunStatus>()
            .map_err(|e| StoreError::Corrupt {
                location: "runs.status".into(),
                message: e.to_string(),
            })?;
        counts.push((status, u64::try_from(count).unwrap_or(0)));
    }
    Ok(counts)
}

pub(super) async fn started_by_minute(
    store: &PgStore,
    since: &str,
) -> Result<Vec<(String, RunStatus, u64)>, StoreError> {
    let rows = query(
        "SELECT substr(started_at, 1, 16), status, count(*) FROM runs \
         WHERE started_at >= $1 GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(since)
    .fetch_all(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    let mut counts = Vec::with_capacity(rows.len());
    for row in rows {
        let minute: String = row.try_get(0).map_err(|e| store.db_error(&e))?;
        let status: String = row.try_get(1).map_err(|e| store.db_error(&e))?;
        let count: i64 = row.try_get(2).map_err(|e| store.db_error(&e))?;
        let status = status
            .parse::<RunStatus>()
            .map_err(|e| StoreError::Corrupt {
                location: "runs.status".into(),
                message: e.to_string(),
            })?;
        counts.push((minute, status, u64::try_from(count).unwrap_or(0)));
    }
    Ok(counts)
}

pub(super) async fn events(
    store: &PgStore,
    id: &RequestId,
    after: u64,
) -> Result<Vec<Event>, StoreError> {
    let rows =
        query("SELECT seq, body FROM events WHERE request_id = $1 AND seq > $2 ORDER BY seq")
            .bind(id.as_str())
            .bind(i64::try_from(after).unwrap_or(i64::MAX))
            .fetch_all(store.pool())
            .await
            .map_err(|e| store.db_error(&e))?;
    if rows.is_empty() && get(store, id).await?.is_none() {
        return Err(StoreError::NotFound(id.to_string()));
    }
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get(0).map_err(|e| store.db_error(&e))?;
            let body: String = row.try_get(1).map_err(|e| store.db_error(&e))?;
            serde_json::from_str(&body).map_err(|e| corrupt("events", &format!("{id}:{seq}"), &e))
        })
        .collect()
}

/// Switches an interrupted run to running under `token`: exactly one claimer wins.
pub(super) async fn claim(
    store: &PgStore,
    id: &RequestId,
    token: i64,
) -> Result<RunRecord, StoreError> {
    let mut tx = store.pool().begin().await.map_err(|e| store.db_error(&e))?;
    let row = query("SELECT record, status FROM runs WHERE request_id = $1 FOR UPDATE")
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| store.db_error(&e))?;
    let Some(row) = row else {
        return Err(StoreError::NotFound(id.to_string()));
    };
    let mut run = run_from(&row, 0)?;
    let status: String = row.try_get(1).map_err(|e| store.db_error(&e))?;
    if status != RunStatus::Interrupted.as_str() {
        return Err(StoreError::Invalid(format!(
            "run `{id}` is {status}; only an interrupted run can be claimed"
        )));
    }
    run.status = RunStatus::Running;
    run.links.resumed += 1;
    run.output = None;
    run.error = None;
    run.finish_reason = None;
    run.ended_at = None;
    query(
        "UPDATE runs SET status = 'running', owner_token = $2, record = $3 WHERE request_id = $1",
    )
    .bind(id.as_str())
    .bind(token)
    .bind(to_json(&run)?)
    .execute(&mut *tx)
    .await
    .map_err(|e| store.db_error(&e))?;
    tx.commit().await.map_err(|e| store.db_error(&e))?;
    Ok(run)
}

pub(super) async fn prune(store: &PgStore, before: &str) -> Result<u64, StoreError> {
    let done = query(
        "DELETE FROM runs WHERE status IN ('completed', 'failed', 'cancelled') AND started_at < $1",
    )
    .bind(before)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    Ok(done.rows_affected())
}

const SESSION_SELECT: &str = "SELECT s.id, s.agent, s.created_at, s.updated_at, \
     (SELECT count(*) FROM runs r WHERE r.session_id = s.id), \
     (SELECT count(*) FROM session_messages m WHERE m.session_id = s.id), s.owner, s.summary \
     FROM sessions s";

fn session_from(store: &PgStore, row: &PgRow) -> Result<SessionRecord, StoreError> {
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let id: String = row.try_get(0).map_err(e)?;
    let owner = row
        .try_get::<Option<String>, _>(6)
        .map_err(e)?
        .map(|owner| serde_json::from_str(&owner))
        .transpose()
        .map_err(|error| corrupt("sessions", &id, &error))?;
    let summary = row
        .try_get::<Option<String>, _>(7)
        .map_err(e)?
        .map(|summary| serde_json::from_str(&summary))
        .transpose()
        .map_err(|error| corrupt("sessions", &id, &error))?;
    Ok(SessionRecord {
        session_id: SessionId::from(id),
        agent: row.try_get(1).map_err(e)?,
        created_at: row.try_get(2).map_err(e)?,
        updated_at: row.try_get(3).map_err(e)?,
        run_count: u64::try_from(row.try_get::<i64, _>(4).map_err(e)?).unwrap_or(0),
        message_count: u64::try_from(row.try_get::<i64, _>(5).map_err(e)?).unwrap_or(0),
        owner,
        summary,
    })
}

pub(super) async fn ensure_session(
    store: &PgStore,
    id: &SessionId,
    agent: &str,
    owner: &keel_types::SessionOwner,
) -> Result<SessionRecord, StoreError> {
    query(
        "INSERT INTO sessions (id, agent, created_at, updated_at, owner) \
         VALUES ($1, $2, $3, $3, $4) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id.as_str())
    .bind(agent)
    .bind(keel_types::now_rfc3339())
    .bind(to_json(owner)?)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    get_session(store, id)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("session `{id}` vanished while created")))
}

pub(super) async fn get_session(
    store: &PgStore,
    id: &SessionId,
) -> Result<Option<SessionRecord>, StoreError> {
    let row = query(SESSION_BY_ID)
        .bind(id.as_str())
        .fetch_optional(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    row.map(|row| session_from(store, &row)).transpose()
}

const SESSION_BY_ID: &str = "SELECT s.id, s.agent, s.created_at, s.updated_at, \
     (SELECT count(*) FROM runs r WHERE r.session_id = s.id), \
     (SELECT count(*) FROM session_messages m WHERE m.session_id = s.id), s.owner, s.summary \
     FROM sessions s WHERE s.id = $1";

pub(super) async fn list_sessions(
    store: &PgStore,
    limit: Option<usize>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let sql = format!("{SESSION_SELECT} ORDER BY s.updated_at DESC, s.id DESC LIMIT $1");
    let rows = sqlx_core::query::query::<Postgres>(AssertSqlSafe(sql))
        .bind(limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX)))
        .fetch_all(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    rows.iter().map(|row| session_from(store, row)).collect()
}

pub(super) async fn set_session_summary(
    store: &PgStore,
    id: &SessionId,
    summary: &keel_types::SessionSummary,
) -> Result<bool, StoreError> {
    let summary = serde_json::to_string(summary).map_err(|e| StoreError::Corrupt {
        location: format!("the summary of session {id}"),
        message: e.to_string(),
    })?;
    let done = query("UPDATE sessions SET summary = $2 WHERE id = $1")
        .bind(id.as_str())
        .bind(summary)
        .execute(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn delete_session(store: &PgStore, id: &SessionId) -> Result<bool, StoreError> {
    let done = query("DELETE FROM sessions WHERE id = $1")
        .bind(id.as_str())
        .execute(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn session_messages(
    store: &PgStore,
    id: &SessionId,
) -> Result<Vec<SessionMessage>, StoreError> {
    let rows = query(
        "SELECT seq, request_id, message FROM session_messages WHERE session_id = $1 ORDER BY seq",
    )
    .bind(id.as_str())
    .fetch_all(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    rows.iter()
        .map(|row| {
            let e = |e: sqlx_core::Error| store.db_error(&e);
            let seq: i64 = row.try_get(0).map_err(e)?;
            let request_id: String = row.try_get(1).map_err(e)?;
            let message: String = row.try_get(2).map_err(e)?;
            Ok(SessionMessage {
                seq: u64::try_from(seq).unwrap_or(0),
                request_id: RequestId::from(request_id),
                message: serde_json::from_str(&message)
                    .map_err(|e| corrupt("session_messages", &format!("{id}:{seq}"), &e))?,
            })
        })
        .collect()
}

/// Appends transcript messages after the session's last one, in one transaction that holds
/// the session's row lock (so two requests of one session never interleave).
pub(super) async fn append_messages(
    store: &PgStore,
    id: &SessionId,
    request_id: &RequestId,
    messages: &[Message],
) -> Result<(), StoreError> {
    let encoded = messages
        .iter()
        .map(to_json)
        .collect::<Result<Vec<_>, _>>()?;
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let mut tx = store.pool().begin().await.map_err(e)?;
    let touched = query("UPDATE sessions SET updated_at = $2 WHERE id = $1")
        .bind(id.as_str())
        .bind(keel_types::now_rfc3339())
        .execute(&mut *tx)
        .await
        .map_err(e)?;
    if touched.rows_affected() == 0 {
        return Err(StoreError::Invalid(format!(
            "no session `{id}`; ensure_session creates it"
        )));
    }
    query(
        "INSERT INTO session_messages (session_id, seq, request_id, message) \
         SELECT $1, (SELECT COALESCE(max(seq), 0) FROM session_messages WHERE session_id = $1) + m.n, \
         $2, m.message FROM unnest($3::text[]) WITH ORDINALITY AS m(message, n)",
    )
    .bind(id.as_str())
    .bind(request_id.as_str())
    .bind(&encoded)
    .execute(&mut *tx)
    .await
    .map_err(e)?;
    tx.commit().await.map_err(e)
}

/// Inserts a run with its events as they are (no owner): `keel store copy`.
pub(super) async fn import(
    store: &PgStore,
    run: &RunRecord,
    events: &[Event],
) -> Result<bool, StoreError> {
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let mut tx = store.pool().begin().await.map_err(e)?;
    let last_seq = events.last().map_or(0, |e| e.seq as i64);
    if !insert_row(store, &mut tx, run, (None, None, last_seq)).await? {
        return Ok(false);
    }
    if let Some(batch) = crate::batch::encode(events)? {
        let seqs: Vec<i64> = batch.events.iter().map(|e| e.seq as i64).collect();
        let types: Vec<&str> = batch.events.iter().map(|e| e.type_name).collect();
        let bodies: Vec<&str> = batch.events.iter().map(|e| e.body.as_str()).collect();
        query(
            "INSERT INTO events (request_id, seq, type, body) \
             SELECT $1, e.seq, e.type, e.body FROM unnest($2::bigint[], $3::text[], $4::text[]) \
             AS e(seq, type, body)",
        )
        .bind(run.request_id.as_str())
        .bind(&seqs)
        .bind(&types)
        .bind(&bodies)
        .execute(&mut *tx)
        .await
        .map_err(e)?;
    }
    tx.commit().await.map_err(e)?;
    Ok(true)
}
