//! Long-term memory on PostgreSQL (migration 0002): one row per version in `memory_records`,
//! the active versions' full-text vectors in a GIN index (ranked with `ts_rank`).
//!
//! - **Changes.** An update, deletion or merge holds a per-record advisory lock for its
//!   transaction, so two changes of one record (on any replicas) apply one after the other,
//!   and locks the current versions' rows (`FOR UPDATE`, in `seq` order, as an expiry does):
//!   a version closed meanwhile is no longer active when its lock is granted, so a change and
//!   an expiry never both win. Closing a version, inserting the next and keeping its vector in
//!   step happen in one transaction.
//! - **Recall.** Text and tags are indexed as the words a query is made of (the SQLite
//!   store's tokenizer, not PostgreSQL's parser): runs of letters and digits, lower-cased,
//!   Latin diacritics removed, so `alice@example.com` holds `alice`, `example` and `com`, as
//!   it does in SQLite. A query is any of its words (`to_tsquery('simple', 'a | b')`).

use std::collections::{HashMap, HashSet};
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

/// Versions inserted by one statement of an import.
const CHUNK: usize = 500;

type Tx = sqlx_core::transaction::Transaction<'static, Postgres>;

fn query(
    sql: &'static str,
) -> sqlx_core::query::Query<'static, Postgres, sqlx_postgres::PgArguments> {
    sqlx_core::query::query::<Postgres>(sql)
}

fn decode(shown: &str, row: &PgRow, index: usize) -> Result<MemoryRecord, StoreError> {
    let text: String = row.try_get(index).map_err(|e| db_error(shown, &e))?;
    serde_json::from_str(&text).map_err(|e| corrupt(TABLE, "record", &e))
}

/// Lower-case letters with diacritics and their base letters (the Latin scripts), and the
/// final sigma: what SQLite's `unicode61 remove_diacritics 2` tokenizer folds.
const FOLDS: &[(char, &str)] = &[
    ('a', "àáâãäåāăąǎȧạảấầẩẫậắằẳẵặ"),
    ('c', "çćĉċč"),
    ('d', "ď"),
    ('e', "èéêëēĕėęěȩẹẻẽếềểễệ"),
    ('g', "ĝğġģǧ"),
    ('h', "ĥ"),
    ('i', "ìíîïĩīĭįǐỉị"),
    ('j', "ĵǰ"),
    ('k', "ķǩ"),
    ('l', "ĺļľ"),
    ('n', "ñńņňǹ"),
    ('o', "òóôõöōŏőơǒȯọỏốồổỗộớờởỡợ"),
    ('r', "ŕŗř"),
    ('s', "śŝşšș"),
    ('t', "ţťț"),
    ('u', "ùúûüũūŭůűųưǔǖǘǚǜụủứừửữự"),
    ('w', "ŵ"),
    ('y', "ýÿŷȳỳỵỷỹ"),
    ('z', "źżž"),
    ('σ', "ς"),
];

/// A lower-case word with its Latin diacritics removed (and `ς` as `σ`).
fn fold_word(word: &str) -> String {
    word.chars()
        .map(|c| match c.is_ascii() {
            true => c,
            false => FOLDS
                .iter()
                .find(|(_, from)| from.contains(c))
                .map_or(c, |(base, _)| *base),
        })
        .collect()
}

/// Text without combining diacritical marks (so a decomposed `é` is one word, as in SQLite).
fn without_marks(text: &str) -> String {
    text.chars()
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .collect()
}

/// The words a version is found by, in order: its text's, then its tags'. Split, lower-cased
/// and folded as a query's words are, joined by spaces (so PostgreSQL's parser sees plain
/// words only).
fn indexed_words(record: &MemoryRecord) -> String {
    let mut words = String::new();
    for part in std::iter::once(&record.text).chain(&record.tags) {
        let part = without_marks(part);
        for word in part.split(|c: char| !c.is_alphanumeric()) {
            if !word.is_empty() {
                if !words.is_empty() {
                    words.push(' ');
                }
                words.push_str(&fold_word(&word.to_lowercase()));
            }
        }
    }
    words
}

/// The `tsquery` for free text: any of its words. Each word is letters and digits only, so
/// none can be read as `tsquery` syntax.
fn ts_query(text: &str) -> Option<String> {
    let mut words: Vec<String> = rules::query_words(&without_marks(text))
        .iter()
        .map(|w| fold_word(w))
        .filter(|w| !w.is_empty() && w.chars().all(char::is_alphanumeric))
        .collect();
    words.sort();
    words.dedup();
    (!words.is_empty()).then(|| words.join(" | "))
}

