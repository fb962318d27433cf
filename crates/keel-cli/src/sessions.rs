//! `keel sessions list|show|delete|compact`. Deleting a session runs its `SessionEnd` hooks
//! first; compacting one summarizes its older turns with a model.

use std::path::Path;

use clap::Subcommand;
use keel::{RunStore, Runtime, SessionId};
use keel_types::Role;

use crate::error::CliError;
use crate::out;

#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// List sessions, most recently used first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Show a session and its transcript.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Delete a session and its transcript (its runs stay); its `SessionEnd` hooks run first.
    Delete { id: String },
    /// Summarize a session's older turns: its runs then send the summary in their place (the
    /// transcript keeps every turn).
    Compact {
        id: String,
        /// Turns at the end kept word for word.
        #[arg(long, default_value_t = 4)]
        keep: usize,
    },
}

/// Runs the `SessionEnd` hooks of a session being deleted (reason `deleted`). A workspace
/// whose configuration does not load cannot run hooks: the session is deleted all the same,
/// with a warning.
async fn end_session(root: &Path, id: &SessionId) {
    match Runtime::builder().workspace(root).build() {
        Ok(runtime) => runtime.sessions().end(id, "deleted").await,
        Err(error) => out::status(&format!(
            "» the SessionEnd hooks did not run: the workspace does not load ({error})"
        )),
    }
}

pub(crate) async fn sessions(
    root: &Path,
    store: &dyn RunStore,
    command: SessionsCommand,
) -> Result<(), CliError> {
    match command {
        SessionsCommand::List { limit, json } => {
            let sessions = store.list_sessions(Some(limit)).await?;
            if json {
                for session in &sessions {
                    out::line(&serde_json::to_string(session)?);
                }
                return Ok(());
            }
            out::line(&format!(
                "{:<36}  {:<14}  {:>5}  {:>8}  UPDATED",
                "ID", "AGENT", "RUNS", "MESSAGES"
            ));
            for s in &sessions {
                out::line(&format!(
                    "{:<36}  {:<14}  {:>5}  {:>8}  {}",
                    s.session_id, s.agent, s.run_count, s.message_count, s.updated_at
                ));
            }
            Ok(())
        }
        SessionsCommand::Show { id, json } => {
            let id = SessionId::parse(&id)?;
            let session = store
                .get_session(&id)
                .await?
                .ok_or_else(|| CliError::failed(format!("no session `{id}`")))?;
            let transcript = store.session_messages(&id).await?;
            if json {
                out::line(&serde_json::to_string_pretty(&serde_json::json!({
                    "session": session,
                    "transcript": transcript,
                }))?);
                return Ok(());
            }
            out::line(&format!(
                "session {} (agent {}, {} run(s), updated {})",
                session.session_id, session.agent, session.run_count, session.updated_at
            ));
            for entry in &transcript {
                let m = &entry.message;
                let who = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                };
                let mut text = m.content.clone();
                for call in &m.tool_calls {
                    text.push_str(&format!(" [calls {}({})]", call.name, call.arguments));
                }
                out::line(&format!("{:>4} {who:>9}: {}", entry.seq, text.trim()));
            }
            Ok(())
        }
        SessionsCommand::Compact { id, keep } => {
            let id = SessionId::parse(&id)?;
            let runtime = Runtime::builder()
                .workspace(root)
                .build()
                .map_err(CliError::usage)?;
            match runtime.sessions().compact(&id, keep).await {
                Ok(Some(summary)) => {
                    out::line(&format!(
                        "compacted session {id}: its messages up to {} are summarized ({} characters); the transcript keeps them",
                        summary.through_seq,
                        summary.text.chars().count()
                    ));
                    Ok(())
                }
                Ok(None) => {
                    out::line(&format!(
                        "session {id} has no more than {keep} turn(s) after its last summary: nothing to compact"
                    ));
                    Ok(())
                }
                Err(error) => Err(CliError::failed(error)),
            }
        }
        SessionsCommand::Delete { id } => {
            let id = SessionId::parse(&id)?;
            if store.get_session(&id).await?.is_some() {
                end_session(root, &id).await;
            }
            match store.delete_session(&id).await? {
                true => {
                    out::line(&format!("deleted session {id}"));
                    Ok(())
                }
                false => Err(CliError::failed(format!("no session `{id}`"))),
            }
        }
    }
}
