//! Skill candidates on the SQLite store. Like approvals: the row keeps the whole record as
//! JSON plus the columns lists filter on, and a decision is one
//! `UPDATE … WHERE status = 'pending'`, so of two deciders exactly one wins.

use std::path::Path;

use keel_types::{CandidateStatus, SkillCandidate, StoreError};
use rusqlite::{Connection, params};

use super::connection::sql_error;
use super::json_rows;

/// Inserts a new candidate.
pub(super) fn create(
    conn: &Connection,
    db: &Path,
    candidate: &SkillCandidate,
) -> Result<(), StoreError> {
    let record = json_rows::encode(candidate)?;
    conn.prepare_cached(
        "INSERT INTO skill_candidates (id, name, status, request_id, created_at, record) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            candidate.candidate_id,
            candidate.name,
            candidate.status.as_str(),
            candidate.request_id.as_ref().map(|r| r.as_str()),
            candidate.created_at,
            record,
        ])
    })
    .map_err(|e| sql_error(db, &e))?;
    Ok(())
}

/// One candidate.
pub(super) fn get(
    conn: &Connection,
    db: &Path,
    id: &str,
) -> Result<Option<SkillCandidate>, StoreError> {
    json_rows::one(
        conn,
        db,
        "skill_candidates",
        "SELECT record FROM skill_candidates WHERE id = ?1",
        [id],
    )
}

/// Candidates, newest first.
pub(super) fn list(
    conn: &Connection,
    db: &Path,
    status: Option<CandidateStatus>,
) -> Result<Vec<SkillCandidate>, StoreError> {
    json_rows::many(
        conn,
        db,
        "skill_candidates",
        "SELECT record FROM skill_candidates WHERE ?1 IS NULL OR status = ?1 \
         ORDER BY created_at DESC, id DESC",
        [status.map(CandidateStatus::as_str)],
    )
}

/// Decides a pending candidate; exactly one decision wins. `decided` is the record as
/// decided (status, who, when, why, where).
pub(super) fn decide(
    conn: &Connection,
    db: &Path,
    decided: &SkillCandidate,
) -> Result<SkillCandidate, StoreError> {
    let id = &decided.candidate_id;
    if decided.status == CandidateStatus::Pending {
        return Err(StoreError::Invalid(
            "a decision must approve or reject".into(),
        ));
    }
    let record = json_rows::encode(decided)?;
    let changed = conn
        .prepare_cached(
            "UPDATE skill_candidates SET status = ?2, record = ?3 \
             WHERE id = ?1 AND status = 'pending'",
        )
        .and_then(|mut stmt| stmt.execute(params![id, decided.status.as_str(), record]))
        .map_err(|e| sql_error(db, &e))?;
    if changed == 1 {
        return Ok(decided.clone());
    }
    Err(crate::refusals::candidate_decided(
        id,
        get(conn, db, id)?.as_ref(),
    ))
}
