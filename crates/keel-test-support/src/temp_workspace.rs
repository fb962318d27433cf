//! [`TempWorkspace`]: a fresh temporary folder to lay out workspace files in, removed when
//! dropped.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// A temporary directory with a helper to write files into it.
#[derive(Debug)]
pub struct TempWorkspace {
    dir: TempDir,
}

impl TempWorkspace {
    /// Creates an empty temporary directory.
    ///
    /// # Panics
    /// When the directory cannot be created: the test cannot run without it.
    #[track_caller]
    pub fn new() -> Self {
        match TempDir::with_prefix("keel-test-") {
            Ok(dir) => Self { dir },
            Err(e) => panic!("cannot create a temporary workspace: {e}"),
        }
    }

    /// The directory (absolute).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `path()` joined with `rel_path`.
    pub fn join(&self, rel_path: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join(rel_path)
    }

    /// Writes `contents` to `rel_path`, creating parent directories; returns the full path.
    ///
    /// # Panics
    /// When the file cannot be written.
    #[track_caller]
    pub fn write(&self, rel_path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel_path);
        if let Some(parent) = path.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            panic!("cannot create {}: {e}", parent.display());
        }
        if let Err(e) = std::fs::write(&path, contents) {
            panic!("cannot write {}: {e}", path.display());
        }
        path
    }
}

impl Default for TempWorkspace {
    fn default() -> Self {
        Self::new()
    }
}
