//! Reading records that a table keeps whole as JSON in a `record` column (tasks, approvals, skill candidates).

use std::path::Path;

use keel_types::StoreError;
use rusqlite::{Connection, OptionalExtension, Params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::connection::sql_error;

/// A record as the JSON its `record` column keeps.
pub(super) fn encode<T: Serialize>(record: &T) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A record that does not parse: named by its table.
pub(super) fn corrupt(db: &Path, table: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        location: format!("{} ({table})", db.display()),
        message: error.to_string(),
    }
}

/// The record the query (selecting one JSON column) finds, if any.
pub(super) fn one<T: DeserializeOwned>(
    conn: &Connection,
    db: &Path,
    table: &str,
    sql: &str,
    params: impl Params,
) -> Result<Option<T>, StoreError> {
    let record: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut stmt| stmt.query_row(params, |row| row.get(0)).optional())
        .map_err(|e| sql_error(db, &e))?;
    record
        .map(|r| serde_json::from_str(&r).map_err(|e| corrupt(db, table, e)))
        .transpose()
}

/// Every record the query (selecting one JSON column) finds, in its order.
pub(super) fn many<T: DeserializeOwned>(
    conn: &Connection,
    db: &Path,
    table: &str,
    sql: &str,
    params: impl Params,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(|e| sql_error(db, &e))?;
    let rows = stmt
        .query_map(params, |row| row.get::<_, String>(0))
        .map_err(|e| sql_error(db, &e))?;
    let mut records = Vec::new();
    for row in rows {
        let record = row.map_err(|e| sql_error(db, &e))?;
        records.push(serde_json::from_str(&record).map_err(|e| corrupt(db, table, e))?);
    }
    Ok(records)
}
