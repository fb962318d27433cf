//! `keel artifacts show URI`: print a stored artifact (a large tool output, …).

use std::path::Path;

use clap::Subcommand;
use keel::ArtifactStore;
use keel_store::FsArtifacts;

use crate::out;
use crate::runs::{CmdResult, failed};

#[derive(Debug, Subcommand)]
pub enum ArtifactsCommand {
    /// Print an artifact's content (or, with --meta, its record as JSON).
    Show {
        /// `keel://artifacts/<id>` or the bare id.
        uri: String,
        #[arg(long)]
        meta: bool,
    },
}

pub async fn artifacts(root: &Path, command: ArtifactsCommand) -> CmdResult {
    let ArtifactsCommand::Show { uri, meta } = command;
    let store = FsArtifacts::open(root);
    let (record, content) = store
        .get(&uri)
        .await
        .map_err(failed)?
        .ok_or_else(|| failed(format!("no artifact `{uri}`")))?;
    if meta {
        out::line(&serde_json::to_string_pretty(&record).map_err(failed)?);
    } else {
        out::stdout_raw(&String::from_utf8_lossy(&content));
    }
    Ok(())
}
