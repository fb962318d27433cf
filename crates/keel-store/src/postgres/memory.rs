//! Long-term memory on PostgreSQL (migration 0002): one row per version in `memory_records`,
//! the active versions' full-text vectors in a GIN index (ranked with `ts_rank`).
//!
//! Each change is one transaction holding a per-record advisory lock, so two changes of one
//! record (on any replicas) apply one after the other: closing a version, inserting the next
//! and keeping the vector in step happen together or not at all.

use std::path::Path;

use async_trait::async_trait;
use keel_types::{
    MemoryCandidate, MemoryFilter, MemoryHit, MemoryMerge, MemoryRecord, MemoryStatus, MemoryStore,
    MemoryUpdate, StoreError,
};
use sqlx_core::row::Row;
use sqlx_postgres::{PgConnection, PgRow, Postgres};

use super::{PgStore, corrupt, db_error, to_json};
use crate::memory_rules as rules;

const TABLE: &str = "memory_records";

fn query(
    sql: &'static str,
) -> sqlx_core::query::Query<'static, Postgres, sqlx_postgres::PgArguments> {
    sqlx_core::query::query::<Postgres>(sql)
}

fn decode(shown: &str, row: &PgRow, index: usize) -> Result<MemoryRecord, StoreError> {
    let text: String = row.try_get(index).map_err(|e| db_error(shown, &e))?;
    serde_json::from_str(&text).map_err(|e| corrupt(TABLE, "record", &e))
}

/// Inserts one version (with its full-text vector when active).
async fn insert(
    conn: &mut PgConnection,
    shown: &str,
    record: &MemoryRecord,
) -> Result<(), StoreError> {
    query(
        "INSERT INTO memory_records (id, version, namespace, status, valid_from, expires_at, \
         record, search) VALUES ($1, $2, $3, $4, $5, $6, $7, \
         CASE WHEN $4 = 'active' THEN to_tsvector('simple', $8) END)",
    )
    .bind(&record.id)
    .bind(i32::try_from(record.version).unwrap_or(i32::MAX))
    .bind(&record.namespace)
    .bind(record.status.as_str())
    .bind(&record.valid_from)
    .bind(record.expires_at.as_deref())
    .bind(to_json(record)?)
    // The search vector only: a NUL cannot be in PostgreSQL text (the record keeps it).
    .bind(format!("{} {}", record.text, record.tags.join(" ")).replace('\0', " "))
    .execute(&mut *conn)
    .await
    .map_err(|e| match &e {
        sqlx_core::Error::Database(db) if db.is_unique_violation() => StoreError::Invalid(format!(
            "memory record `{}` version {} exists already",
            record.id, record.version
        )),
        _ => db_error(shown, &e),
    })?;
    Ok(())
}

/// Serializes the changes of record `id` until the transaction ends.
async fn lock(conn: &mut PgConnection, shown: &str, id: &str) -> Result<(), StoreError> {
    query("SELECT pg_advisory_xact_lock(hashtextextended('keel memory ' || $1, 0))")
        .bind(id.to_owned())
        .execute(&mut *conn)
        .await
        .map_err(|e| db_error(shown, &e))?;
    Ok(())
}

/// The latest version of a record and its row.
async fn latest(
    conn: &mut PgConnection,
    shown: &str,
    id: &str,
) -> Result<Option<(i64, MemoryRecord)>, StoreError> {
    let row = query(
        "SELECT seq, record::text FROM memory_records WHERE id = $1 ORDER BY version DESC LIMIT 1",
    )
    .bind(id.to_owned())
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| db_error(shown, &e))?;
    match row {
        Some(row) => {
            let seq: i64 = row.try_get(0).map_err(|e| db_error(shown, &e))?;
            Ok(Some((seq, decode(shown, &row, 1)?)))
        }
        None => Ok(None),
    }
}

