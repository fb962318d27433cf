//! `keel memory …`: long-term memory for operators — list, show, search, add, update, rm,
//! history, candidates (approve, reject), maintain, export, import, backup.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use keel::{ApprovalScope, MaintenanceRequest, MemoryDraft, Runtime};
use keel_types::{MemoryFilter, MemoryKind, MemoryRecord, MemoryUpdate};

use crate::approvals::decider;
use crate::error::CliError;
use crate::out;

#[derive(Debug, Subcommand)]
pub(crate) enum MemoryCommand {
    /// Current records, newest first.
    List {
        #[arg(long)]
        namespace: Option<String>,
        /// Closed versions too (superseded, deleted, expired).
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One record (its latest version).
    Show { id: String },
    /// Full-text (or hybrid) search, best first.
    Search {
        query: String,
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Store a record (you are its approval).
    Add {
        namespace: String,
        text: String,
        /// fact (default), preference, instruction or episode.
        #[arg(long, default_value = "fact")]
        kind: String,
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// A new version of a record.
    Update {
        id: String,
        #[arg(long)]
        text: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        /// Replaces the tags (repeat for several).
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Delete a record (its history stays).
    Rm {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Every version of a record, oldest first.
    History { id: String },
    /// Candidates waiting for a person (approve or reject them here or with `keel approvals`).
    Candidates {
        #[arg(long)]
        json: bool,
    },
    /// Approve a candidate: the record is stored.
    Approve { approval_id: String },
    /// Reject a candidate: nothing is stored.
    Reject {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Expire records past their TTL and merge duplicates; recorded as a run.
    Maintain {
        /// Compact only this namespace.
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long)]
        no_expire: bool,
        #[arg(long)]
        no_compact: bool,
        /// The least word overlap of near duplicates (0–1; 1: exact duplicates only).
        #[arg(long, default_value_t = 0.8)]
        similarity: f64,
    },
    /// Every version of every record as JSONL (to stdout, or `--out`).
    Export {
        #[arg(long)]
        namespace: Option<String>,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Import an export (all or nothing).
    Import { file: PathBuf },
    /// A consistent copy of the store (SQLite online backup), while it is in use.
    Backup { to: PathBuf },
}

fn kind(text: &str) -> Result<MemoryKind, CliError> {
    text.parse().map_err(CliError::usage)
}

fn show(record: &MemoryRecord) -> String {
    let tags = match record.tags.is_empty() {
        true => String::new(),
        false => format!("  #{}", record.tags.join(" #")),
    };
    format!(
        "{} v{}  {:<10} {:<11} {:<16} {}{tags}",
        record.id,
        record.version,
        record.status.as_str(),
        record.kind.as_str(),
        record.namespace,
        record.text
    )
}

fn print(records: &[MemoryRecord], json: bool) -> Result<(), CliError> {
    for record in records {
        match json {
            true => out::line(&serde_json::to_string(record)?),
            false => out::line(&show(record)),
        }
    }
    Ok(())
}

/// Refuses an approval that carries no memory candidate (a tool call's: `keel approvals`).
async fn memory_approval(runtime: &Runtime, id: &str) -> Result<(), CliError> {
    match runtime
        .approvals()
        .get(id)
        .await
        .map_err(CliError::failed)?
    {
        Some(approval) if approval.memory.is_some() => Ok(()),
        Some(_) => Err(CliError::usage(format!(
            "approval `{id}` is a tool call's, not a memory candidate; decide it with `keel approvals`"
        ))),
        None => Err(CliError::usage(format!("no approval `{id}`"))),
    }
}

pub(crate) async fn memory(root: &Path, command: MemoryCommand) -> Result<(), CliError> {
    let runtime = Runtime::builder()
        .workspace(root)
        .build()
        .map_err(CliError::usage)?;
    let memory = runtime.memory().service().map_err(CliError::usage)?;
    match command {
        MemoryCommand::List {
            namespace,
            all,
            limit,
            json,
        } => {
            let filter = MemoryFilter {
                namespace,
                all_versions: all,
                limit: Some(limit),
                ..MemoryFilter::default()
            };
            print(&memory.list(&filter).await.map_err(CliError::usage)?, json)?;
        }
        MemoryCommand::Show { id } => {
            let record = memory.get(&id).await.map_err(CliError::usage)?;
            out::line(&serde_json::to_string_pretty(&record)?);
        }
        MemoryCommand::Search {
            query,
            namespace,
            limit,
            json,
        } => {
            for hit in memory
                .search(namespace.as_deref(), &query, limit)
                .await
                .map_err(CliError::usage)?
            {
                match json {
                    true => out::line(&serde_json::to_string(&hit)?),
                    false => out::line(&format!("{:>7.3}  {}", hit.score, show(&hit.record))),
                }
            }
        }
        MemoryCommand::Add {
            namespace,
            text,
            kind: k,
            tags,
        } => {
            let draft = MemoryDraft {
                kind: kind(&k)?,
                text,
                tags,
            };
            let record = memory
                .add(&namespace, draft, &decider())
                .await
                .map_err(CliError::usage)?;
            out::line(&format!("stored {}", show(&record)));
        }
        MemoryCommand::Update {
            id,
            text,
            kind: k,
            tags,
        } => {
            let update = MemoryUpdate {
                text,
                kind: k.as_deref().map(kind).transpose()?,
                tags: (!tags.is_empty()).then_some(tags),
            };
            let record = memory
                .update(&id, update, &decider())
                .await
                .map_err(CliError::usage)?;
            out::line(&format!("updated {}", show(&record)));
        }
        MemoryCommand::Rm { id, reason } => {
            let record = memory
                .delete(&id, &decider(), reason.as_deref())
                .await
                .map_err(CliError::usage)?;
            out::line(&format!("deleted {}", show(&record)));
        }
        MemoryCommand::History { id } => {
            print(&memory.history(&id).await.map_err(CliError::usage)?, false)?;
        }
        MemoryCommand::Candidates { json } => {
            for approval in runtime
                .approvals()
                .memory_candidates()
                .await
                .map_err(CliError::failed)?
            {
                match (json, &approval.memory) {
                    (true, _) => out::line(&serde_json::to_string(&approval)?),
                    (false, Some(c)) => out::line(&format!(
                        "{}  {:<16} {:<11} {}  (by {} in {})",
                        approval.approval_id,
                        c.namespace,
                        c.kind.as_str(),
                        c.text,
                        approval.agent,
                        approval.request_id
                    )),
                    (false, None) => {}
                }
            }
        }
        MemoryCommand::Approve { approval_id } => {
            memory_approval(&runtime, &approval_id).await?;
            let decided = runtime
                .approvals()
                .decide(&approval_id, true, ApprovalScope::Once, &decider(), None)
                .await
                .map_err(CliError::usage)?;
            let stored = decided.memory_record.unwrap_or_default();
            out::line(&format!("{approval_id} approved: stored {stored}"));
        }
        MemoryCommand::Reject {
            approval_id,
            reason,
        } => {
            memory_approval(&runtime, &approval_id).await?;
            runtime
                .approvals()
                .decide(
                    &approval_id,
                    false,
                    ApprovalScope::Once,
                    &decider(),
                    reason.as_deref(),
                )
                .await
                .map_err(CliError::usage)?;
            out::line(&format!("{approval_id} rejected: nothing stored"));
        }
        MemoryCommand::Maintain {
            namespace,
            no_expire,
            no_compact,
            similarity,
        } => {
            let request = MaintenanceRequest {
                namespace,
                expire: !no_expire,
                compact: !no_compact,
                similarity,
            };
            let (run, report) = runtime
                .memory()
                .maintain(&request, Some(decider()))
                .await
                .map_err(CliError::usage)?;
            out::line(&format!(
                "{} merged, {} expired (run {run})",
                report.merged.len(),
                report.expired.len()
            ));
        }
        MemoryCommand::Export { namespace, out: to } => {
            let jsonl = memory
                .export(namespace.as_deref())
                .await
                .map_err(CliError::usage)?;
            match to {
                Some(path) => std::fs::write(&path, jsonl).map_err(|e| {
                    CliError::failed(format!("cannot write {}: {e}", path.display()))
                })?,
                None => out::stdout_raw(&jsonl),
            }
        }
        MemoryCommand::Import { file } => {
            let jsonl = std::fs::read_to_string(&file)
                .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))?;
            let count = memory.import(&jsonl).await.map_err(CliError::usage)?;
            out::line(&format!("imported {count} record version(s)"));
        }
        MemoryCommand::Backup { to } => {
            memory.backup(&to).await.map_err(CliError::failed)?;
            out::line(&format!("backed up the store to {}", to.display()));
        }
    }
    Ok(())
}
