//! Tasks (staged tool calls) and tool telemetry, on the SQLite store. A task row keeps its
//! whole record as JSON plus the columns lists filter and sort on. Telemetry is computed from
//! the recorded events, so it covers every call ever made in the workspace's retained runs.

use std::collections::BTreeMap;
use std::path::Path;

use keel_types::{StoreError, TaskRecord, ToolStats};
use rusqlite::{Connection, params};

use super::connection::sql_error;
use super::json_rows;

/// Inserts or replaces a task.
pub(super) fn put(conn: &Connection, db: &Path, task: &TaskRecord) -> Result<(), StoreError> {
    let record = serde_json::to_string(task).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let arguments = task.arguments.to_string();
    let decision = serde_json::to_value(task.decision)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned));
    conn.prepare_cached(
        "INSERT INTO tasks (id, request_id, tool, arguments, decision, status, created_at, \
         updated_at, agent, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (id) DO UPDATE SET request_id = ?2, tool = ?3, arguments = ?4, \
         decision = ?5, status = ?6, updated_at = ?8, agent = ?9, record = ?10",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            task.task_id,
            task.request_id.as_ref().map(|r| r.as_str()),
            task.tool,
            arguments,
            decision,
            task.status.as_str(),
            task.created_at,
            task.updated_at,
            task.agent,
            record,
        ])
    })
    .map_err(|e| sql_error(db, &e))?;
    Ok(())
}

/// One task.
pub(super) fn get(
    conn: &Connection,
    db: &Path,
    id: &str,
) -> Result<Option<TaskRecord>, StoreError> {
    json_rows::one(
        conn,
        db,
        "tasks",
        "SELECT record FROM tasks WHERE id = ?1",
        [id],
    )
}

/// Tasks, newest first.
pub(super) fn list(
    conn: &Connection,
    db: &Path,
    limit: Option<usize>,
) -> Result<Vec<TaskRecord>, StoreError> {
    let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
    json_rows::many(
        conn,
        db,
        "tasks",
        "SELECT record FROM tasks ORDER BY created_at DESC, id DESC LIMIT ?1",
        [limit],
    )
}

/// Deletes a task; whether it existed.
pub(super) fn delete(conn: &Connection, db: &Path, id: &str) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached("DELETE FROM tasks WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute([id]))
        .map_err(|e| sql_error(db, &e))?;
    Ok(changed > 0)
}

/// Per-tool telemetry from the guard and tool-result events.
pub(super) fn tool_stats(conn: &Connection, db: &Path) -> Result<Vec<ToolStats>, StoreError> {
    let mut stats: BTreeMap<String, ToolStats> = BTreeMap::new();
    let mut latencies: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut guards = conn
        .prepare_cached(
            "SELECT coalesce(json_extract(body, '$.resolvedTool'), json_extract(body, '$.tool')), \
             json_extract(body, '$.decision'), count(*) \
             FROM events WHERE type = 'runtime.tool.guard' GROUP BY 1, 2",
        )
        .map_err(|e| sql_error(db, &e))?;
    let rows = guards
        .query_map([], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
        .map_err(|e| sql_error(db, &e))?;
    for row in rows {
        let (tool, decision, count) = row.map_err(|e| sql_error(db, &e))?;
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
    let mut results = conn
        .prepare_cached(
            // `toolId` since the seed contract; `tool` in older logs.
            "SELECT coalesce(json_extract(body, '$.event.toolId'), json_extract(body, '$.event.tool')), \
             json_extract(body, '$.event.ok'), \
             json_extract(body, '$.event.durationMs') FROM events \
             WHERE type = 'runtime.adapter.event' \
             AND json_extract(body, '$.event.phase') = 'agent.tool.result'",
        )
        .map_err(|e| sql_error(db, &e))?;
    let rows = results
        .query_map([], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, Option<bool>>(1)?,
                row.get::<_, Option<i64>>(2)?,
            ))
        })
        .map_err(|e| sql_error(db, &e))?;
    for row in rows {
        let (tool, ok, duration) = row.map_err(|e| sql_error(db, &e))?;
        let Some(tool) = tool else { continue };
        let entry = stats.entry(tool.clone()).or_insert_with(|| ToolStats {
            tool: tool.clone(),
            ..ToolStats::default()
        });
        entry.calls += 1;
        if ok == Some(false) {
            entry.errors += 1;
        }
        latencies
            .entry(tool)
            .or_default()
            .push(duration.and_then(|d| u64::try_from(d).ok()).unwrap_or(0));
    }
    for (tool, mut values) in latencies {
        values.sort_unstable();
        let pick = |p: f64| values[((values.len() - 1) as f64 * p).round() as usize];
        if let Some(entry) = stats.get_mut(&tool)
            && !values.is_empty()
        {
            entry.latency_p50_ms = pick(0.5);
            entry.latency_p99_ms = pick(0.99);
        }
    }
    Ok(stats.into_values().collect())
}
