//! Opening a workspace for a command: the whole runtime ([`start`]), or only its store
//! ([`open_store`]) so that inspecting runs, sessions and approvals works even when the
//! workspace's configuration is broken.

use std::path::Path;

use keel::{Runtime, RuntimeBuilder, Workspace};
use std::sync::Arc;

use keel::RunStore;
use keel_store::SqliteStore;

use crate::error::CliError;
use crate::follow::{OutputArgs, Printer};
use crate::out;

/// Loads the workspace, builds the runtime, recovers runs of dead processes, and prepares the
/// printer.
pub(crate) async fn start(
    root: &Path,
    output: &OutputArgs,
) -> Result<(Runtime, Printer), CliError> {
    start_with(root, output, |builder| builder).await
}

/// [`start`], with a chance to add to the runtime's builder (observers, tools).
pub(crate) async fn start_with(
    root: &Path,
    output: &OutputArgs,
    configure: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
) -> Result<(Runtime, Printer), CliError> {
    let workspace = Workspace::load(root)?;
    // A broken skill is left out, and said; the rest of the workspace runs.
    for problem in &workspace.skills.current().problems {
        out::status(&format!("» A skill is left out: {problem}"));
    }
    let printer = Printer::new(&workspace, output)?;
    let runtime = configure(Runtime::builder().loaded_workspace(workspace))
        .build()
        .map_err(CliError::usage)?;
    // On a shared store the serving replicas take over runs of dead processes (and resume
    // them); a command does not take them for itself.
    let recovered = match runtime.is_shared() {
        true => Vec::new(),
        false => runtime.runs().recover().await.map_err(CliError::failed)?,
    };
    if !recovered.is_empty() {
        out::status(&format!(
            "» {} run(s) left running by a process that stopped are now interrupted: {} (keel runs resume ID)",
            recovered.len(),
            recovered
                .iter()
                .map(|id| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok((runtime, printer))
}

/// A workspace's run store, opened for inspection.
pub(crate) struct Stores {
    pub runs: Arc<dyn RunStore>,
    /// The SQLite store, when that is the workspace's (it has JSONL mirrors to check).
    pub sqlite: Option<SqliteStore>,
}

/// Opens the workspace's store: the one its Runtime document names (`store.kind`), or — when
/// the configuration does not load — the SQLite store in `.keel/`, with a warning, so that
/// inspecting runs, sessions and approvals still works.
pub(crate) async fn open_store(root: &Path) -> Result<Stores, CliError> {
    if !root.join("config").is_dir() {
        return Err(CliError::usage(format!(
            "{} is not a Keel workspace (no config/ folder)",
            root.display()
        )));
    }
    match Workspace::load(root) {
        Ok(workspace)
            if workspace.runtime.store.backend() == keel_workspace::StoreKind::Postgres =>
        {
            let store = keel_store::PgStore::connect(keel::postgres_options(&workspace)).await?;
            Ok(Stores {
                runs: Arc::new(store),
                sqlite: None,
            })
        }
        loaded => {
            let layout = match &loaded {
                Ok(workspace) => keel::mirror_layout(workspace),
                Err(error) => {
                    out::status(&format!(
                        "» the configuration does not load ({}); reading the SQLite store in .keel/",
                        error.to_string().lines().next().unwrap_or_default()
                    ));
                    Default::default()
                }
            };
            let store = SqliteStore::open_with(root, layout)?;
            Ok(Stores {
                runs: Arc::new(store.clone()),
                sqlite: Some(store),
            })
        }
    }
}
