//! `keel store copy --from sqlite --to postgres`: a workspace's history moved into the
//! PostgreSQL store as it is — sessions with their transcripts, runs with their events (ended
//! or interrupted; none is owned afterwards), approvals, tasks, skill candidates, memory and
//! eval results.
//! Anything already in the target (same id) is left alone and counted as skipped, so a copy
//! that was interrupted can simply be run again.

use keel_types::{EvalStore, SkillCandidateStore, TaskStore};
use keel_types::{MemoryFilter, MemoryStore, RunFilter, RunStore, StoreError};
use sqlx_postgres::Postgres;

use super::{PgStore, runs, to_json};

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyReport {
    pub sessions: u64,
    pub runs: u64,
    pub events: u64,
    pub approvals: u64,
    pub tasks: u64,
    pub skill_candidates: u64,
    pub memory_versions: u64,
    pub eval_results: u64,
    /// Records already in the target, left as they were.
    pub skipped: u64,
}

fn query(
    sql: &'static str,
) -> sqlx_core::query::Query<'static, Postgres, sqlx_postgres::PgArguments> {
    sqlx_core::query::query::<Postgres>(sql)
}

impl PgStore {
    /// Copies everything `source` holds into this store. Active runs of the source are
    /// refused (stop the processes using it first), so nothing is copied half-written.
    pub async fn copy_from<S>(&self, source: &S) -> Result<CopyReport, StoreError>
    where
        S: RunStore + MemoryStore,
    {
        self.ready().await?;
        let active = source
            .run_counts()
            .await?
            .into_iter()
            .filter(|(status, n)| !status.is_terminal() && *n > 0)
            .map(|(status, n)| format!("{n} {}", status.as_str()))
            .collect::<Vec<_>>();
        if !active.is_empty() {
            return Err(StoreError::Invalid(format!(
                "the source store has active runs ({}); stop the processes using it and run \
                 `keel runs list --status running` to check",
                active.join(", ")
            )));
        }
        let mut report = CopyReport::default();
        let e = |e: sqlx_core::Error| self.db_error(&e);
        // Sessions first: runs and transcripts refer to them.
        for session in source.list_sessions(None).await? {
            let inserted = query(
                "INSERT INTO sessions (id, agent, created_at, updated_at, owner) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
            )
            .bind(session.session_id.as_str())
            .bind(&session.agent)
            .bind(&session.created_at)
            .bind(&session.updated_at)
            .bind(session.owner.as_ref().map(to_json).transpose()?)
            .execute(self.pool())
            .await
            .map_err(e)?;
            if inserted.rows_affected() == 0 {
                report.skipped += 1;
                continue;
            }
            report.sessions += 1;
            let messages = source.session_messages(&session.session_id).await?;
            let seqs: Vec<i64> = messages.iter().map(|m| m.seq as i64).collect();
            let requests: Vec<&str> = messages.iter().map(|m| m.request_id.as_str()).collect();
            let bodies = messages
                .iter()
                .map(|m| to_json(&m.message))
                .collect::<Result<Vec<_>, _>>()?;
            query(
                "INSERT INTO session_messages (session_id, seq, request_id, message) \
                 SELECT $1, m.seq, m.request_id, m.message \
                 FROM unnest($2::bigint[], $3::text[], $4::text[]) AS m(seq, request_id, message)",
            )
            .bind(session.session_id.as_str())
            .bind(&seqs)
            .bind(&requests)
            .bind(&bodies)
            .execute(self.pool())
            .await
            .map_err(e)?;
        }
        // Runs, a page at a time, oldest pages last (the order does not matter: no run
        // refers to another by a foreign key).
        let mut filter = RunFilter {
            limit: Some(500),
            ..RunFilter::default()
        };
        loop {
            let page = source.list_runs(&filter).await?;
            let Some(last) = page.last() else { break };
            filter.before = Some(keel_types::RunCursor {
                started_at: last.started_at.clone(),
                request_id: last.request_id.clone(),
            });
            for run in &page {
                let events = source.events(&run.request_id, 0).await?;
                match runs::import(self, run, &events).await? {
                    true => {
                        report.runs += 1;
                        report.events += events.len() as u64;
                    }
                    false => report.skipped += 1,
                }
            }
        }
        for approval in source.list_approvals(None).await? {
            let inserted = query(
                "INSERT INTO approvals (id, request_id, status, created_at, record) \
                 SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM runs WHERE request_id = $2) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(&approval.approval_id)
            .bind(approval.request_id.as_str())
            .bind(approval.status.as_str())
            .bind(&approval.created_at)
            .bind(to_json(&approval)?)
            .execute(self.pool())
            .await
            .map_err(e)?;
            match inserted.rows_affected() {
                0 => report.skipped += 1,
                _ => report.approvals += 1,
            }
        }
        for task in source.list_tasks(None).await? {
            match self.get_task(&task.task_id).await? {
                Some(_) => report.skipped += 1,
                None => {
                    self.put_task(&task).await?;
                    report.tasks += 1;
                }
            }
        }
        for candidate in source.list_skill_candidates(None).await? {
            match self.get_skill_candidate(&candidate.candidate_id).await? {
                Some(_) => report.skipped += 1,
                None => {
                    super::records::create_candidate(self, &candidate).await?;
                    report.skill_candidates += 1;
                }
            }
        }
        for result in source.list_eval_results(None, usize::MAX).await? {
            match self.get_eval_result(&result.id).await? {
                Some(_) => report.skipped += 1,
                None => {
                    self.save_eval_result(&result).await?;
                    report.eval_results += 1;
                }
            }
        }
        let versions = source
            .list_memory(&MemoryFilter {
                all_versions: true,
                oldest_first: true,
                ..MemoryFilter::default()
            })
            .await?;
        let mut fresh = Vec::new();
        for version in versions {
            match self.get_memory(&version.id).await? {
                Some(_) => report.skipped += 1,
                None => fresh.push(version),
            }
        }
        if !fresh.is_empty() {
            report.memory_versions += self.import_memory(&fresh).await?;
        }
        Ok(report)
    }
}