/// A version number as the `integer` column holds it.
fn version_column(record: &MemoryRecord) -> Result<i32, StoreError> {
    i32::try_from(record.version)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| {
            StoreError::Invalid(format!(
                "memory record `{}` has version {}; versions run from 1 to {}",
                record.id,
                record.version,
                i32::MAX
            ))
        })
}

/// Inserts versions (each with its full-text vector when active), in order: one statement.
async fn insert(
    conn: &mut PgConnection,
    shown: &str,
    records: &[MemoryRecord],
) -> Result<(), StoreError> {
    let n = records.len();
    let (mut ids, mut versions, mut namespaces, mut statuses) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut starts, mut expiries, mut jsons, mut words) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for record in records {
        ids.push(record.id.clone());
        versions.push(version_column(record)?);
        namespaces.push(record.namespace.clone());
        statuses.push(record.status.as_str().to_owned());
        starts.push(record.valid_from.clone());
        expiries.push(record.expires_at.clone());
        jsons.push(to_json(record)?);
        words.push(indexed_words(record));
    }
    query(
        "INSERT INTO memory_records (id, version, namespace, status, valid_from, expires_at, \
         record, search) \
         SELECT id, version, namespace, status, valid_from, expires_at, record, \
         CASE WHEN status = 'active' THEN to_tsvector('simple', words) END \
         FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[], $5::text[], \
         $6::text[], $7::text[], $8::text[]) WITH ORDINALITY \
         AS v (id, version, namespace, status, valid_from, expires_at, record, words, n) \
         ORDER BY n",
    )
    .bind(ids)
    .bind(versions)
    .bind(namespaces)
    .bind(statuses)
    .bind(starts)
    .bind(expiries)
    .bind(jsons)
    .bind(words)
    .execute(&mut *conn)
    .await
    .map_err(|e| match (&e, records) {
        (sqlx_core::Error::Database(db), [record]) if db.is_unique_violation() => {
            StoreError::Invalid(format!(
                "memory record `{}` version {} exists already",
                record.id, record.version
            ))
        }
        (sqlx_core::Error::Database(db), _) if db.is_unique_violation() => {
            StoreError::Invalid(format!("a memory record version exists already ({db})"))
        }
        _ => db_error(shown, &e),
    })?;
    Ok(())
}

/// Serializes the transactions that take the same `key` until they end.
async fn lock(conn: &mut PgConnection, shown: &str, key: &str) -> Result<(), StoreError> {
    query("SELECT pg_advisory_xact_lock(hashtextextended('keel memory ' || $1, 0))")
        .bind(key.to_owned())
        .execute(&mut *conn)
        .await
        .map_err(|e| db_error(shown, &e))?;
    Ok(())
}

/// The latest version of a record.
async fn latest(
    conn: &mut PgConnection,
    shown: &str,
    id: &str,
) -> Result<Option<MemoryRecord>, StoreError> {
    query("SELECT record::text FROM memory_records WHERE id = $1 ORDER BY version DESC LIMIT 1")
        .bind(id.to_owned())
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| db_error(shown, &e))?
        .map(|row| decode(shown, &row, 0))
        .transpose()
}

/// The current, active versions of `ids` with their rows, in the order of `ids`, locked until
/// the transaction ends; or the error naming the first that is not active.
///
/// Rows are locked in `seq` order, as an expiry locks them, so no two transactions wait for
/// each other; a row closed while we waited is left out (no longer `active`).
async fn lock_active(
    conn: &mut PgConnection,
    shown: &str,
    ids: &[&str],
) -> Result<Vec<(i64, MemoryRecord)>, StoreError> {
    let rows = query(
        "SELECT seq, id, record::text FROM memory_records \
         WHERE id = ANY($1) AND status = 'active' ORDER BY seq FOR UPDATE",
    )
    .bind(ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| db_error(shown, &e))?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let seq: i64 = row.try_get(0).map_err(|e| db_error(shown, &e))?;
        let id: String = row.try_get(1).map_err(|e| db_error(shown, &e))?;
        found.insert(id, (seq, decode(shown, row, 2)?));
    }
    let mut current = Vec::with_capacity(ids.len());
    for id in ids {
        match found.remove(*id) {
            Some(version) => current.push(version),
            None => {
                let latest = latest(conn, shown, id).await?;
                return Err(rules::not_active(id, latest.as_ref()));
            }
        }
    }
    Ok(current)
}

