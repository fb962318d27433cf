//! Opening a workspace for a command: the whole runtime ([`start`]), or only its store
//! ([`open_store`]) so that inspecting runs, sessions and approvals works even when the
//! workspace's configuration is broken.

use std::path::Path;

use keel::{Runtime, RuntimeBuilder, Workspace};
use keel_store::SqliteStore;

use crate::error::CliError;
use crate::follow::{OutputArgs, Printer};
use crate::out;

/// Loads the workspace, builds the runtime, recovers runs of dead processes, and prepares the
/// printer.
pub async fn start(root: &Path, output: &OutputArgs) -> Result<(Runtime, Printer), CliError> {
    start_with(root, output, |builder| builder).await
}

/// [`start`], with a chance to add to the runtime's builder (observers, tools).
pub async fn start_with(
    root: &Path,
    output: &OutputArgs,
    configure: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
) -> Result<(Runtime, Printer), CliError> {
    let workspace = Workspace::load(root)?;
    let printer = Printer::new(&workspace, output)?;
    let runtime = configure(Runtime::builder().loaded_workspace(workspace))
        .build()
        .map_err(CliError::usage)?;
    let recovered = runtime.recover().await.map_err(CliError::failed)?;
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

/// Opens the workspace's store without loading its configuration.
pub fn open_store(root: &Path) -> Result<SqliteStore, CliError> {
    if !root.join("config").is_dir() {
        return Err(CliError::usage(format!(
            "{} is not a Keel workspace (no config/ folder)",
            root.display()
        )));
    }
    Ok(SqliteStore::open(root)?)
}
