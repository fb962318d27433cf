//! Eval results on the SQLite store: the whole result as JSON beside the columns lists
//! filter and sort on; saving again replaces the row.

use std::path::Path;

use keel_types::StoreError;
use keel_types::eval::EvalResult;
use rusqlite::{Connection, params};

use super::connection::sql_error;
use super::json_rows;

/// Inserts or replaces a result.
pub(super) fn save(conn: &Connection, db: &Path, result: &EvalResult) -> Result<(), StoreError> {
    let record = json_rows::encode(result)?;
    conn.prepare_cached(
        "INSERT INTO eval_results (id, eval, started_at, record) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (id) DO UPDATE SET record = excluded.record",
    )
    .and_then(|mut stmt| stmt.execute(params![result.id, result.eval, result.started_at, record]))
    .map_err(|e| sql_error(db, &e))?;
    Ok(())
}

/// One result.
pub(super) fn get(
    conn: &Connection,
    db: &Path,
    id: &str,
) -> Result<Option<EvalResult>, StoreError> {
    json_rows::one(
        conn,
        db,
        "eval_results",
        "SELECT record FROM eval_results WHERE id = ?1",
        [id],
    )
}

/// Results, newest first.
pub(super) fn list(
    conn: &Connection,
    db: &Path,
    eval: Option<&str>,
    limit: usize,
) -> Result<Vec<EvalResult>, StoreError> {
    json_rows::many(
        conn,
        db,
        "eval_results",
        "SELECT record FROM eval_results WHERE ?1 IS NULL OR eval = ?1 \
         ORDER BY started_at DESC, id DESC LIMIT ?2",
        params![eval, i64::try_from(limit).unwrap_or(i64::MAX)],
    )
}
