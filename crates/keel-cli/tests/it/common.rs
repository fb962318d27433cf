//! Running the `keel` binary.

use std::path::Path;
use std::process::{Command, Output};

/// A `keel` command.
pub fn keel() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    cmd.env_remove("KEEL_CONFIG_PATHS").env("KEEL_LOG", "error");
    cmd
}

/// Runs `keel` with `args` to completion.
pub fn run(args: &[&str]) -> Output {
    keel().args(args).output().unwrap()
}

/// stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Copies a directory tree (without `.keel`).
pub fn copy_tree(from: &Path, to: &Path) {
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

/// The repository's `examples/quickstart`.
pub fn quickstart_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart")
}

/// The id of the newest run of the workspace at `ws`.
pub fn newest_run_id(ws: &str) -> String {
    let listed = stdout(&run(&["runs", "list", "-w", ws, "--json", "--limit", "1"]));
    let record: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    record["requestId"].as_str().unwrap().to_owned()
}
