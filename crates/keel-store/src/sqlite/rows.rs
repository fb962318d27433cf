//! Rows ↔ DTOs: the run record as columns, sessions with their counts, stored events. The
//! queries here are shared by the read connections and the writer thread.

use std::path::Path;

use keel_types::{
    Event, FinishReason, RequestId, RunFilter, RunLinks, RunRecord, RunStatus, SessionId,
    SessionMessage, SessionRecord, StoreError,
};
use rusqlite::{Connection, OptionalExtension, Row, ToSql, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::connection::sql_error;
use crate::mirror::StoredLine;

/// The `runs` columns a [`RunRecord`] is made of, in the order [`run_from_row`] reads them.
pub(crate) const RUN_COLUMNS: &str = "request_id, session_id, agent, status, input, output, \
     error, finish_reason, usage, steps, started_at, ended_at, event_count, parent_id, \
     retry_of, replay_of, forked_from, fork_seq, resumed, owner, root_id, parent_call, value, trace";

/// A run record as column values, ready to bind.
pub(crate) struct RunColumns {
    pub request_id: String,
    pub session_id: Option<String>,
    pub agent: String,
    pub status: &'static str,
    pub input: String,
    pub output: Option<String>,
    pub error: Option<String>,
    pub finish_reason: Option<&'static str>,
    pub usage: String,
    pub steps: u32,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub event_count: u64,
    pub parent_id: Option<String>,
    pub retry_of: Option<String>,
    pub replay_of: Option<String>,
    pub forked_from: Option<String>,
    pub fork_seq: Option<u64>,
    pub resumed: u32,
    pub owner: Option<String>,
    pub root_id: Option<String>,
    pub parent_call: Option<String>,
    pub value: Option<String>,
    pub trace: Option<String>,
}

impl RunColumns {
    /// Splits a record into columns (serializing its nested parts). Done in the caller's task.
    pub(crate) fn from_record(run: &RunRecord) -> Result<Self, StoreError> {
        let links = &run.links;
        Ok(Self {
            request_id: run.request_id.0.clone(),
            session_id: run.session_id.as_ref().map(|s| s.0.clone()),
            agent: run.agent.clone(),
            status: run.status.as_str(),
            input: run.input.clone(),
            output: run.output.clone(),
            error: run.error.as_ref().map(to_json).transpose()?,
            finish_reason: run.finish_reason.map(FinishReason::as_str),
            usage: to_json(&run.usage)?,
            steps: run.steps,
            started_at: run.started_at.clone(),
            ended_at: run.ended_at.clone(),
            event_count: run.event_count,
            parent_id: links.parent_id.as_ref().map(|r| r.0.clone()),
            retry_of: links.retry_of.as_ref().map(|r| r.0.clone()),
            replay_of: links.replay_of.as_ref().map(|r| r.0.clone()),
            forked_from: links.forked_from.as_ref().map(|r| r.0.clone()),
            fork_seq: links.fork_seq,
            resumed: links.resumed,
            owner: run.owner.clone(),
            root_id: links.root_id.as_ref().map(|r| r.0.clone()),
            parent_call: links.parent_call.clone(),
            value: run.value.as_ref().map(to_json).transpose()?,
            trace: run.trace.as_ref().map(to_json).transpose()?,
        })
    }

    /// The values in [`RUN_COLUMNS`] order.
    pub(crate) fn values(&self) -> [&dyn ToSql; 24] {
        [
            &self.request_id,
            &self.session_id,
            &self.agent,
            &self.status,
            &self.input,
            &self.output,
            &self.error,
            &self.finish_reason,
            &self.usage,
            &self.steps,
            &self.started_at,
            &self.ended_at,
            &self.event_count,
            &self.parent_id,
            &self.retry_of,
            &self.replay_of,
            &self.forked_from,
            &self.fork_seq,
            &self.resumed,
            &self.owner,
            &self.root_id,
            &self.parent_call,
            &self.value,
            &self.trace,
        ]
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A unit enum's wire name (`"max_steps"` → `max_steps`).
/// A closed-set name read back from a column (`status`, `finish_reason`).
fn from_text<T: std::str::FromStr<Err = keel_types::UnknownName>>(text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|e: keel_types::UnknownName| e.to_string())
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The raw values of one `runs` row.
struct RawRun {
    request_id: String,
    session_id: Option<String>,
    agent: String,
    status: String,
    input: String,
    output: Option<String>,
    error: Option<String>,
    finish_reason: Option<String>,
    usage: String,
    steps: u32,
    started_at: String,
    ended_at: Option<String>,
    event_count: u64,
    parent_id: Option<String>,
    retry_of: Option<String>,
    replay_of: Option<String>,
    forked_from: Option<String>,
    fork_seq: Option<u64>,
    resumed: u32,
    owner: Option<String>,
    root_id: Option<String>,
    parent_call: Option<String>,
    value: Option<String>,
    trace: Option<String>,
}

fn raw_run(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        request_id: row.get(0)?,
        session_id: row.get(1)?,
        agent: row.get(2)?,
        status: row.get(3)?,
        input: row.get(4)?,
        output: row.get(5)?,
        error: row.get(6)?,
        finish_reason: row.get(7)?,
        usage: row.get(8)?,
        steps: row.get(9)?,
        started_at: row.get(10)?,
        ended_at: row.get(11)?,
        event_count: row.get(12)?,
        parent_id: row.get(13)?,
        retry_of: row.get(14)?,
        replay_of: row.get(15)?,
        forked_from: row.get(16)?,
        fork_seq: row.get(17)?,
        resumed: row.get(18)?,
        owner: row.get(19)?,
        root_id: row.get(20)?,
        parent_call: row.get(21)?,
        value: row.get(22)?,
        trace: row.get(23)?,
    })
}

impl RawRun {
    fn into_record(self, db: &Path) -> Result<RunRecord, StoreError> {
        let location = format!("{} (run {})", db.display(), self.request_id);
        let corrupt = |message: String| StoreError::Corrupt {
            location: location.clone(),
            message,
        };
        let status: RunStatus = from_text(&self.status).map_err(&corrupt)?;
        Ok(RunRecord {
            request_id: RequestId(self.request_id),
            session_id: self.session_id.map(SessionId),
            agent: self.agent,
            status,
            input: self.input,
            output: self.output,
            value: self
                .value
                .as_deref()
                .map(from_json)
                .transpose()
                .map_err(&corrupt)?,
            error: self
                .error
                .as_deref()
                .map(from_json)
                .transpose()
                .map_err(&corrupt)?,
            finish_reason: self
                .finish_reason
                .as_deref()
                .map(from_text)
                .transpose()
                .map_err(&corrupt)?,
            usage: from_json(&self.usage).map_err(&corrupt)?,
            steps: self.steps,
            started_at: self.started_at,
            ended_at: self.ended_at,
            event_count: self.event_count,
            links: RunLinks {
                parent_id: self.parent_id.map(RequestId),
                retry_of: self.retry_of.map(RequestId),
                replay_of: self.replay_of.map(RequestId),
                forked_from: self.forked_from.map(RequestId),
                fork_seq: self.fork_seq,
                resumed: self.resumed,
                root_id: self.root_id.map(RequestId),
                parent_call: self.parent_call,
            },
            owner: self.owner,
            trace: self
                .trace
                .as_deref()
                .map(from_json)
                .transpose()
                .map_err(&corrupt)?,
        })
    }
}

/// One run, if it exists.
pub(crate) fn get_run(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
) -> Result<Option<RunRecord>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE request_id = ?1");
    let raw = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row([id.as_str()], raw_run).optional())
        .map_err(|e| sql_error(db, &e))?;
    raw.map(|raw| raw.into_record(db)).transpose()
}

