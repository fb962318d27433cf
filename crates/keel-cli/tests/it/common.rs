//! Running the `keel` binary: the [`Cli`] harness bound to this crate's binary, and a copy of
//! the repository's quickstart workspace.

use std::path::Path;

use keel_test_support::{Cli, TempWorkspace};

/// The built `keel` binary, run inside `ws` with a clean environment.
pub(crate) fn keel_in(ws: &TempWorkspace) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_keel"), ws.path())
}

/// The built `keel` binary, run inside `dir` (a folder that is not a [`TempWorkspace`]).
pub(crate) fn keel_at(dir: &Path) -> Cli {
    Cli::new(env!("CARGO_BIN_EXE_keel"), dir)
}

/// A fresh copy of the repository's `examples/quickstart` (without `.keel`).
pub(crate) fn quickstart() -> TempWorkspace {
    let ws = TempWorkspace::new();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart");
    copy_tree(&from, ws.path());
    ws
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".keel" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
