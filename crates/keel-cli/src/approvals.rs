//! `keel approvals list|show|approve|deny`: human decisions on gated tool calls. Read and
//! decided straight in the store, so any process — while the run waits in another — can
//! decide, and a decision is taken exactly once.

use clap::Subcommand;
use keel::{ApprovalScope, ApprovalStatus, RunStore};

use crate::error::CliError;
use crate::out;

#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// List approvals, newest first (default: pending ones).
    List {
        /// pending, approved, denied, expired, or all.
        #[arg(long, default_value = "pending")]
        status: String,
        #[arg(long)]
        json: bool,
    },
    /// Show one approval.
    Show { id: String },
    /// Approve a pending call.
    Approve {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        /// Approve the tool for the rest of the session, not just this call.
        #[arg(long)]
        session: bool,
    },
    /// Deny a pending call.
    Deny {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Who is deciding, for the record: `$USER@cli`, or `cli`.
pub(crate) fn decider() -> String {
    std::env::var("USER").map_or_else(|_| "cli".to_owned(), |user| format!("{user}@cli"))
}

pub(crate) async fn approvals(
    store: &dyn RunStore,
    command: ApprovalsCommand,
) -> Result<(), CliError> {
    match command {
        ApprovalsCommand::List { status, json } => {
            let filter = match status.as_str() {
                "all" => None,
                "pending" => Some(ApprovalStatus::Pending),
                "approved" => Some(ApprovalStatus::Approved),
                "denied" => Some(ApprovalStatus::Denied),
                "expired" => Some(ApprovalStatus::Expired),
                other => {
                    return Err(CliError::usage(format!(
                        "unknown status `{other}` (pending, approved, denied, expired, all)"
                    )));
                }
            };
            let approvals = store.list_approvals(filter).await?;
            for a in &approvals {
                match json {
                    true => out::line(&serde_json::to_string(a)?),
                    false => out::line(&format!(
                        "{}  {:<8}  {:<14}  {}  {}  (asked by {})",
                        a.approval_id,
                        a.status.as_str(),
                        a.tool,
                        a.arguments,
                        a.request_id,
                        a.asked_by
                    )),
                }
            }
            Ok(())
        }
        ApprovalsCommand::Show { id } => {
            let approval = store
                .get_approval(&id)
                .await?
                .ok_or_else(|| CliError::failed(format!("no approval `{id}`")))?;
            out::line(&serde_json::to_string_pretty(&approval)?);
            Ok(())
        }
        ApprovalsCommand::Approve {
            id,
            reason,
            session,
        } => {
            let scope = match session {
                true => ApprovalScope::Session,
                false => ApprovalScope::Once,
            };
            decide(store, &id, ApprovalStatus::Approved, scope, reason).await
        }
        ApprovalsCommand::Deny { id, reason } => {
            decide(
                store,
                &id,
                ApprovalStatus::Denied,
                ApprovalScope::Once,
                reason,
            )
            .await
        }
    }
}

/// Records a decision on a pending approval and says what was decided.
async fn decide(
    store: &dyn RunStore,
    id: &str,
    status: ApprovalStatus,
    scope: ApprovalScope,
    reason: Option<String>,
) -> Result<(), CliError> {
    let decided = store
        .decide_approval(id, status, scope, &decider(), reason.as_deref())
        .await?;
    out::line(&format!(
        "{} {} ({})",
        status.as_str(),
        decided.approval_id,
        decided.tool
    ));
    Ok(())
}
