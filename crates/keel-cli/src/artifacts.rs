//! `keel artifacts show URI`: print a stored artifact (a large tool output, …).

use std::path::Path;

use clap::Subcommand;
use keel::ArtifactStore;
use keel_store::FsArtifacts;

use crate::error::CliError;
use crate::out;

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

pub async fn artifacts(root: &Path, command: ArtifactsCommand) -> Result<(), CliError> {
    let ArtifactsCommand::Show { uri, meta } = command;
    let store = FsArtifacts::open(root);
    let (record, content) = store
        .get(&uri)
        .await?
        .ok_or_else(|| CliError::failed(format!("no artifact `{uri}`")))?;
    if meta {
        out::line(&serde_json::to_string_pretty(&record)?);
    } else {
        out::stdout_raw(&String::from_utf8_lossy(&content));
    }
    Ok(())
}
