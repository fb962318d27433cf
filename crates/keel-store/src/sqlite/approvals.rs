//! Approvals on the SQLite store. The row keeps the whole record as JSON plus the columns
//! lists filter on; a decision is one `UPDATE … WHERE status = 'pending'`, so of two
//! deciders — in any processes — exactly one wins.

use std::path::Path;

use keel_types::{ApprovalRecord, ApprovalScope, ApprovalStatus, StoreError};
use rusqlite::{Connection, params};

use super::connection::sql_error;
use super::json_rows;

/// Inserts a new approval.
pub(super) fn create(
    conn: &Connection,
    db: &Path,
    approval: &ApprovalRecord,
) -> Result<(), StoreError> {
    let record = json_rows::encode(approval)?;
    conn.prepare_cached(
        "INSERT INTO approvals (id, request_id, session_id, tool, arguments, status, created_at, \
         record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            approval.approval_id,
            approval.request_id.as_str(),
            approval.session_id.as_ref().map(|s| s.as_str()),
            approval.tool,
            approval.arguments.to_string(),
            approval.status.as_str(),
            approval.created_at,
            record,
        ])
    })
    .map_err(|e| sql_error(db, &e))?;
    Ok(())
}

/// One approval.
pub(super) fn get(
    conn: &Connection,
    db: &Path,
    id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    json_rows::one(
        conn,
        db,
        "approvals",
        "SELECT record FROM approvals WHERE id = ?1",
        [id],
    )
}

/// Approvals, newest first.
pub(super) fn list(
    conn: &Connection,
    db: &Path,
    status: Option<ApprovalStatus>,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    json_rows::many(
        conn,
        db,
        "approvals",
        "SELECT record FROM approvals WHERE ?1 IS NULL OR status = ?1 \
         ORDER BY created_at DESC, id DESC",
        [status.map(ApprovalStatus::as_str)],
    )
}

/// A decision to record.
#[derive(Clone, Copy)]
pub(super) struct Verdict<'a> {
    pub status: ApprovalStatus,
    pub scope: ApprovalScope,
    pub decided_by: &'a str,
    pub reason: Option<&'a str>,
    pub now: &'a str,
}

/// Decides a pending approval; exactly one decision wins.
pub(super) fn decide(
    conn: &Connection,
    db: &Path,
    id: &str,
    verdict: &Verdict<'_>,
) -> Result<ApprovalRecord, StoreError> {
    let Verdict {
        status,
        scope,
        decided_by,
        reason,
        now,
    } = *verdict;
    if status == ApprovalStatus::Pending {
        return Err(StoreError::Invalid(
            "a decision must approve, deny or expire".into(),
        ));
    }
    let Some(mut approval) = get(conn, db, id)? else {
        return Err(StoreError::Invalid(format!("no approval `{id}`")));
    };
    let was_pending = approval.status == ApprovalStatus::Pending;
    approval.status = status;
    approval.scope = if approval.memory.is_some() {
        // A memory write is one write; there is nothing for a session to reuse.
        ApprovalScope::Once
    } else {
        scope
    };
    approval.decided_by = Some(decided_by.to_owned());
    approval.decided_at = Some(now.to_owned());
    approval.decision_reason = reason.map(str::to_owned);
    // An approved memory write is stored in the same transaction as the decision: if the
    // decision loses (someone decided first), the savepoint undoes the record too.
    if was_pending
        && status == ApprovalStatus::Approved
        && let Some(candidate) = &approval.memory
    {
        let stored = super::memory::store(conn, db, candidate, decided_by, now)?;
        approval.memory_record = Some(stored.id);
    }
    let record = json_rows::encode(&approval)?;
    let changed = conn
        .prepare_cached(
            "UPDATE approvals SET status = ?2, decided_at = ?3, decided_by = ?4, reason = ?5, \
             record = ?6 WHERE id = ?1 AND status = 'pending'",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                id,
                status.as_str(),
                now,
                decided_by,
                reason,
                record,
            ])
        })
        .map_err(|e| sql_error(db, &e))?;
    if changed == 1 {
        return Ok(approval);
    }
    Err(crate::refusals::approval_decided(
        id,
        get(conn, db, id)?.as_ref(),
    ))
}