/// The current, active version of a record, or a clear error.
async fn active(
    conn: &mut PgConnection,
    shown: &str,
    id: &str,
) -> Result<(i64, MemoryRecord), StoreError> {
    match latest(conn, shown, id).await? {
        Some((seq, record)) if record.status == MemoryStatus::Active => Ok((seq, record)),
        other => Err(rules::not_active(id, other.as_ref().map(|(_, r)| r))),
    }
}

/// Closes an active version: the one in-place change a record sees.
async fn close(
    conn: &mut PgConnection,
    shown: &str,
    (seq, record): (i64, MemoryRecord),
    status: MemoryStatus,
    why: (&str, Option<&str>),
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let (by, reason) = why;
    let record = rules::closed(record, status, by, reason, now);
    query("UPDATE memory_records SET status = $2, record = $3, search = NULL WHERE seq = $1")
        .bind(seq)
        .bind(status.as_str())
        .bind(to_json(&record)?)
        .execute(&mut *conn)
        .await
        .map_err(|e| db_error(shown, &e))?;
    Ok(record)
}

/// Stores a candidate as a new record (version 1) inside the caller's transaction.
pub(super) async fn store_in(
    conn: &mut PgConnection,
    shown: &str,
    candidate: &MemoryCandidate,
    approved_by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let record = rules::first_version(candidate, approved_by, now);
    insert(conn, shown, &record).await?;
    Ok(record)
}

async fn update(
    conn: &mut PgConnection,
    shown: &str,
    (id, change): (&str, &MemoryUpdate),
    by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let current = active(conn, shown, id).await?;
    let next = rules::updated(&current.1, change, by, now);
    close(
        conn,
        shown,
        current,
        MemoryStatus::Superseded,
        (by, Some("updated")),
        now,
    )
    .await?;
    insert(conn, shown, &next).await?;
    Ok(next)
}

async fn merge(
    conn: &mut PgConnection,
    shown: &str,
    merge: &MemoryMerge,
    by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    rules::check_not_self(merge)?;
    let kept = active(conn, shown, &merge.kept).await?;
    let dropped = active(conn, shown, &merge.dropped).await?;
    rules::check_merge(merge, &kept.1, &dropped.1)?;
    let reason = rules::dropped_reason(merge);
    let dropped = close(
        conn,
        shown,
        dropped,
        MemoryStatus::Deleted,
        (by, Some(&reason)),
        now,
    )
    .await?;
    let next = rules::merged(&kept.1, dropped, merge, now);
    close(
        conn,
        shown,
        kept,
        MemoryStatus::Superseded,
        (by, Some(&merge.reason)),
        now,
    )
    .await?;
    insert(conn, shown, &next).await?;
    Ok(next)
}

/// The `tsquery` for free text: any of its words.
fn ts_query(text: &str) -> Option<String> {
    let words = rules::query_words(text);
    (!words.is_empty()).then(|| words.join(" | "))
}