/// Runs matching a filter, newest first (`started_at`, then `request_id`, descending).
pub(crate) fn list_runs(
    conn: &Connection,
    db: &Path,
    filter: &RunFilter,
) -> Result<Vec<RunRecord>, StoreError> {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1");
    let mut values: Vec<Box<dyn ToSql>> = Vec::new();
    if let Some(status) = filter.status {
        values.push(Box::new(status.as_str()));
        sql.push_str(&format!(" AND status = ?{}", values.len()));
    }
    if let Some(agent) = &filter.agent {
        values.push(Box::new(agent.clone()));
        sql.push_str(&format!(" AND agent = ?{}", values.len()));
    }
    if let Some(session) = &filter.session {
        values.push(Box::new(session.0.clone()));
        sql.push_str(&format!(" AND session_id = ?{}", values.len()));
    }
    if let Some(since) = &filter.since {
        values.push(Box::new(since.clone()));
        sql.push_str(&format!(" AND started_at >= ?{}", values.len()));
    }
    if let Some(parent) = &filter.parent {
        values.push(Box::new(parent.0.clone()));
        sql.push_str(&format!(" AND parent_id = ?{}", values.len()));
    }
    if let Some(owner) = &filter.owner {
        values.push(Box::new(owner.clone()));
        sql.push_str(&format!(" AND owner = ?{}", values.len()));
    }
    if let Some(cursor) = &filter.before {
        values.push(Box::new(cursor.started_at.clone()));
        values.push(Box::new(cursor.request_id.0.clone()));
        // A row value: the index on (started_at DESC, request_id DESC) serves it directly.
        sql.push_str(&format!(
            " AND (started_at, request_id) < (?{}, ?{})",
            values.len() - 1,
            values.len()
        ));
    }
    sql.push_str(" ORDER BY started_at DESC, request_id DESC");
    if let Some(limit) = filter.limit {
        values.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ?{}", values.len()));
    }
    let raws = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_map(rusqlite::params_from_iter(values.iter()), raw_run)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| sql_error(db, &e))?;
    raws.into_iter().map(|raw| raw.into_record(db)).collect()
}

