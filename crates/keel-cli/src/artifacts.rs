//! `keel artifacts show URI`: print a stored artifact (a large tool output, …).

use std::path::Path;

use clap::Subcommand;
use keel::{ArtifactStore, Workspace};
use keel_store::{FsArtifacts, PgArtifacts, PgStore};
use keel_workspace::{ArtifactsKind, StoreKind};

use crate::error::CliError;
use crate::out;

#[derive(Debug, Subcommand)]
pub(crate) enum ArtifactsCommand {
    /// Print an artifact's content (or, with --meta, its record as JSON).
    Show {
        /// `keel://artifacts/<id>` or the bare id.
        uri: String,
        #[arg(long)]
        meta: bool,
    },
}

pub(crate) async fn artifacts(root: &Path, command: ArtifactsCommand) -> Result<(), CliError> {
    let ArtifactsCommand::Show { uri, meta } = command;
    let store = artifact_store(root).await?;
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

/// Where the workspace keeps artifacts: `store.artifacts` of its Runtime document, or
/// `.keel/artifacts` when the configuration does not load.
async fn artifact_store(root: &Path) -> Result<Box<dyn ArtifactStore>, CliError> {
    let Ok(workspace) = Workspace::load(root) else {
        return Ok(Box::new(FsArtifacts::open(root)));
    };
    let spec = &workspace.runtime.store;
    Ok(match (spec.artifacts.kind, &spec.artifacts.path) {
        (ArtifactsKind::Database, _) if spec.backend() == StoreKind::Postgres => {
            let store = PgStore::connect(keel::postgres_options(&workspace)).await?;
            Box::new(PgArtifacts::new(store))
        }
        (_, Some(path)) => Box::new(FsArtifacts::at(root.join(path))),
        _ => Box::new(FsArtifacts::open(root)),
    })
}
