//! Approvals, tasks, skill candidates and tool telemetry on PostgreSQL. Each row keeps its
//! whole record as JSON text; a decision is one conditional `UPDATE … WHERE status = 'pending'`,
//! so of two deciders on any replicas exactly one wins, and it notifies `keel`
//! (`decided <id>`) so the run waiting on it wakes wherever it executes.

use std::collections::BTreeMap;

use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, CandidateStatus, SkillCandidate, StoreError,
    TaskRecord, ToolStats, eval::EvalResult,
};
use sqlx_core::row::Row;
use sqlx_postgres::{PgRow, Postgres};

use super::{PgStore, corrupt, to_json};

fn query(
    sql: &'static str,
) -> sqlx_core::query::Query<'static, Postgres, sqlx_postgres::PgArguments> {
    sqlx_core::query::query::<Postgres>(sql)
}

fn decode<T: serde::de::DeserializeOwned>(
    store: &PgStore,
    table: &str,
    row: &PgRow,
) -> Result<T, StoreError> {
    let key: String = row.try_get(0).map_err(|e| store.db_error(&e))?;
    let text: String = row.try_get(1).map_err(|e| store.db_error(&e))?;
    serde_json::from_str(&text).map_err(|e| corrupt(table, &key, &e))
}

async fn many<T: serde::de::DeserializeOwned>(
    store: &PgStore,
    table: &str,
    q: sqlx_core::query::Query<'_, Postgres, sqlx_postgres::PgArguments>,
) -> Result<Vec<T>, StoreError> {
    let rows = q
        .fetch_all(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    rows.iter().map(|row| decode(store, table, row)).collect()
}

async fn one<T: serde::de::DeserializeOwned>(
    store: &PgStore,
    table: &str,
    q: sqlx_core::query::Query<'_, Postgres, sqlx_postgres::PgArguments>,
) -> Result<Option<T>, StoreError> {
    let row = q
        .fetch_optional(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    row.map(|row| decode(store, table, &row)).transpose()
}

pub(super) async fn create_approval(
    store: &PgStore,
    approval: &ApprovalRecord,
) -> Result<(), StoreError> {
    query(
        "INSERT INTO approvals (id, request_id, status, created_at, record) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&approval.approval_id)
    .bind(approval.request_id.as_str())
    .bind(approval.status.as_str())
    .bind(&approval.created_at)
    .bind(to_json(approval)?)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    Ok(())
}

pub(super) async fn get_approval(
    store: &PgStore,
    id: &str,
) -> Result<Option<ApprovalRecord>, StoreError> {
    one(
        store,
        "approvals",
        query("SELECT id, record::text FROM approvals WHERE id = $1").bind(id.to_owned()),
    )
    .await
}

pub(super) async fn list_approvals(
    store: &PgStore,
    status: Option<ApprovalStatus>,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    many(
        store,
        "approvals",
        query(
            "SELECT id, record::text FROM approvals WHERE $1::text IS NULL OR status = $1 \
             ORDER BY created_at DESC, id DESC",
        )
        .bind(status.map(|s| s.as_str().to_owned())),
    )
    .await
}

/// A decision to record.
pub(super) struct Verdict<'a> {
    pub status: ApprovalStatus,
    pub scope: ApprovalScope,
    pub decided_by: &'a str,
    pub reason: Option<&'a str>,
}

pub(super) async fn decide_approval(
    store: &PgStore,
    id: &str,
    verdict: &Verdict<'_>,
) -> Result<ApprovalRecord, StoreError> {
    if verdict.status == ApprovalStatus::Pending {
        return Err(StoreError::Invalid(
            "a decision must approve, deny or expire".into(),
        ));
    }
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let mut tx = store.pool().begin().await.map_err(e)?;
    // The row lock makes a second decider wait, then see the first decision.
    let row = query("SELECT id, record::text FROM approvals WHERE id = $1 FOR UPDATE")
        .bind(id.to_owned())
        .fetch_optional(&mut *tx)
        .await
        .map_err(e)?;
    let Some(row) = row else {
        return Err(StoreError::Invalid(format!("no approval `{id}`")));
    };
    let mut approval: ApprovalRecord = decode(store, "approvals", &row)?;
    if approval.status != ApprovalStatus::Pending {
        return Err(crate::refusals::approval_decided(id, Some(&approval)));
    }
    let now = keel_types::now_rfc3339();
    approval.status = verdict.status;
    // A memory write is one write; there is nothing for a session to reuse.
    approval.scope = match approval.memory.is_some() {
        true => ApprovalScope::Once,
        false => verdict.scope,
    };
    approval.decided_by = Some(verdict.decided_by.to_owned());
    approval.decided_at = Some(now.clone());
    approval.decision_reason = verdict.reason.map(str::to_owned);
    // An approved memory write is stored in the decision's transaction.
    if verdict.status == ApprovalStatus::Approved
        && let Some(candidate) = &approval.memory
    {
        let stored = super::memory::store_in(
            &mut tx,
            store.shown_url(),
            candidate,
            verdict.decided_by,
            &now,
        )
        .await?;
        approval.memory_record = Some(stored.id);
    }
    query("UPDATE approvals SET status = $2, record = $3 WHERE id = $1")
        .bind(id.to_owned())
        .bind(verdict.status.as_str())
        .bind(to_json(&approval)?)
        .execute(&mut *tx)
        .await
        .map_err(e)?;
    query("SELECT pg_notify('keel', 'decided ' || $1)")
        .bind(id.to_owned())
        .execute(&mut *tx)
        .await
        .map_err(e)?;
    tx.commit().await.map_err(e)?;
    Ok(approval)
}

pub(super) async fn put_task(store: &PgStore, task: &TaskRecord) -> Result<(), StoreError> {
    query(
        "INSERT INTO tasks (id, created_at, record) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET created_at = EXCLUDED.created_at, record = EXCLUDED.record",
    )
    .bind(&task.task_id)
    .bind(&task.created_at)
    .bind(to_json(task)?)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    Ok(())
}

pub(super) async fn get_task(store: &PgStore, id: &str) -> Result<Option<TaskRecord>, StoreError> {
    one(
        store,
        "tasks",
        query("SELECT id, record::text FROM tasks WHERE id = $1").bind(id.to_owned()),
    )
    .await
}

pub(super) async fn list_tasks(
    store: &PgStore,
    limit: Option<usize>,
) -> Result<Vec<TaskRecord>, StoreError> {
    many(
        store,
        "tasks",
        query("SELECT id, record::text FROM tasks ORDER BY created_at DESC, id DESC LIMIT $1")
            .bind(limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX))),
    )
    .await
}

