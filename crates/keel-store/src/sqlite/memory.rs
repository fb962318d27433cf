//! Long-term memory on the SQLite store (migration 0006): one row per version in
//! `memory_records`, the active versions in the FTS5 table `memory_fts` (bm25 ranking).
//!
//! Every change is one writer job, so one transaction: closing a version (the only in-place
//! change: its `status` and `validTo`), inserting the next and keeping the full-text index in
//! step happen together or not at all.

use std::path::Path;

use async_trait::async_trait;
use keel_types::{
    MemoryCandidate, MemoryFilter, MemoryHit, MemoryMerge, MemoryRecord, MemoryStatus, MemoryStore,
    MemoryUpdate, StoreError,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::SqliteStore;
use super::connection::sql_error;
use super::json_rows;
use crate::memory_rules as rules;

const TABLE: &str = "memory_records";

/// Adds `delta` to the active count of `namespace` and of the whole index.
fn count_active(
    conn: &Connection,
    db: &Path,
    namespace: &str,
    delta: i64,
) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO memory_namespaces (namespace, active) VALUES (?1, ?2) \
             ON CONFLICT (namespace) DO UPDATE SET active = active + ?2",
        )
        .map_err(|e| sql_error(db, &e))?;
    for key in [namespace, ""] {
        stmt.execute(params![key, delta])
            .map_err(|e| sql_error(db, &e))?;
    }
    Ok(())
}

/// The active versions `namespace` holds (`""`: all of them).
fn active_count(conn: &Connection, db: &Path, namespace: &str) -> Result<i64, StoreError> {
    conn.prepare_cached("SELECT active FROM memory_namespaces WHERE namespace = ?1")
        .and_then(|mut stmt| stmt.query_row([namespace], |row| row.get(0)).optional())
        .map(Option::unwrap_or_default)
        .map_err(|e| sql_error(db, &e))
}

/// Inserts one version (and indexes it when active); returns its row's `seq`.
fn insert(conn: &Connection, db: &Path, record: &MemoryRecord) -> Result<i64, StoreError> {
    let json = json_rows::encode(record)?;
    conn.prepare_cached(
        "INSERT INTO memory_records (id, version, namespace, status, valid_from, expires_at, \
         record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            record.id,
            record.version,
            record.namespace,
            record.status.as_str(),
            record.valid_from,
            record.expires_at,
            json,
        ])
    })
    .map_err(|e| sql_error(db, &e))?;
    let seq = conn.last_insert_rowid();
    if record.status == MemoryStatus::Active {
        conn.prepare_cached(
            "INSERT INTO memory_fts (rowid, text, tags, ns) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                seq,
                record.text,
                record.tags.join(" "),
                namespace_token(&record.namespace)
            ])
        })
        .map_err(|e| sql_error(db, &e))?;
        count_active(conn, db, &record.namespace, 1)?;
    }
    Ok(seq)
}

