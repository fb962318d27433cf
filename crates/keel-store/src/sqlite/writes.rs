//! The write operations other than appends, each run by the writer thread inside a batch
//! transaction: creating runs (owned by this process), crash recovery, claiming, transcripts.
//! Their follow-ups on files (mirrors) run after the commit, from `super`.

use std::path::Path;

use keel_types::{RequestId, RunRecord, SessionId, SessionRecord, StoreError};
use rusqlite::{Connection, params};

use super::connection::sql_error;
use super::rows::{self, RUN_COLUMNS, RunColumns};
use crate::owner::{self, Owner};

/// The statement inserting a run: its columns, then its owner process's.
static INSERT_RUN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let count = RUN_COLUMNS.split(',').count() + 3;
    let placeholders = (1..=count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO runs ({RUN_COLUMNS}, owner_pid, owner_start, owner_boot) \
         VALUES ({placeholders})"
    )
});

/// Inserts a new run owned by `owner` and touches its session; returns its id.
pub(super) fn insert_run(
    conn: &Connection,
    db: &Path,
    columns: &RunColumns,
    owner: &Owner,
    now: &str,
) -> Result<RequestId, StoreError> {
    let id = RequestId(columns.request_id.clone());
    if rows::run_exists(conn, db, &id)? {
        return Err(StoreError::Invalid(format!("run `{id}` already exists")));
    }
    write_run(conn, db, columns, owner, now)?;
    Ok(id)
}

/// Inserts a run whose id was checked to be free, and touches its session.
pub(super) fn write_run(
    conn: &Connection,
    db: &Path,
    columns: &RunColumns,
    owner: &Owner,
    now: &str,
) -> Result<(), StoreError> {
    let mut values = columns.values().to_vec();
    values.extend([
        &owner.pid as &dyn rusqlite::ToSql,
        &owner.start,
        &owner.boot,
    ]);
    conn.prepare_cached(&INSERT_RUN)
        .and_then(|mut stmt| stmt.execute(values.as_slice()))
        .map_err(|e| sql_error(db, &e))?;
    if let Some(session) = &columns.session_id {
        // A new request is activity in its session.
        conn.prepare_cached(
            "UPDATE sessions SET updated_at = ?2 WHERE id = ?1 AND updated_at < ?2",
        )
        .and_then(|mut stmt| stmt.execute(params![session, now]))
        .map_err(|e| sql_error(db, &e))?;
    }
    Ok(())
}

/// Replaces a run's record (everything but its owner).
///
/// In two statements, because SQLite rewrites the entry of every index on a column an `UPDATE`
/// sets, changed or not: the first sets what changes as a run goes on (of the indexed columns
/// only `status`), the second the indexed columns a run keeps, and only when one of them
/// differs — so ending a run writes about half the pages it would otherwise.
pub(super) fn update_run(
    conn: &Connection,
    db: &Path,
    columns: &RunColumns,
) -> Result<(), StoreError> {
    let values = columns.values();
    let changed = conn
        .prepare_cached(
            "UPDATE runs SET status = ?4, input = ?5, output = ?6, error = ?7, \
             finish_reason = ?8, usage = ?9, steps = ?10, ended_at = ?12, event_count = ?13, \
             fork_seq = ?18, resumed = ?19, parent_call = ?22, value = ?23, trace = ?24 \
             WHERE request_id = ?1",
        )
        .and_then(|mut stmt| stmt.execute(values))
        .map_err(|e| sql_error(db, &e))?;
    if changed == 0 {
        return Err(StoreError::NotFound(columns.request_id.clone()));
    }
    // `?21` is the last parameter this statement names.
    conn.prepare_cached(
        "UPDATE runs SET session_id = ?2, agent = ?3, started_at = ?11, parent_id = ?14, \
         retry_of = ?15, replay_of = ?16, forked_from = ?17, owner = ?20, root_id = ?21 \
         WHERE request_id = ?1 AND (session_id IS NOT ?2 OR agent IS NOT ?3 \
         OR started_at IS NOT ?11 OR parent_id IS NOT ?14 OR retry_of IS NOT ?15 \
         OR replay_of IS NOT ?16 OR forked_from IS NOT ?17 OR owner IS NOT ?20 \
         OR root_id IS NOT ?21)",
    )
    .and_then(|mut stmt| stmt.execute(&values[..21]))
    .map_err(|e| sql_error(db, &e))?;
    Ok(())
}

/// Deletes ended runs (completed, failed, cancelled — not interrupted: those can still be
/// resumed) that started before `before`, with their events; returns their ids.
pub(super) fn delete_ended_runs(
    conn: &Connection,
    db: &Path,
    before: &str,
) -> Result<Vec<RequestId>, StoreError> {
    conn.prepare_cached(
        "DELETE FROM runs WHERE status IN ('completed', 'failed', 'cancelled') \
         AND started_at < ?1 RETURNING request_id",
    )
    .and_then(|mut stmt| {
        stmt.query_map([before], |row| row.get(0).map(RequestId))?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(|e| sql_error(db, &e))
}

/// Creates the session if it does not exist and returns it with its counts.
pub(super) fn ensure_session(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
    agent: &str,
    owner: &str,
    now: &str,
) -> Result<SessionRecord, StoreError> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, agent, created_at, updated_at, owner) \
         VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (id) DO NOTHING",
    )
    .and_then(|mut stmt| stmt.execute(params![id.as_str(), agent, now, owner]))
    .map_err(|e| sql_error(db, &e))?;
    rows::get_session(conn, db, id)?
        .ok_or_else(|| StoreError::Invalid(format!("session `{id}` vanished while created")))
}