/// Closes an active version: the one in-place change a record sees. Only an active row is
/// closed; one closed meanwhile is the error a change of a closed record gets.
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
    let done = query(
        "UPDATE memory_records SET status = $2, record = $3, search = NULL \
         WHERE seq = $1 AND status = 'active'",
    )
    .bind(seq)
    .bind(status.as_str())
    .bind(to_json(&record)?)
    .execute(&mut *conn)
    .await
    .map_err(|e| db_error(shown, &e))?;
    if done.rows_affected() != 1 {
        let latest = latest(conn, shown, &record.id).await?;
        return Err(rules::not_active(&record.id, latest.as_ref()));
    }
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
    insert(conn, shown, std::slice::from_ref(&record)).await?;
    Ok(record)
}

async fn update(
    conn: &mut PgConnection,
    shown: &str,
    (id, change): (&str, &MemoryUpdate),
    by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let Some(current) = lock_active(conn, shown, &[id]).await?.pop() else {
        return Err(rules::not_active(id, None));
    };
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
    insert(conn, shown, std::slice::from_ref(&next)).await?;
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
    let mut both = lock_active(conn, shown, &[&merge.kept, &merge.dropped]).await?;
    let (Some(dropped), Some(kept)) = (both.pop(), both.pop()) else {
        return Err(rules::not_active(&merge.kept, None));
    };
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
    insert(conn, shown, std::slice::from_ref(&next)).await?;
    Ok(next)
}

/// Closes the due versions; each pass locks what is due now (a version a concurrent change
/// inserted while we waited is due in the next pass).
async fn expire(
    conn: &mut PgConnection,
    shown: &str,
    now: &str,
) -> Result<Vec<MemoryRecord>, StoreError> {
    let mut expired = Vec::new();
    loop {
        let due = query(
            "SELECT seq, record::text FROM memory_records WHERE status = 'active' \
             AND expires_at IS NOT NULL AND expires_at <= $1 ORDER BY seq FOR UPDATE",
        )
        .bind(now.to_owned())
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| db_error(shown, &e))?;
        if due.is_empty() {
            return Ok(expired);
        }
        for row in due {
            let seq: i64 = row.try_get(0).map_err(|e| db_error(shown, &e))?;
            let record = decode(shown, &row, 1)?;
            let why = ("ttl", Some("past its time to live"));
            let closed = close(conn, shown, (seq, record), MemoryStatus::Expired, why, now);
            expired.push(closed.await?);
        }
    }
}

