//! `keel store migrate | check | copy`: the workspace's store as an operator sees it.
//!
//! - `migrate` applies pending schema migrations (the SQLite store migrates whenever it is
//!   opened; PostgreSQL replicas do too, under a lock, so this is for doing it ahead of a
//!   deploy);
//! - `check` connects, reads the schema version and tries a write that changes nothing;
//! - `copy --from sqlite --to postgres` moves a workspace's history (`.keel/keel.db`) into
//!   its PostgreSQL store (or the one `--url` names).

use keel_types::RunLog;
use std::path::Path;

use clap::{Subcommand, ValueEnum};
use keel::Workspace;
use keel_store::{PG_SCHEMA_VERSION, PgOptions, PgStore, SCHEMA_VERSION, SqliteStore};
use keel_workspace::StoreKind;

use crate::error::CliError;
use crate::out;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Subcommand)]
pub(crate) enum StoreCommand {
    /// Apply pending schema migrations to the workspace's store.
    Migrate,
    /// Connect, read the schema version and try a write that changes nothing (exit 1 when
    /// the store is unusable or its schema is not this keel's).
    Check {
        #[arg(long)]
        json: bool,
    },
    /// Copy everything in one store into another (only `--from sqlite --to postgres`).
    /// Records already in the target are left alone, so an interrupted copy can be re-run.
    Copy {
        #[arg(long, value_enum)]
        from: Backend,
        #[arg(long, value_enum)]
        to: Backend,
        /// The PostgreSQL database (default: the workspace's `store.url`).
        #[arg(long)]
        url: Option<String>,
        /// The PostgreSQL schema (default: the workspace's `store.schema`).
        #[arg(long)]
        schema: Option<String>,
    },
}

pub(crate) async fn store(root: &Path, command: StoreCommand) -> Result<(), CliError> {
    let workspace = Workspace::load(root)?;
    match command {
        StoreCommand::Migrate => migrate(&workspace).await,
        StoreCommand::Check { json } => check(&workspace, json).await,
        StoreCommand::Copy {
            from,
            to,
            url,
            schema,
        } => copy(&workspace, (from, to), url, schema).await,
    }
}

fn postgres(workspace: &Workspace) -> bool {
    workspace.runtime.store.backend() == StoreKind::Postgres
}

async fn migrate(workspace: &Workspace) -> Result<(), CliError> {
    if postgres(workspace) {
        let options = keel::postgres_options(workspace);
        let (_, before) = PgStore::inspect(options.clone()).await?;
        let store = PgStore::connect(options).await?;
        out::line(&format!(
            "postgres {}: schema version {before} → {PG_SCHEMA_VERSION}",
            store.shown_url()
        ));
    } else {
        let store = SqliteStore::open(&workspace.root)?;
        out::line(&format!(
            "sqlite {}: schema version {SCHEMA_VERSION}",
            store.db_path().display()
        ));
    }
    Ok(())
}

/// The store as `keel store check` and `keel doctor` see it.
pub(crate) struct StoreReport {
    pub kind: &'static str,
    pub location: String,
    pub found: u32,
    pub supported: u32,
    /// What is wrong, if anything.
    pub problem: Option<String>,
}

/// Connects to `workspace`'s store, reads its schema version and tries a write that changes
/// nothing.
pub(crate) async fn inspect(workspace: &Workspace) -> Result<StoreReport, CliError> {
    let (kind, location, found, supported, health) = if postgres(workspace) {
        let options = keel::postgres_options(workspace);
        let (store, found) = PgStore::inspect(options).await?;
        let health = match found {
            v if v == PG_SCHEMA_VERSION => Some(store.health().await),
            _ => None,
        };
        (
            "postgres",
            store.shown_url().to_owned(),
            found,
            PG_SCHEMA_VERSION,
            health,
        )
    } else {
        let store = SqliteStore::open(&workspace.root)?;
        let health = store.health().await;
        let found = health.as_ref().ok().and_then(|h| h.schema_version);
        (
            "sqlite",
            store.db_path().display().to_string(),
            found.unwrap_or(SCHEMA_VERSION),
            SCHEMA_VERSION,
            Some(health),
        )
    };
    let problem = match (&health, found.cmp(&supported)) {
        (_, std::cmp::Ordering::Less) => Some(format!(
            "schema version {found} is older than this keel's {supported}: run `keel store migrate`"
        )),
        (_, std::cmp::Ordering::Greater) => Some(format!(
            "schema version {found} is newer than this keel's {supported}: upgrade keel"
        )),
        (Some(Err(error)), _) => Some(error.to_string()),
        _ => None,
    };
    Ok(StoreReport {
        kind,
        location,
        found,
        supported,
        problem,
    })
}

async fn check(workspace: &Workspace, json: bool) -> Result<(), CliError> {
    let StoreReport {
        kind,
        location,
        found,
        supported,
        problem,
    } = inspect(workspace).await?;
    if json {
        out::line(&serde_json::to_string_pretty(&serde_json::json!({
            "kind": kind,
            "location": location,
            "schemaVersion": found,
            "supported": supported,
            "ok": problem.is_none(),
            "problem": problem,
        }))?);
    } else {
        out::line(&format!("{kind} {location}"));
        out::line(&format!("schema version {found} (this keel: {supported})"));
        match &problem {
            None => out::line("ok: reads and writes work"),
            Some(problem) => out::line(&format!("problem: {problem}")),
        }
    }
    match problem {
        None => Ok(()),
        Some(problem) => Err(CliError::failed(problem)),
    }
}

async fn copy(
    workspace: &Workspace,
    direction: (Backend, Backend),
    url: Option<String>,
    schema: Option<String>,
) -> Result<(), CliError> {
    if direction != (Backend::Sqlite, Backend::Postgres) {
        return Err(CliError::usage(
            "only `--from sqlite --to postgres` is supported",
        ));
    }
    let mut options = match (url, postgres(workspace)) {
        (Some(url), _) => PgOptions::new(url),
        (None, true) => keel::postgres_options(workspace),
        (None, false) => {
            return Err(CliError::usage(
                "the workspace's store is SQLite: give the target with `--url postgres://…`, or \
                 set `store: {kind: postgres, url: …}` first",
            ));
        }
    };
    if schema.is_some() {
        options.schema = schema;
    }
    let source = SqliteStore::open(&workspace.root)?;
    let target = PgStore::connect(options).await?;
    let report = target.copy_from(&source).await?;
    out::line(&format!(
        "copied {} into {}: {} runs ({} events), {} sessions, {} approvals, {} tasks, {} skill candidates, {} memory versions, {} eval results; {} already there",
        source.db_path().display(),
        target.shown_url(),
        report.runs,
        report.events,
        report.sessions,
        report.approvals,
        report.tasks,
        report.skill_candidates,
        report.memory_versions,
        report.eval_results,
        report.skipped,
    ));
    Ok(())
}