pub(super) async fn delete_task(store: &PgStore, id: &str) -> Result<bool, StoreError> {
    let done = query("DELETE FROM tasks WHERE id = $1")
        .bind(id.to_owned())
        .execute(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    Ok(done.rows_affected() > 0)
}

pub(super) async fn create_candidate(
    store: &PgStore,
    candidate: &SkillCandidate,
) -> Result<(), StoreError> {
    query("INSERT INTO skill_candidates (id, status, created_at, record) VALUES ($1, $2, $3, $4)")
        .bind(&candidate.candidate_id)
        .bind(candidate.status.as_str())
        .bind(&candidate.created_at)
        .bind(to_json(candidate)?)
        .execute(store.pool())
        .await
        .map_err(|e| store.db_error(&e))?;
    Ok(())
}

pub(super) async fn get_candidate(
    store: &PgStore,
    id: &str,
) -> Result<Option<SkillCandidate>, StoreError> {
    one(
        store,
        "skill_candidates",
        query("SELECT id, record::text FROM skill_candidates WHERE id = $1").bind(id.to_owned()),
    )
    .await
}

pub(super) async fn list_candidates(
    store: &PgStore,
    status: Option<CandidateStatus>,
) -> Result<Vec<SkillCandidate>, StoreError> {
    many(
        store,
        "skill_candidates",
        query(
            "SELECT id, record::text FROM skill_candidates WHERE $1::text IS NULL OR status = $1 \
             ORDER BY created_at DESC, id DESC",
        )
        .bind(status.map(|s| s.as_str().to_owned())),
    )
    .await
}

pub(super) async fn decide_candidate(
    store: &PgStore,
    id: &str,
    status: CandidateStatus,
    decided_by: &str,
    reason: Option<&str>,
    path: Option<&str>,
) -> Result<SkillCandidate, StoreError> {
    let Some(mut decided) = get_candidate(store, id).await? else {
        return Err(StoreError::Invalid(format!("no skill candidate `{id}`")));
    };
    decided.status = status;
    decided.decided_by = Some(decided_by.to_owned());
    decided.decided_at = Some(keel_types::now_rfc3339());
    decided.reason = reason.map(str::to_owned);
    decided.path = path.map(str::to_owned);
    let changed = query(
        "UPDATE skill_candidates SET status = $2, record = $3 \
         WHERE id = $1 AND status = 'pending'",
    )
    .bind(id.to_owned())
    .bind(status.as_str())
    .bind(to_json(&decided)?)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    if changed.rows_affected() == 1 {
        return Ok(decided);
    }
    let current = get_candidate(store, id).await?;
    Err(crate::refusals::candidate_decided(id, current.as_ref()))
}

/// Usage per tool from the recorded events: calls, errors and latency from
/// `agent.tool.result`, repairs and blocks from the gateway's verdicts.
pub(super) async fn tool_stats(store: &PgStore) -> Result<Vec<ToolStats>, StoreError> {
    let e = |e: sqlx_core::Error| store.db_error(&e);
    let mut stats: BTreeMap<String, ToolStats> = BTreeMap::new();
    let guards = query(
        "SELECT coalesce(replace(body, '\\u0000', '')::jsonb->>'resolvedTool', replace(body, '\\u0000', '')::jsonb->>'tool'), \
         replace(body, '\\u0000', '')::jsonb->>'decision', count(*) FROM events WHERE type = 'runtime.tool.guard' \
         GROUP BY 1, 2",
    )
    .fetch_all(store.pool())
    .await
    .map_err(e)?;
    for row in guards {
        let tool: Option<String> = row.try_get(0).map_err(e)?;
        let decision: Option<String> = row.try_get(1).map_err(e)?;
        let count: i64 = row.try_get(2).map_err(e)?;
        let Some(tool) = tool else { continue };
        let entry = stats.entry(tool.clone()).or_insert_with(|| ToolStats {
            tool,
            ..ToolStats::default()
        });
        let count = u64::try_from(count).unwrap_or(0);
        match decision.as_deref() {
            Some("repaired") => entry.repairs += count,
            Some("blocked") => entry.blocks += count,
            _ => {}
        }
    }
    // `toolId` since the seed contract; `tool` in older logs.
    let results = query(
        "SELECT coalesce(b->'event'->>'toolId', b->'event'->>'tool'), \
         count(*) FILTER (WHERE (b->'event'->>'ok')::boolean = false), \
         array_agg(coalesce((b->'event'->>'durationMs')::bigint, 0)) \
         FROM (SELECT replace(body, '\\u0000', '')::jsonb AS b FROM events WHERE type = 'runtime.adapter.event') e \
         WHERE b->'event'->>'phase' = 'agent.tool.result' GROUP BY 1",
    )
    .fetch_all(store.pool())
    .await
    .map_err(e)?;
    for row in results {
        let tool: Option<String> = row.try_get(0).map_err(e)?;
        let Some(tool) = tool else { continue };
        let errors: i64 = row.try_get(1).map_err(e)?;
        let mut latencies: Vec<i64> = row.try_get(2).map_err(e)?;
        latencies.sort_unstable();
        let entry = stats.entry(tool.clone()).or_insert_with(|| ToolStats {
            tool,
            ..ToolStats::default()
        });
        entry.calls += latencies.len() as u64;
        entry.errors += u64::try_from(errors).unwrap_or(0);
        // The same pick as the SQLite store's.
        let pick = |p: f64| {
            let index = ((latencies.len().saturating_sub(1)) as f64 * p).round() as usize;
            latencies
                .get(index)
                .map_or(0, |v| u64::try_from(*v).unwrap_or(0))
        };
        entry.latency_p50_ms = pick(0.5);
        entry.latency_p99_ms = pick(0.99);
    }
    Ok(stats.into_values().collect())
}

/// Inserts or replaces an eval result.
pub(super) async fn save_eval(store: &PgStore, result: &EvalResult) -> Result<(), StoreError> {
    query(
        "INSERT INTO eval_results (id, eval, started_at, record) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record",
    )
    .bind(&result.id)
    .bind(&result.eval)
    .bind(&result.started_at)
    .bind(to_json(result)?)
    .execute(store.pool())
    .await
    .map_err(|e| store.db_error(&e))?;
    Ok(())
}

pub(super) async fn get_eval(store: &PgStore, id: &str) -> Result<Option<EvalResult>, StoreError> {
    one(
        store,
        "eval_results",
        query("SELECT id, record FROM eval_results WHERE id = $1").bind(id.to_owned()),
    )
    .await
}

pub(super) async fn list_evals(
    store: &PgStore,
    eval: Option<&str>,
    limit: usize,
) -> Result<Vec<EvalResult>, StoreError> {
    many(
        store,
        "eval_results",
        query(
            "SELECT id, record FROM eval_results WHERE $1::text IS NULL OR eval = $1 \
             ORDER BY started_at DESC, id DESC LIMIT $2",
        )
        .bind(eval.map(str::to_owned))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
    )
    .await
}
