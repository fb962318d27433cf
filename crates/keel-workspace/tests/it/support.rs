//! A temporary workspace folder and helpers to load it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_workspace::{Diagnostic, LoadError, LoadOptions, Workspace};
use tempfile::TempDir;

/// A workspace in a fresh temp folder, with an empty `config/`.
pub struct TempWorkspace {
    dir: TempDir,
}

impl TempWorkspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("config")).unwrap();
        Self { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` (creating folders) and returns the absolute path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn load_with(&self, options: &LoadOptions) -> Result<Workspace, LoadError> {
        Workspace::load_with(self.root(), options)
    }

    /// Loads and expects a valid workspace.
    pub fn load_ok(&self, options: &LoadOptions) -> Workspace {
        match self.load_with(options) {
            Ok(ws) => ws,
            Err(e) => panic!("workspace should load:\n{e}"),
        }
    }

    /// Loads and expects diagnostics.
    pub fn diagnostics(&self, options: &LoadOptions) -> Vec<Diagnostic> {
        match self.load_with(options) {
            Ok(_) => panic!("workspace should not load"),
            Err(LoadError::Invalid(diagnostics)) => diagnostics,
            Err(e) => panic!("expected diagnostics, got: {e}"),
        }
    }
}

/// Options with the given environment and no overlays.
pub fn env(vars: &[(&str, &str)]) -> LoadOptions {
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
pub fn located(diagnostics: &[Diagnostic]) -> Vec<String> {
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
pub const MODEL_AND_AGENT: &str = "\
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