impl PgStore {
    /// A transaction holding the advisory locks of `ids`.
    async fn begin(
        &self,
        ids: &[&str],
    ) -> Result<sqlx_core::transaction::Transaction<'static, Postgres>, StoreError> {
        self.ready().await?;
        let mut tx = self.pool().begin().await.map_err(|e| self.db_error(&e))?;
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for id in sorted {
            lock(&mut tx, self.shown_url(), id).await?;
        }
        Ok(tx)
    }

    async fn commit<T>(
        &self,
        tx: sqlx_core::transaction::Transaction<'static, Postgres>,
        value: T,
    ) -> Result<T, StoreError> {
        tx.commit().await.map_err(|e| self.db_error(&e))?;
        Ok(value)
    }

    async fn memory_rows(
        &self,
        q: sqlx_core::query::Query<'_, Postgres, sqlx_postgres::PgArguments>,
    ) -> Result<Vec<MemoryRecord>, StoreError> {
        self.ready().await?;
        let rows = q
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.db_error(&e))?;
        rows.iter()
            .map(|row| decode(self.shown_url(), row, 0))
            .collect()
    }
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn store_memory(
        &self,
        candidate: &MemoryCandidate,
        approved_by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let mut tx = self.begin(&[]).await?;
        let stored = store_in(&mut tx, self.shown_url(), candidate, approved_by, &now).await?;
        self.commit(tx, stored).await
    }

    async fn get_memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        let rows = self
            .memory_rows(
                query(
                    "SELECT record::text FROM memory_records WHERE id = $1 \
                     ORDER BY version DESC LIMIT 1",
                )
                .bind(id.to_owned()),
            )
            .await?;
        Ok(rows.into_iter().next())
    }

    async fn memory_history(&self, id: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        self.memory_rows(
            query("SELECT record::text FROM memory_records WHERE id = $1 ORDER BY version")
                .bind(id.to_owned()),
        )
        .await
    }

    async fn list_memory(&self, filter: &MemoryFilter) -> Result<Vec<MemoryRecord>, StoreError> {
        let sql = match filter.oldest_first {
            true => {
                "SELECT record::text FROM memory_records WHERE ($1::text IS NULL OR namespace = $1) \
                 AND ($2 OR status = 'active') ORDER BY seq ASC LIMIT $3"
            }
            false => {
                "SELECT record::text FROM memory_records WHERE ($1::text IS NULL OR namespace = $1) \
                 AND ($2 OR status = 'active') ORDER BY valid_from DESC, seq DESC LIMIT $3"
            }
        };
        self.memory_rows(
            query(sql)
                .bind(filter.namespace.clone())
                .bind(filter.all_versions)
                .bind(filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX))),
        )
        .await
    }

    async fn memory_namespaces(&self) -> Result<Vec<String>, StoreError> {
        self.ready().await?;
        sqlx_core::query_scalar::query_scalar::<Postgres, String>(
            "SELECT DISTINCT namespace FROM memory_records WHERE status = 'active' \
             ORDER BY namespace",
        )
        .fetch_all(self.pool())
        .await
        .map_err(|e| self.db_error(&e))
    }

    async fn search_memory(
        &self,
        namespaces: &[String],
        text: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let Some(words) = ts_query(text) else {
            return Ok(Vec::new());
        };
        if namespaces.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        self.ready().await?;
        let rows = query(
            "SELECT m.record::text, ts_rank(m.search, q)::float8 AS score \
             FROM memory_records m, to_tsquery('simple', $1) q \
             WHERE m.status = 'active' AND m.namespace = ANY($2) AND m.search @@ q \
             ORDER BY score DESC, m.seq DESC LIMIT $3",
        )
        .bind(words)
        .bind(namespaces.to_vec())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await
        .map_err(|e| self.db_error(&e))?;
        rows.iter()
            .map(|row| {
                let score: f64 = row.try_get(1).map_err(|e| self.db_error(&e))?;
                Ok(MemoryHit {
                    record: decode(self.shown_url(), row, 0)?,
                    text_score: Some(score),
                    similarity: None,
                    score,
                })
            })
            .collect()
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryUpdate,
        by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let mut tx = self.begin(&[id]).await?;
        let next = update(&mut tx, self.shown_url(), (id, change), by, &now).await?;
        self.commit(tx, next).await
    }

    async fn delete_memory(
        &self,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let shown = self.shown_url();
        let mut tx = self.begin(&[id]).await?;
        let current = active(&mut tx, shown, id).await?;
        let closed = close(
            &mut tx,
            shown,
            current,
            MemoryStatus::Deleted,
            (by, reason),
            &now,
        )
        .await?;
        self.commit(tx, closed).await
    }

    async fn expire_memory(&self, now: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        let shown = self.shown_url();
        let mut tx = self.begin(&[]).await?;
        let due = query(
            "SELECT seq, record::text FROM memory_records WHERE status = 'active' \
             AND expires_at IS NOT NULL AND expires_at <= $1 ORDER BY seq FOR UPDATE",
        )
        .bind(now.to_owned())
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| db_error(shown, &e))?;
        let mut expired = Vec::with_capacity(due.len());
        for row in due {
            let seq: i64 = row.try_get(0).map_err(|e| db_error(shown, &e))?;
            let record = decode(shown, &row, 1)?;
            let why = ("ttl", Some("past its time to live"));
            expired.push(
                close(
                    &mut tx,
                    shown,
                    (seq, record),
                    MemoryStatus::Expired,
                    why,
                    now,
                )
                .await?,
            );
        }
        self.commit(tx, expired).await
    }

    async fn merge_memory(
        &self,
        request: &MemoryMerge,
        by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let mut tx = self
            .begin(&[request.kept.as_str(), request.dropped.as_str()])
            .await?;
        let next = merge(&mut tx, self.shown_url(), request, by, &now).await?;
        self.commit(tx, next).await
    }

    async fn memory_without_embedding(
        &self,
        namespaces: &[String],
        limit: usize,
    ) -> Result<Vec<(String, u32, String)>, StoreError> {
        if namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let records = self
            .memory_rows(
                query(
                    "SELECT record::text FROM memory_records WHERE status = 'active' \
                     AND embedding IS NULL AND namespace = ANY($1) ORDER BY seq LIMIT $2",
                )
                .bind(namespaces.to_vec())
                .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await?;
        Ok(records
            .into_iter()
            .map(|r| (r.id, r.version, r.text))
            .collect())
    }

    async fn set_memory_embedding(
        &self,
        id: &str,
        version: u32,
        embedding: &[f32],
    ) -> Result<(), StoreError> {
        self.ready().await?;
        query("UPDATE memory_records SET embedding = $3 WHERE id = $1 AND version = $2")
            .bind(id.to_owned())
            .bind(i32::try_from(version).unwrap_or(i32::MAX))
            .bind(embedding.to_vec())
            .execute(self.pool())
            .await
            .map_err(|e| self.db_error(&e))?;
        Ok(())
    }

    async fn nearest_memory(
        &self,
        namespaces: &[String],
        embedding: &[f32],
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        if namespaces.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        self.ready().await?;
        // Score every embedding, then read only the best records.
        let rows = query(
            "SELECT seq, embedding FROM memory_records WHERE status = 'active' \
             AND embedding IS NOT NULL AND namespace = ANY($1)",
        )
        .bind(namespaces.to_vec())
        .fetch_all(self.pool())
        .await
        .map_err(|e| self.db_error(&e))?;
        let mut scored: Vec<(f64, i64)> = Vec::with_capacity(rows.len());
        for row in rows {
            let vector: Vec<f32> = row.try_get(1).map_err(|e| self.db_error(&e))?;
            let seq: i64 = row.try_get(0).map_err(|e| self.db_error(&e))?;
            scored.push((rules::cosine(embedding, &vector), seq));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(limit);
        let mut hits = Vec::with_capacity(scored.len());
        for (similarity, seq) in scored {
            let row = query("SELECT record::text FROM memory_records WHERE seq = $1")
                .bind(seq)
                .fetch_one(self.pool())
                .await
                .map_err(|e| self.db_error(&e))?;
            hits.push(MemoryHit {
                record: decode(self.shown_url(), &row, 0)?,
                text_score: None,
                similarity: Some(similarity),
                score: similarity,
            });
        }
        Ok(hits)
    }

    async fn import_memory(&self, records: &[MemoryRecord]) -> Result<u64, StoreError> {
        let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        let shown = self.shown_url();
        let mut tx = self.begin(&ids).await?;
        let mut seen = std::collections::HashSet::new();
        for record in records {
            if seen.insert(record.id.as_str())
                && latest(&mut tx, shown, &record.id).await?.is_some()
            {
                return Err(rules::exists_already(&record.id));
            }
            insert(&mut tx, shown, record)
                .await
                .map_err(|e| rules::import_error(record, e))?;
        }
        self.commit(tx, records.len() as u64).await
    }

    /// A database server is backed up with its own tools.
    async fn backup(&self, _to: &Path) -> Result<(), StoreError> {
        Err(StoreError::Invalid(format!(
            "the PostgreSQL store is backed up with the database's own tools (e.g. `pg_dump \
             {}`), not by keel",
            self.shown_url()
        )))
    }
}