/// Deletes a session; its transcript goes with it (ON DELETE CASCADE), its runs stay.
pub(super) fn delete_session(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
) -> Result<bool, StoreError> {
    conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute([id.as_str()]))
        .map(|deleted| deleted > 0)
        .map_err(|e| sql_error(db, &e))
}

pub(super) fn set_session_summary(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
    summary: &str,
) -> Result<bool, StoreError> {
    conn.prepare_cached("UPDATE sessions SET summary = ?2 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute([id.as_str(), summary]))
        .map(|updated| updated > 0)
        .map_err(|e| sql_error(db, &e))
}

/// Marks active runs whose owner process is gone as `interrupted`; returns their ids.
pub(super) fn interrupt_orphans(
    conn: &Connection,
    db: &Path,
) -> Result<Vec<RequestId>, StoreError> {
    type Candidate = (String, Option<i64>, Option<i64>, Option<String>);
    let candidates: Vec<Candidate> = conn
        .prepare_cached(
            "SELECT request_id, owner_pid, owner_start, owner_boot FROM runs \
             WHERE status IN ('running', 'waiting_approval')",
        )
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(|e| sql_error(db, &e))?;
    let mut interrupted = Vec::new();
    for (id, pid, start, boot) in candidates {
        if owner::is_alive(pid, start, boot.as_deref()) {
            continue;
        }
        conn.prepare_cached(
            "UPDATE runs SET status = 'interrupted' \
             WHERE request_id = ?1 AND status IN ('running', 'waiting_approval')",
        )
        .and_then(|mut stmt| stmt.execute([id.as_str()]))
        .map_err(|e| sql_error(db, &e))?;
        interrupted.push(RequestId(id));
    }
    Ok(interrupted)
}

/// Switches an interrupted run to running under `owner` — one conditional UPDATE, so exactly
/// one claimer wins — and returns the updated record.
pub(super) fn claim_run(
    conn: &Connection,
    db: &Path,
    id: &RequestId,
    owner: &Owner,
) -> Result<RunRecord, StoreError> {
    let changed = conn
        .prepare_cached(
            "UPDATE runs SET status = 'running', resumed = resumed + 1, owner_pid = ?2, \
             owner_start = ?3, owner_boot = ?4, output = NULL, error = NULL, \
             finish_reason = NULL, ended_at = NULL \
             WHERE request_id = ?1 AND status = 'interrupted'",
        )
        .and_then(|mut stmt| stmt.execute(params![id.as_str(), owner.pid, owner.start, owner.boot]))
        .map_err(|e| sql_error(db, &e))?;
    if changed == 0 {
        return Err(match rows::run_status(conn, db, id)? {
            None => StoreError::NotFound(id.to_string()),
            Some(status) => StoreError::Invalid(format!(
                "run `{id}` is {status}; only an interrupted run can be claimed"
            )),
        });
    }
    rows::get_run(conn, db, id)?.ok_or_else(|| StoreError::NotFound(id.to_string()))
}

/// Appends transcript messages after the session's last one and touches the session.
pub(super) fn append_messages(
    conn: &Connection,
    db: &Path,
    id: &SessionId,
    request_id: &RequestId,
    messages: &[String],
    now: &str,
) -> Result<(), StoreError> {
    let sql = |e: rusqlite::Error| sql_error(db, &e);
    let touched = conn
        .prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute(params![id.as_str(), now]))
        .map_err(sql)?;
    if touched == 0 {
        return Err(StoreError::Invalid(format!(
            "no session `{id}`; ensure_session creates it"
        )));
    }
    let last: u64 = conn
        .prepare_cached("SELECT COALESCE(max(seq), 0) FROM session_messages WHERE session_id = ?1")
        .and_then(|mut stmt| stmt.query_row([id.as_str()], |row| row.get(0)))
        .map_err(sql)?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO session_messages (session_id, seq, request_id, message) \
             VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(sql)?;
    for (seq, message) in (last + 1..).zip(messages) {
        insert
            .execute(params![id.as_str(), seq, request_id.as_str(), message])
            .map_err(sql)?;
    }
    Ok(())
}

/// Deletes a pruned run's mirror folder (already gone is fine).
pub(super) fn remove_mirror_dir(dir: Option<&Path>) {
    let Some(dir) = dir else { return };
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(path = %dir.display(), %error, "Cannot delete a pruned run's mirror.");
        }
    }
}

/// The health probe's write: reads the schema version under the write lock and writes it back
/// unchanged, so the batch's commit really writes (and syncs) a page. Returns the version.
pub(crate) fn probe_write(conn: &Connection, db: &Path) -> Result<u32, StoreError> {
    let version = super::connection::schema_version(conn, db)?;
    conn.pragma_update(None, "user_version", version)
        .map_err(|e| sql_error(db, &e))?;
    Ok(version)
}