/// Checks an export before anything is written: the first version (in order) whose record
/// exists already, or that cannot be stored, is the error, as in the SQLite store.
async fn check_import(
    conn: &mut PgConnection,
    shown: &str,
    records: &[MemoryRecord],
) -> Result<(), StoreError> {
    let ids: Vec<String> = records
        .iter()
        .map(|r| r.id.clone())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let existing: HashSet<String> = sqlx_core::query_scalar::query_scalar::<Postgres, String>(
        "SELECT DISTINCT id FROM memory_records WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| db_error(shown, &e))?
    .into_iter()
    .collect();
    let mut seen = HashSet::new();
    for record in records {
        if existing.contains(&record.id) {
            return Err(rules::exists_already(&record.id));
        }
        version_column(record).map_err(|e| rules::import_error(record, e))?;
        if !seen.insert((record.id.as_str(), record.version)) {
            let twice = StoreError::Invalid(format!(
                "memory record `{}` version {} exists already",
                record.id, record.version
            ));
            return Err(rules::import_error(record, twice));
        }
    }
    Ok(())
}

impl PgStore {
    /// A transaction holding the advisory locks of `keys` (taken in sorted order).
    async fn begin_memory(&self, keys: &[&str]) -> Result<Tx, StoreError> {
        self.ready().await?;
        let mut tx = self.pool().begin().await.map_err(|e| self.db_error(&e))?;
        let mut sorted = keys.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for key in sorted {
            lock(&mut tx, self.shown_url(), key).await?;
        }
        Ok(tx)
    }

    async fn commit_memory<T>(&self, tx: Tx, value: T) -> Result<T, StoreError> {
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

/// The advisory lock an import holds: one for every import, not one per record (an export
/// may hold more records than the server's lock table).
const IMPORT_LOCK: &str = "import";

#[async_trait]
impl MemoryStore for PgStore {
    async fn store_memory(
        &self,
        candidate: &MemoryCandidate,
        approved_by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let mut tx = self.begin_memory(&[]).await?;
        let stored = store_in(&mut tx, self.shown_url(), candidate, approved_by, &now).await?;
        self.commit_memory(tx, stored).await
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
        // Byte order, as SQLite sorts (whatever the database's collation).
        sqlx_core::query_scalar::query_scalar::<Postgres, String>(
            "SELECT namespace FROM (SELECT DISTINCT namespace FROM memory_records \
             WHERE status = 'active') n ORDER BY namespace COLLATE \"C\"",
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
        // Normalization 1: divided by 1 + log(words), so a short record that matches ranks
        // above a long one, as with bm25.
        let rows = query(
            "SELECT m.record::text, ts_rank(m.search, q, 1)::float8 AS score \
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
        let mut tx = self.begin_memory(&[id]).await?;
        let next = update(&mut tx, self.shown_url(), (id, change), by, &now).await?;
        self.commit_memory(tx, next).await
    }

    async fn delete_memory(
        &self,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let shown = self.shown_url();
        let mut tx = self.begin_memory(&[id]).await?;
        let Some(current) = lock_active(&mut tx, shown, &[id]).await?.pop() else {
            return Err(rules::not_active(id, None));
        };
        let why = (by, reason);
        let closed = close(&mut tx, shown, current, MemoryStatus::Deleted, why, &now).await?;
        self.commit_memory(tx, closed).await
    }

    async fn expire_memory(&self, now: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        let mut tx = self.begin_memory(&[]).await?;
        let expired = expire(&mut tx, self.shown_url(), now).await?;
        self.commit_memory(tx, expired).await
    }

    async fn merge_memory(
        &self,
        request: &MemoryMerge,
        by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let now = keel_types::now_rfc3339();
        let mut tx = self
            .begin_memory(&[request.kept.as_str(), request.dropped.as_str()])
            .await?;
        let next = merge(&mut tx, self.shown_url(), request, by, &now).await?;
        self.commit_memory(tx, next).await
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
        // A version past the column's range matches no row (nothing to keep), as in SQLite.
        query("UPDATE memory_records SET embedding = $3 WHERE id = $1 AND version = $2")
            .bind(id.to_owned())
            .bind(i64::from(version))
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
        let rows = query("SELECT seq, record::text FROM memory_records WHERE seq = ANY($1)")
            .bind(scored.iter().map(|(_, seq)| *seq).collect::<Vec<_>>())
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.db_error(&e))?;
        let mut records = HashMap::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.try_get(0).map_err(|e| self.db_error(&e))?;
            records.insert(seq, decode(self.shown_url(), row, 1)?);
        }
        Ok(scored
            .into_iter()
            .filter_map(|(similarity, seq)| {
                records.remove(&seq).map(|record| MemoryHit {
                    record,
                    text_score: None,
                    similarity: Some(similarity),
                    score: similarity,
                })
            })
            .collect())
    }

    async fn import_memory(&self, records: &[MemoryRecord]) -> Result<u64, StoreError> {
        let shown = self.shown_url();
        // Imports run one at a time; nothing else writes a record id that does not exist yet
        // (new records get fresh ids), so the check below stays true until the commit.
        let mut tx = self.begin_memory(&[IMPORT_LOCK]).await?;
        check_import(&mut tx, shown, records).await?;
        for chunk in records.chunks(CHUNK) {
            insert(&mut tx, shown, chunk)
                .await
                .map_err(|e| match chunk {
                    [record] => rules::import_error(record, e),
                    _ => e,
                })?;
        }
        self.commit_memory(tx, records.len() as u64).await
    }

    /// A database server is backed up with its own tools.
    async fn backup(&self, _to: &Path) -> Result<(), StoreError> {
        let schema = match &self.inner.options.schema {
            Some(schema) => format!("--schema={schema} "),
            None => String::new(),
        };
        Err(StoreError::Invalid(format!(
            "the PostgreSQL store is backed up with the database's own tools (e.g. `pg_dump \
             {schema}{}`), not by keel",
            self.shown_url()
        )))
    }
}
