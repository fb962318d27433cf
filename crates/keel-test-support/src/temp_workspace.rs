//! [`TempWorkspace`]: a fresh temporary folder to lay out workspace files in, removed when
//! dropped. The one temp-workspace type of every crate's tests; [`crate::WorkspaceBuilder`]
//! fills one with the common documents.

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

    /// Creates an empty temporary directory inside `parent` (benchmarks put theirs on the
    /// project's disk).
    ///
    /// # Panics
    /// When the directory cannot be created.
    #[track_caller]
    pub fn new_in(parent: impl AsRef<Path>) -> Self {
        let parent = parent.as_ref();
        if let Err(e) = std::fs::create_dir_all(parent) {
            panic!("cannot create {}: {e}", parent.display());
        }
        match TempDir::with_prefix_in("keel-test-", parent) {
            Ok(dir) => Self { dir },
            Err(e) => panic!(
                "cannot create a temporary workspace in {}: {e}",
                parent.display()
            ),
        }
    }

    /// The directory (absolute).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory as text, for `-w` arguments and configuration values.
    ///
    /// # Panics
    /// When the temp path is not UTF-8.
    #[track_caller]
    pub fn path_str(&self) -> &str {
        match self.dir.path().to_str() {
            Some(path) => path,
            None => panic!("the temp dir {} is not UTF-8", self.dir.path().display()),
        }
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

    /// Like [`write`](Self::write), and makes the file executable (a hook or tool script).
    ///
    /// # Panics
    /// When the file cannot be written.
    #[track_caller]
    pub fn write_executable(
        &self,
        rel_path: impl AsRef<Path>,
        contents: impl AsRef<[u8]>,
    ) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(rel_path, contents);
        if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)) {
            panic!("cannot make {} executable: {e}", path.display());
        }
        path
    }

    /// Creates the folder `rel_path` (and its parents).
    ///
    /// # Panics
    /// When the folder cannot be created.
    #[track_caller]
    pub fn mkdir(&self, rel_path: impl AsRef<Path>) -> PathBuf {
        let path = self.join(rel_path);
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!("cannot create {}: {e}", path.display());
        }
        path
    }

    /// The text of `rel_path`.
    ///
    /// # Panics
    /// When the file cannot be read.
    #[track_caller]
    pub fn read(&self, rel_path: impl AsRef<Path>) -> String {
        let path = self.join(rel_path);
        match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        }
    }

    /// Whether `rel_path` exists.
    pub fn exists(&self, rel_path: impl AsRef<Path>) -> bool {
        self.join(rel_path).exists()
    }
}

impl Default for TempWorkspace {
    fn default() -> Self {
        Self::new()
    }
}
