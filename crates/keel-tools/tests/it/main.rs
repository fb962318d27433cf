//! Integration tests of keel-tools against real files, directories, symlinks and processes.
//!
//! `files` covers what each file tool does, `escapes` that no file tool can leave the
//! workspace (or write Keel's state), `containment` that `check` blocks the same escapes
//! before a call, `edit_and_glob` the editing and finding tools, `command` the process-backed
//! tools, `shell` the built-in shell, `http` `http_fetch` and declared http tools, and `gateway`
//! the guard → repair → block pipeline (corpus snapshot, property test, repair model),
//! `read_before_edit` that a run changes only files it has seen, and `hooks` the hook runner
//! against real scripts and a loopback server.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod command;
mod containment;
mod edit_and_glob;
mod escapes;
mod exec;
mod files;
mod gateway;
mod hooks;
mod http;
mod policy;
mod read_before_edit;
mod schemas;
mod shell;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_test_support::TempWorkspace;
use keel_tools::builtin::builtin;
use keel_types::{RequestId, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::Value;

/// A context for calls in `root`.
pub fn ctx(root: &Path) -> ToolContext {
    ctx_with_cap(root, 64 * 1024)
}

/// A context with a specific output cap.
pub fn ctx_with_cap(root: &Path, max_output_bytes: usize) -> ToolContext {
    ToolContext {
        workspace_root: root.to_path_buf(),
        request_id: RequestId::from("run_test"),
        session_id: None,
        agent: "tester".to_owned(),
        max_output_bytes,
        seen_files: None,
        progress: None,
        metadata: Default::default(),
        call_id: None,
        call_seq: None,
        traceparent: None,
        files: None,
    }
}

/// The built-in tool `name`.
pub fn tool(name: &str) -> Arc<dyn Tool> {
    builtin(name).unwrap_or_else(|| panic!("no built-in `{name}`"))
}

/// Calls built-in `name` in `root`.
pub async fn call(name: &str, root: &Path, args: Value) -> Result<ToolOutput, ToolError> {
    tool(name).call(&ctx(root), args).await
}

/// Calls built-in `name` in `root` and returns its text, failing the test on error.
pub async fn text(name: &str, root: &Path, args: Value) -> String {
    match call(name, root, args.clone()).await {
        Ok(out) => out.content,
        Err(e) => panic!("{name} {args} failed: {e:?}"),
    }
}

/// A workspace next to a folder outside it, with symlinks from one to the other.
pub struct Fixture {
    pub ws: TempWorkspace,
    pub outside: TempWorkspace,
}

impl Fixture {
    /// `ws/` holds `a.txt`, `src/lib.rs`, `src/nested/deep.txt`, `.git/HEAD`, `.keel/keel.db`,
    /// `link_file` → `outside/secret.txt`, `link_dir` → `outside/`, `inner_link` → `a.txt`.
    pub fn create() -> Self {
        let ws = TempWorkspace::new();
        let outside = TempWorkspace::new();
        let root = ws.path();
        write(root, "a.txt", "alpha\nbeta\ngamma\n");
        write(
            root,
            "src/lib.rs",
            "fn main() {\n    println!(\"Hello\");\n}\n",
        );
        write(root, "src/nested/deep.txt", "deep hello\n");
        write(root, ".git/HEAD", "ref: refs/heads/main hello\n");
        write(root, ".keel/keel.db", "state hello\n");
        write(outside.path(), "secret.txt", "top secret hello\n");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("link_file"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link_dir")).unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("inner_link")).unwrap();
        Self { ws, outside }
    }

    pub fn root(&self) -> &Path {
        self.ws.path()
    }

    pub fn outside_file(&self) -> PathBuf {
        self.outside.path().join("secret.txt")
    }
}

/// Writes `content` to `root/rel`, creating directories.
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}