/// How many runs have each status.
pub(crate) fn run_counts(
    conn: &Connection,
    db: &Path,
) -> Result<Vec<(RunStatus, u64)>, StoreError> {
    let rows: Vec<(String, u64)> = conn
        .prepare_cached("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .map_err(|e| sql_error(db, &e))?;
    rows.into_iter()
        .map(|(status, count)| {
            let status = from_text(&status).map_err(|message| StoreError::Corrupt {
                location: format!("{} (runs.status)", db.display()),
                message,
            })?;
            Ok((status, count))
        })
        .collect()
}

/// How many runs started at or after `since` in each minute, by status, in minute order.
pub(crate) fn started_by_minute(
    conn: &Connection,
    db: &Path,
    since: &str,
) -> Result<Vec<(String, RunStatus, u64)>, StoreError> {
    let rows: Vec<(String, String, u64)> = conn
        .prepare_cached(
            "SELECT substr(started_at, 1, 16), status, count(*) FROM runs \
             WHERE started_at >= ?1 GROUP BY 1, 2 ORDER BY 1, 2",
        )
        .and_then(|mut stmt| {
            stmt.query_map([since], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect()
        })
        .map_err(|e| sql_error(db, &e))?;
    rows.into_iter()
        .map(|(minute, status, count)| {
            let status = from_text(&status).map_err(|message| StoreError::Corrupt {
                location: format!("{} (runs.status)", db.display()),
                message,
            })?;
            Ok((minute, status, count))
        })
        .collect()
}

/// Whether a run exists.
pub(crate) fn run_exists(conn: &Connection, db: &Path, id: &RequestId) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM runs WHERE request_id = ?1")
        .and_then(|mut stmt| stmt.exists([id.as_str()]))
        .map_err(|e| sql_error(db, &e))
}

/// A run's status, if the run exists.
pub(crate) fn run_status(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT status FROM runs WHERE request_id = ?1")
        .and_then(|mut stmt| stmt.query_row([id.as_str()], |row| row.get(0)).optional())
        .map_err(|e| sql_error(db, &e))
}

/// A run's stored events with `after < seq <= up_to`, as stored (JSON lines).
pub(crate) fn stored_lines(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
    after: u64,
    up_to: u64,
) -> Result<Vec<StoredLine>, StoreError> {
    let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "SELECT seq, id, body FROM events WHERE request_id = ?1 AND seq > ?2 AND seq <= ?3 \
         ORDER BY seq",
    )
    .and_then(|mut stmt| {
        stmt.query_map(params![id.as_str(), after, up_to], |row| {
            Ok(StoredLine {
                seq: row.get(0)?,
                id: row.get(1)?,
                body: row.get(2)?,
            })
        })?
        .collect()
    })
    .map_err(|e| sql_error(db, &e))
}