/// The latest version of a record and its row.
fn latest(
    conn: &Connection,
    db: &Path,
    id: &str,
) -> Result<Option<(i64, MemoryRecord)>, StoreError> {
    let row: Option<(i64, String)> = conn
        .prepare_cached(
            "SELECT seq, record FROM memory_records WHERE id = ?1 ORDER BY version DESC LIMIT 1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(|e| sql_error(db, &e))?;
    row.map(|(seq, json)| {
        serde_json::from_str(&json)
            .map(|record| (seq, record))
            .map_err(|e| json_rows::corrupt(db, TABLE, e))
    })
    .transpose()
}

/// The current, active version of a record, or a clear error.
fn active(conn: &Connection, db: &Path, id: &str) -> Result<(i64, MemoryRecord), StoreError> {
    match latest(conn, db, id)? {
        Some((seq, record)) if record.status == MemoryStatus::Active => Ok((seq, record)),
        other => Err(rules::not_active(id, other.as_ref().map(|(_, r)| r))),
    }
}

/// Closes an active version: the one in-place change a record sees.
fn close(
    conn: &Connection,
    db: &Path,
    (seq, record): (i64, MemoryRecord),
    status: MemoryStatus,
    by: &str,
    reason: Option<&str>,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let record = rules::closed(record, status, by, reason, now);
    let json = json_rows::encode(&record)?;
    conn.prepare_cached("UPDATE memory_records SET status = ?2, record = ?3 WHERE seq = ?1")
        .and_then(|mut stmt| stmt.execute(params![seq, status.as_str(), json]))
        .map_err(|e| sql_error(db, &e))?;
    conn.prepare_cached("DELETE FROM memory_fts WHERE rowid = ?1")
        .and_then(|mut stmt| stmt.execute([seq]))
        .map_err(|e| sql_error(db, &e))?;
    count_active(conn, db, &record.namespace, -1)?;
    Ok(record)
}

/// Stores a candidate as a new record (version 1).
pub(super) fn store(
    conn: &Connection,
    db: &Path,
    candidate: &MemoryCandidate,
    approved_by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let record = rules::first_version(candidate, approved_by, now);
    insert(conn, db, &record)?;
    Ok(record)
}

fn update(
    conn: &Connection,
    db: &Path,
    id: &str,
    change: &MemoryUpdate,
    by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    let current = active(conn, db, id)?;
    let next = rules::updated(&current.1, change, by, now);
    close(
        conn,
        db,
        current,
        MemoryStatus::Superseded,
        by,
        Some("updated"),
        now,
    )?;
    insert(conn, db, &next)?;
    Ok(next)
}

fn merge(
    conn: &Connection,
    db: &Path,
    merge: &MemoryMerge,
    by: &str,
    now: &str,
) -> Result<MemoryRecord, StoreError> {
    rules::check_not_self(merge)?;
    let kept = active(conn, db, &merge.kept)?;
    let dropped = active(conn, db, &merge.dropped)?;
    rules::check_merge(merge, &kept.1, &dropped.1)?;
    let reason = rules::dropped_reason(merge);
    let dropped = close(
        conn,
        db,
        dropped,
        MemoryStatus::Deleted,
        by,
        Some(&reason),
        now,
    )?;
    let next = rules::merged(&kept.1, dropped, merge, now);
    close(
        conn,
        db,
        kept,
        MemoryStatus::Superseded,
        by,
        Some(&merge.reason),
        now,
    )?;
    insert(conn, db, &next)?;
    Ok(next)
}

fn expire(conn: &Connection, db: &Path, now: &str) -> Result<Vec<MemoryRecord>, StoreError> {
    let due: Vec<(i64, String)> = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, record FROM memory_records WHERE status = 'active' \
                 AND expires_at IS NOT NULL AND expires_at <= ?1 ORDER BY seq",
            )
            .map_err(|e| sql_error(db, &e))?;
        stmt.query_map([now], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(|e| sql_error(db, &e))?
    };
    let mut expired = Vec::with_capacity(due.len());
    for (seq, json) in due {
        let record = serde_json::from_str(&json).map_err(|e| json_rows::corrupt(db, TABLE, e))?;
        expired.push(close(
            conn,
            db,
            (seq, record),
            MemoryStatus::Expired,
            "ttl",
            Some("past its time to live"),
            now,
        )?);
    }
    Ok(expired)
}

fn import(conn: &Connection, db: &Path, records: &[MemoryRecord]) -> Result<u64, StoreError> {
    let mut seen = std::collections::HashSet::new();
    for record in records {
        if seen.insert(record.id.as_str()) && latest(conn, db, &record.id)?.is_some() {
            return Err(rules::exists_already(&record.id));
        }
        insert(conn, db, record).map_err(|e| rules::import_error(record, e))?;
    }
    Ok(records.len() as u64)
}

