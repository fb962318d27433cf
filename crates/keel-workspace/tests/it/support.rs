//! Loading a [`TempWorkspace`] (the one of `keel-test-support`) and reading diagnostics.

use std::collections::BTreeMap;

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use keel_workspace::{Diagnostic, LoadError, LoadOptions, Workspace};

/// A workspace in a fresh temp folder, with an empty `config/`.
pub(crate) fn workspace() -> TempWorkspace {
    WorkspaceBuilder::new().build()
}

/// Loading a [`TempWorkspace`] with `keel-workspace`.
pub(crate) trait Load {
    fn load_with(&self, options: &LoadOptions) -> Result<Workspace, LoadError>;

    /// Loads and expects a valid workspace.
    fn load_ok(&self, options: &LoadOptions) -> Workspace {
        match self.load_with(options) {
            Ok(ws) => ws,
            Err(e) => panic!("workspace should load:\n{e}"),
        }
    }

    /// Loads and expects diagnostics.
    fn diagnostics(&self, options: &LoadOptions) -> Vec<Diagnostic> {
        match self.load_with(options) {
            Ok(_) => panic!("workspace should not load"),
            Err(LoadError::Invalid(diagnostics)) => diagnostics,
            Err(e) => panic!("expected diagnostics, got: {e}"),
        }
    }
}

impl Load for TempWorkspace {
    fn load_with(&self, options: &LoadOptions) -> Result<Workspace, LoadError> {
        Workspace::load_with(self.path(), options)
    }
}

/// Options with the given environment and no overlays.
pub(crate) fn env(vars: &[(&str, &str)]) -> LoadOptions {
    LoadOptions {
        overlays: Vec::new(),
        env: vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ..Default::default()
    }
}

/// `file:line:column: message` of each diagnostic, for compact assertions.
pub(crate) fn located(diagnostics: &[Diagnostic]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| {
            format!(
                "{}:{}:{}: {}",
                d.file.display(),
                d.line,
                d.column,
                d.message
            )
        })
        .collect()
}

/// A model and an agent using it, for tests that need a minimal valid workspace.
pub(crate) const MODEL_AND_AGENT: &str = "\
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec:
  provider: scripted
  script: resources/script.yaml
---
apiVersion: keel/v1
kind: Agent
metadata: { name: assistant }
spec:
  model: default
  tools: [read_file]
";