/// The JSON lines of every event committed after event `(id, seq)`, in commit order (the
/// `events` table's rowid order); `None` when that event is not stored (any more).
pub(crate) fn lines_after(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
    seq: u64,
) -> Result<Option<Vec<String>>, StoreError> {
    let sql = |e: rusqlite::Error| sql_error(db, &e);
    let position: Option<i64> = conn
        .prepare_cached("SELECT rowid FROM events WHERE request_id = ?1 AND seq = ?2")
        .and_then(|mut stmt| {
            stmt.query_row(
                params![id.as_str(), i64::try_from(seq).unwrap_or(i64::MAX)],
                |row| row.get(0),
            )
            .optional()
        })
        .map_err(sql)?;
    let Some(position) = position else {
        return Ok(None);
    };
    conn.prepare_cached("SELECT body FROM events WHERE rowid > ?1 ORDER BY rowid")
        .and_then(|mut stmt| stmt.query_map([position], |row| row.get(0))?.collect())
        .map(Some)
        .map_err(sql)
}

/// A run's stored events with `seq > after`, parsed.
pub(crate) fn events(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
    after: u64,
) -> Result<Vec<Event>, StoreError> {
    stored_lines(conn, db, id, after, u64::MAX)?
        .into_iter()
        .map(|line| parse_event(db, id, &line))
        .collect()
}

/// Parses one stored event body.
pub(crate) fn parse_event(
    db: &Path,
    id: &RequestId,
    line: &StoredLine,
) -> Result<Event, StoreError> {
    serde_json::from_str(&line.body).map_err(|e| StoreError::Corrupt {
        location: format!("{} (run {id}, event seq {})", db.display(), line.seq),
        message: e.to_string(),
    })
}

const SESSION_SELECT: &str = "SELECT s.id, s.agent, s.created_at, s.updated_at, \
     (SELECT count(*) FROM runs r WHERE r.session_id = s.id), \
     (SELECT count(*) FROM session_messages m WHERE m.session_id = s.id), s.owner, s.summary \
     FROM sessions s";

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        session_id: SessionId(row.get(0)?),
        agent: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        run_count: row.get(4)?,
        message_count: row.get(5)?,
        owner: row
            .get::<_, Option<String>>(6)?
            .map(|owner| serde_json::from_str(&owner))
            .transpose()
            .map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, e.into())
            })?,
        summary: row
            .get::<_, Option<String>>(7)?
            .map(|summary| serde_json::from_str(&summary))
            .transpose()
            .map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(7, rusqlite::types::Type::Text, e.into())
            })?,
    })
}

/// One session with its counts.
pub(crate) fn get_session(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
) -> Result<Option<SessionRecord>, StoreError> {
    conn.prepare_cached(&format!("{SESSION_SELECT} WHERE s.id = ?1"))
        .and_then(|mut stmt| stmt.query_row([id.as_str()], session_from_row).optional())
        .map_err(|e| sql_error(db, &e))
}

/// Sessions, most recently updated first.
pub(crate) fn list_sessions(
    conn: &Connection,
    db: &Path,
    limit: Option<usize>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    conn.prepare_cached(&format!(
        "{SESSION_SELECT} ORDER BY s.updated_at DESC, s.id DESC LIMIT ?1"
    ))
    .and_then(|mut stmt| {
        stmt.query_map([limit], session_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(|e| sql_error(db, &e))
}

/// A session's transcript in order.
pub(crate) fn session_messages(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
) -> Result<Vec<SessionMessage>, StoreError> {
    let rows: Vec<(u64, String, String)> = conn
        .prepare_cached(
            "SELECT seq, request_id, message FROM session_messages WHERE session_id = ?1 \
             ORDER BY seq",
        )
        .and_then(|mut stmt| {
            stmt.query_map([id.as_str()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?
            .collect()
        })
        .map_err(|e| sql_error(db, &e))?;
    rows.into_iter()
        .map(|(seq, request_id, message)| {
            Ok(SessionMessage {
                seq,
                request_id: RequestId(request_id),
                message: serde_json::from_str(&message).map_err(|e| StoreError::Corrupt {
                    location: format!("{} (session {id}, message {seq})", db.display()),
                    message: e.to_string(),
                })?,
            })
        })
        .collect()
}
