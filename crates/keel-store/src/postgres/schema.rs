//! Versioned migrations of the PostgreSQL store: embedded SQL files applied in order, each in
//! the one transaction that records it in `keel_schema`, under a transaction-scoped advisory
//! lock so replicas starting together apply each migration exactly once.

use keel_types::StoreError;
use sqlx_core::row::Row;
use sqlx_postgres::{PgPool, Postgres};

use super::db_error;

const MIGRATIONS: &[(&str, &str)] = &[
    (
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        "memory",
        include_str!("../../migrations/postgres/0002_memory.sql"),
    ),
    (
        "records as text",
        include_str!("../../migrations/postgres/0003_records_as_text.sql"),
    ),
    (
        "session owner",
        include_str!("../../migrations/postgres/0004_session_owner.sql"),
    ),
    (
        "session summary",
        include_str!("../../migrations/postgres/0005_session_summary.sql"),
    ),
    (
        "eval results",
        include_str!("../../migrations/postgres/0006_eval_results.sql"),
    ),
];

/// The schema version this Keel writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// A key for `pg_advisory_xact_lock` ("keel" in ASCII).
const MIGRATION_LOCK: i64 = 0x6b65_656c;

const CREATE_VERSIONS: &str = "CREATE TABLE IF NOT EXISTS keel_schema (\
     version integer PRIMARY KEY, name text NOT NULL, \
     applied_at timestamptz NOT NULL DEFAULT clock_timestamp())";

/// The applied version (0 for an empty database).
pub(super) async fn version(pool: &PgPool, shown: &str) -> Result<u32, StoreError> {
    let exists: bool = sqlx_core::query_scalar::query_scalar::<Postgres, bool>(
        "SELECT to_regclass('keel_schema') IS NOT NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(|e| db_error(shown, &e))?;
    if !exists {
        return Ok(0);
    }
    let version: Option<i32> =
        sqlx_core::query_scalar::query_scalar("SELECT max(version) FROM keel_schema")
            .fetch_one(pool)
            .await
            .map_err(|e| db_error(shown, &e))?;
    Ok(version.map_or(0, |v| u32::try_from(v).unwrap_or(0)))
}

/// Creates `schema` when it is set and missing, then applies the pending migrations, all
/// under one lock; a database newer than this Keel is refused untouched.
pub(super) async fn migrate(
    pool: &PgPool,
    shown: &str,
    schema: Option<&str>,
) -> Result<u32, StoreError> {
    let error = |e: sqlx_core::Error| db_error(shown, &e);
    let mut tx = pool.begin().await.map_err(error)?;
    sqlx_core::query::query::<Postgres>("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(error)?;
    if let Some(schema) = schema {
        sqlx_core::query::query::<Postgres>(sqlx_core::sql_str::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}"
        )))
        .execute(&mut *tx)
        .await
        .map_err(error)?;
    }
    sqlx_core::query::query::<Postgres>(CREATE_VERSIONS)
        .execute(&mut *tx)
        .await
        .map_err(error)?;
    let found: Option<i32> =
        sqlx_core::query_scalar::query_scalar("SELECT max(version) FROM keel_schema")
            .fetch_one(&mut *tx)
            .await
            .map_err(error)?;
    let found = found.map_or(0, |v| u32::try_from(v).unwrap_or(0));
    if found > SCHEMA_VERSION {
        return Err(StoreError::Version {
            path: shown.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let number = index as i32 + 1;
        sqlx_core::raw_sql::raw_sql(sqlx_core::sql_str::AssertSqlSafe(*sql))
            .execute(&mut *tx)
            .await
            .map_err(|e| StoreError::Io {
                path: shown.to_owned(),
                message: format!("migration {number} ({name}) failed: {e}"),
            })?;
        sqlx_core::query::query::<Postgres>(
            "INSERT INTO keel_schema (version, name) VALUES ($1, $2)",
        )
        .bind(number)
        .bind(*name)
        .execute(&mut *tx)
        .await
        .map_err(error)?;
        tracing::info!(version = number, name, "Applied a store migration.");
    }
    tx.commit().await.map_err(error)?;
    Ok(SCHEMA_VERSION)
}

/// The health probe: reads the version and writes it back in a committed transaction.
pub(super) async fn probe_write(pool: &PgPool, shown: &str) -> Result<u32, StoreError> {
    let error = |e: sqlx_core::Error| db_error(shown, &e);
    let row = sqlx_core::query::query::<Postgres>(
        "UPDATE keel_schema SET version = version WHERE version = \
         (SELECT max(version) FROM keel_schema) RETURNING version",
    )
    .fetch_optional(pool)
    .await
    .map_err(error)?;
    let version: i32 = match row {
        Some(row) => row.try_get(0).map_err(error)?,
        None => 0,
    };
    Ok(u32::try_from(version).unwrap_or(0))
}