/// `?1, ?2, …` for `n` values.
fn placeholders(n: usize) -> String {
    (1..=n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The index token of a namespace: `n` and the FNV-1a hash of its bytes in hex. Two
/// namespaces sharing a token (a hash collision) are told apart when the records are read.
fn namespace_token(namespace: &str) -> String {
    let hash = namespace.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("n{hash:016x}")
}

/// The FTS5 query for free text: each word quoted, any of them.
fn fts_query(text: &str) -> Option<String> {
    let words = rules::query_words(text);
    (!words.is_empty()).then(|| {
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

fn search(
    conn: &Connection,
    db: &Path,
    namespaces: &[String],
    query: &str,
    limit: usize,
) -> Result<Vec<MemoryHit>, StoreError> {
    let Some(words) = fts_query(query) else {
        return Ok(Vec::new());
    };
    if namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let total = active_count(conn, db, "")?;
    let mut own = 0;
    for namespace in namespaces {
        own += active_count(conn, db, namespace)?;
    }
    if own == 0 {
        return Ok(Vec::new());
    }
    // A namespace that is most of the index is ranked without the filter (walking its whole
    // token list costs more than ranking a few other records), reading a little more than
    // `limit` and dropping the others' records; a small one is filtered inside the index.
    if own * 2 >= total {
        let fetch = limit.saturating_mul(usize::try_from((total + own - 1) / own).unwrap_or(2) + 1);
        let (hits, exhausted) = ranked(conn, db, namespaces, &words, fetch, limit)?;
        // Enough, or every match was read: nothing better is left for the filter to find.
        if hits.len() >= limit || exhausted {
            return Ok(hits);
        }
    }
    let tokens: Vec<String> = namespaces.iter().map(|n| namespace_token(n)).collect();
    let fts = format!("ns : ({}) AND ({words})", tokens.join(" OR "));
    Ok(ranked(conn, db, namespaces, &fts, limit, limit)?.0)
}

/// The best `limit` records of `namespaces` among the `fetch` best matches of `fts`, and
/// whether those were all the matches there are.
fn ranked(
    conn: &Connection,
    db: &Path,
    namespaces: &[String],
    fts: &str,
    fetch: usize,
    limit: usize,
) -> Result<(Vec<MemoryHit>, bool), StoreError> {
    let rows: Vec<(i64, f64)> = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT rowid, bm25(memory_fts, 1.0, 1.0, 0.0) AS score FROM memory_fts \
                 WHERE memory_fts MATCH ?1 ORDER BY score LIMIT ?2",
            )
            .map_err(|e| sql_error(db, &e))?;
        let fetch = i64::try_from(fetch).unwrap_or(i64::MAX);
        stmt.query_map(params![fts, fetch], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(|e| sql_error(db, &e))?
    };
    let exhausted = rows.len() < fetch;
    let mut hits = Vec::with_capacity(limit);
    for (seq, rank) in rows {
        if hits.len() == limit {
            break;
        }
        let record = record_at(conn, db, seq)?;
        if !namespaces.contains(&record.namespace) {
            continue;
        }
        // bm25() is lower for better matches; flip it so higher is better.
        let score = -rank;
        hits.push(MemoryHit {
            record,
            text_score: Some(score),
            similarity: None,
            score,
        });
    }
    Ok((hits, exhausted))
}

/// The version stored in row `seq`.
fn record_at(conn: &Connection, db: &Path, seq: i64) -> Result<MemoryRecord, StoreError> {
    let json: String = conn
        .prepare_cached("SELECT record FROM memory_records WHERE seq = ?1")
        .and_then(|mut stmt| stmt.query_row([seq], |row| row.get(0)))
        .map_err(|e| sql_error(db, &e))?;
    serde_json::from_str(&json).map_err(|e| json_rows::corrupt(db, TABLE, e))
}

fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn nearest(
    conn: &Connection,
    db: &Path,
    namespaces: &[String],
    embedding: &[f32],
    limit: usize,
) -> Result<Vec<MemoryHit>, StoreError> {
    if namespaces.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    // Score every embedding, then read only the best records.
    let sql = format!(
        "SELECT seq, embedding FROM memory_records WHERE status = 'active' \
         AND embedding IS NOT NULL AND namespace IN ({})",
        placeholders(namespaces.len())
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(|e| sql_error(db, &e))?;
    let mut rows = stmt
        .query(params_from_iter(namespaces))
        .map_err(|e| sql_error(db, &e))?;
    let mut scored: Vec<(f64, i64)> = Vec::new();
    while let Some(row) = rows.next().map_err(|e| sql_error(db, &e))? {
        let bytes: Vec<u8> = row.get(1).map_err(|e| sql_error(db, &e))?;
        let similarity = rules::cosine(embedding, &decode_vector(&bytes));
        scored.push((similarity, row.get(0).map_err(|e| sql_error(db, &e))?));
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.truncate(limit);
    scored
        .into_iter()
        .map(|(similarity, seq)| {
            Ok(MemoryHit {
                record: record_at(conn, db, seq)?,
                text_score: None,
                similarity: Some(similarity),
                score: similarity,
            })
        })
        .collect()
}

fn list(
    conn: &Connection,
    db: &Path,
    filter: &MemoryFilter,
) -> Result<Vec<MemoryRecord>, StoreError> {
    let order = if filter.oldest_first {
        "seq ASC"
    } else {
        "valid_from DESC, seq DESC"
    };
    let sql = format!(
        "SELECT record FROM memory_records WHERE (?1 IS NULL OR namespace = ?1) \
         AND (?2 OR status = 'active') ORDER BY {order} LIMIT ?3"
    );
    let limit = filter
        .limit
        .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    json_rows::many(
        conn,
        db,
        TABLE,
        &sql,
        params![filter.namespace, filter.all_versions, limit],
    )
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn store_memory(
        &self,
        candidate: &MemoryCandidate,
        approved_by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let (candidate, by) = (candidate.clone(), approved_by.to_owned());
        let now = keel_types::now_rfc3339();
        self.job(move |conn, db| store(conn, db, &candidate, &by, &now))
            .await
    }

    async fn get_memory(&self, id: &str) -> Result<Option<MemoryRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| Ok(latest(conn, db, &id)?.map(|(_, r)| r)))
            .await
    }

    async fn memory_history(&self, id: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn, db| {
            json_rows::many(
                conn,
                db,
                TABLE,
                "SELECT record FROM memory_records WHERE id = ?1 ORDER BY version",
                [&id],
            )
        })
        .await
    }

    async fn list_memory(&self, filter: &MemoryFilter) -> Result<Vec<MemoryRecord>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn, db| list(conn, db, &filter)).await
    }

    async fn memory_namespaces(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn, db| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT namespace FROM memory_namespaces WHERE namespace <> '' AND active > 0 \
                     ORDER BY namespace",
                )
                .map_err(|e| sql_error(db, &e))?;
            stmt.query_map([], |row| row.get(0))
                .and_then(Iterator::collect)
                .map_err(|e| sql_error(db, &e))
        })
        .await
    }

    async fn search_memory(
        &self,
        namespaces: &[String],
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let (namespaces, query) = (namespaces.to_vec(), query.to_owned());
        self.read(move |conn, db| search(conn, db, &namespaces, &query, limit))
            .await
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryUpdate,
        by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let (id, change, by) = (id.to_owned(), change.clone(), by.to_owned());
        let now = keel_types::now_rfc3339();
        self.job(move |conn, db| update(conn, db, &id, &change, &by, &now))
            .await
    }

    async fn delete_memory(
        &self,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<MemoryRecord, StoreError> {
        let (id, by, reason) = (id.to_owned(), by.to_owned(), reason.map(str::to_owned));
        let now = keel_types::now_rfc3339();
        self.job(move |conn, db| {
            let current = active(conn, db, &id)?;
            close(
                conn,
                db,
                current,
                MemoryStatus::Deleted,
                &by,
                reason.as_deref(),
                &now,
            )
        })
        .await
    }

    async fn expire_memory(&self, now: &str) -> Result<Vec<MemoryRecord>, StoreError> {
        let now = now.to_owned();
        self.job(move |conn, db| expire(conn, db, &now)).await
    }

    async fn merge_memory(
        &self,
        request: &MemoryMerge,
        by: &str,
    ) -> Result<MemoryRecord, StoreError> {
        let (request, by) = (request.clone(), by.to_owned());
        let now = keel_types::now_rfc3339();
        self.job(move |conn, db| merge(conn, db, &request, &by, &now))
            .await
    }

    async fn memory_without_embedding(
        &self,
        namespaces: &[String],
        limit: usize,
    ) -> Result<Vec<(String, u32, String)>, StoreError> {
        let namespaces = namespaces.to_vec();
        self.read(move |conn, db| {
            if namespaces.is_empty() {
                return Ok(Vec::new());
            }
            let sql = format!(
                "SELECT record FROM memory_records WHERE status = 'active' \
                 AND embedding IS NULL AND namespace IN ({}) ORDER BY seq LIMIT {limit}",
                placeholders(namespaces.len())
            );
            let records: Vec<MemoryRecord> =
                json_rows::many(conn, db, TABLE, &sql, params_from_iter(&namespaces))?;
            Ok(records
                .into_iter()
                .map(|r| (r.id, r.version, r.text))
                .collect())
        })
        .await
    }

    async fn set_memory_embedding(
        &self,
        id: &str,
        version: u32,
        embedding: &[f32],
    ) -> Result<(), StoreError> {
        let (id, bytes) = (id.to_owned(), encode_vector(embedding));
        self.job(move |conn, db| {
            conn.prepare_cached(
                "UPDATE memory_records SET embedding = ?3 WHERE id = ?1 AND version = ?2",
            )
            .and_then(|mut stmt| stmt.execute(params![id, version, bytes]))
            .map_err(|e| sql_error(db, &e))?;
            Ok(())
        })
        .await
    }

    async fn nearest_memory(
        &self,
        namespaces: &[String],
        embedding: &[f32],
        limit: usize,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        let (namespaces, embedding) = (namespaces.to_vec(), embedding.to_vec());
        self.read(move |conn, db| nearest(conn, db, &namespaces, &embedding, limit))
            .await
    }

    async fn import_memory(&self, records: &[MemoryRecord]) -> Result<u64, StoreError> {
        let records = records.to_vec();
        self.job(move |conn, db| import(conn, db, &records)).await
    }

    async fn backup(&self, to: &Path) -> Result<(), StoreError> {
        let to = to.to_owned();
        self.read(move |conn, _| {
            let io = |e: &dyn std::fmt::Display| StoreError::Io {
                path: to.display().to_string(),
                message: e.to_string(),
            };
            if to.exists() {
                return Err(io(&"the backup file exists already; choose a new path"));
            }
            if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| io(&e))?;
            }
            conn.backup(
                rusqlite::MAIN_DB,
                &to,
                None::<fn(rusqlite::backup::Progress)>,
            )
            .map_err(|e| io(&e))
        })
        .await
    }
}
