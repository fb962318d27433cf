//! Keel's built-in tools: the file tools `read_file`, `list_dir`, `grep`, `write_file`,
//! `edit_file` and `glob`, plus `shell` and `http_fetch` (with the crate's `http` feature;
//! without it `http_fetch` is a stand-in whose calls fail, see `crate::unavailable`).
//!
//! Start at [`builtins`], which builds all of them from the workspace's settings; the list
//! of them is [`BuiltinTool`] in `keel-workspace`. Every file
//! tool resolves its paths through [`crate::paths`], so nothing outside the workspace (or, for
//! writes, inside `.keel/`) can be touched; each also declares the same containment in
//! [`Tool::check`], so the gateway blocks an escaping path before the tool runs. Walks and
//! reads run on the blocking pool and stop early when the call future is dropped. Each tool
//! parses its arguments into its own input struct, from which its schema is generated
//! ([`crate::input`]). Shared pieces — bounded output, binary detection, path checks, the
//! run's record of the files it has seen — live here; each tool has its own submodule.
//!
//! Read before edit: `write_file` and `edit_file` refuse to change an existing file the run
//! has not seen — read with `read_file`, or written or created by the run itself — so a model
//! never overwrites what it has not read (`ensure_seen`). The record is the context's
//! [`keel_types::SeenFiles`], keyed by canonical path; a context without one (an operator's
//! direct call) skips the check, and so does `tools.writeFile.requireRead: false` (or
//! `editFile`).

mod edit_file;
mod exec;
mod glob;
mod grep;
#[cfg(feature = "http")]
mod http_fetch;
mod list_dir;
mod propose_skill;
mod read_file;
mod shell;
mod skills;
mod write_file;

use crate::sandbox::Sandboxes;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_types::{Issue, Tool, ToolContext, ToolError};
use keel_workspace::{BuiltinTool, BuiltinToolSettings};
use serde_json::Value;

pub use edit_file::EditFile;
pub use exec::{Exec, ExecKind};
pub use glob::Glob;
pub use grep::Grep;
#[cfg(feature = "http")]
pub use http_fetch::HttpFetch;
pub use list_dir::ListDir;
pub use propose_skill::ProposeSkill;
pub use read_file::ReadFile;
pub use shell::Shell;
pub use skills::{LoadSkill, ReadSkillResource, RunSkillScript, skill_tools};
pub use write_file::WriteFile;

use crate::paths::{self, Access};

/// Largest `content` `write_file` accepts, and largest file `edit_file` changes.
pub const MAX_WRITE_BYTES: usize = 10 * 1024 * 1024;

/// Every built-in tool, configured by the `Runtime` document's `tools` settings, in the
/// order of [`BuiltinTool::ALL`].
pub fn builtins(settings: &BuiltinToolSettings) -> Vec<Arc<dyn Tool>> {
    builtins_in(settings, &Sandboxes::default())
}

/// The built-in tools with `settings`, their processes (`shell`'s) started in the
/// workspace's sandbox profiles.
pub fn builtins_in(settings: &BuiltinToolSettings, sandboxes: &Sandboxes) -> Vec<Arc<dyn Tool>> {
    BuiltinTool::ALL
        .into_iter()
        .map(|tool| -> Arc<dyn Tool> {
            match tool {
                BuiltinTool::Shell => {
                    Arc::new(Shell::new(&settings.shell).with_sandboxes(sandboxes.clone()))
                }
                BuiltinTool::ExecStart => {
                    Arc::new(Exec::new(ExecKind::Start).with_sandboxes(sandboxes.clone()))
                }
                _ => build(tool, settings),
            }
        })
        .collect()
}

/// The built-in tool called `name` with default settings (so `http_fetch` allows nothing),
/// if there is one. Use [`builtins`] to configure them.
pub fn builtin(name: &str) -> Option<Arc<dyn Tool>> {
    BuiltinTool::from_name(name).map(|tool| build(tool, &BuiltinToolSettings::default()))
}

fn build(tool: BuiltinTool, settings: &BuiltinToolSettings) -> Arc<dyn Tool> {
    match tool {
        BuiltinTool::ReadFile => Arc::new(ReadFile::new()),
        BuiltinTool::ListDir => Arc::new(ListDir::new()),
        BuiltinTool::Grep => Arc::new(Grep::new()),
        BuiltinTool::WriteFile => {
            Arc::new(WriteFile::new().with_read_check(settings.write_file.require_read))
        }
        BuiltinTool::EditFile => {
            Arc::new(EditFile::new().with_read_check(settings.edit_file.require_read))
        }
        BuiltinTool::Glob => Arc::new(Glob::new()),
        BuiltinTool::Shell => Arc::new(Shell::new(&settings.shell)),
        BuiltinTool::ExecStart => Arc::new(Exec::new(ExecKind::Start)),
        BuiltinTool::ExecWrite => Arc::new(Exec::new(ExecKind::Write)),
        BuiltinTool::ExecRead => Arc::new(Exec::new(ExecKind::Read)),
        BuiltinTool::ExecResize => Arc::new(Exec::new(ExecKind::Resize)),
        BuiltinTool::ExecStop => Arc::new(Exec::new(ExecKind::Stop)),
        #[cfg(feature = "http")]
        BuiltinTool::HttpFetch => Arc::new(HttpFetch::new(&settings.http_fetch)),
        #[cfg(not(feature = "http"))]
        BuiltinTool::HttpFetch => Arc::new(crate::unavailable::Unavailable::http_fetch()),
    }
}

/// The issue of the optional path argument `key` (default `default`) when it leaves the
/// workspace, as [`Tool::check`] reports it.
fn path_issues(
    ctx: &ToolContext,
    args: &Value,
    key: &str,
    default: Option<&str>,
    mode: Access,
) -> Vec<Issue> {
    let requested = match args.get(key) {
        Some(Value::String(s)) => s.as_str(),
        None | Some(Value::Null) => match default {
            Some(default) => default,
            None => return Vec::new(),
        },
        // The schema check reports wrong types.
        Some(_) => return Vec::new(),
    };
    paths::issue(&ctx.workspace_root, &format!("/{key}"), requested, mode)
        .into_iter()
        .collect()
}

/// Records that the run has seen the file at `path` (canonical): it read, wrote or created it.
fn mark_seen(ctx: &ToolContext, path: &Path) {
    if let Some(seen) = &ctx.seen_files {
        seen.insert(path);
    }
}

/// Refuses to change the existing file at `path` (canonical; shown to the model as `shown`)
/// unless the run has seen it. A missing file, a context without a `SeenFiles` record or
/// `required: false` passes.
fn ensure_seen(
    ctx: &ToolContext,
    required: bool,
    path: &Path,
    shown: &str,
) -> Result<(), ToolError> {
    let Some(seen) = ctx.seen_files.as_ref().filter(|_| required) else {
        return Ok(());
    };
    if !path.is_file() || seen.contains(path) {
        return Ok(());
    }
    Err(ToolError::Failed(format!(
        "`{shown}` already exists and this run has not read it; read it with read_file first \
         (so nothing you have not seen is overwritten), then change it"
    )))
}

/// An issue about the string argument `key`, for [`Tool::check`].
fn arg_issue(key: &str, expected: &str, found: impl Into<String>, message: String) -> Issue {
    Issue {
        path: format!("/{key}"),
        expected: expected.to_owned(),
        found: found.into(),
        message,
    }
}

/// The issue of a string argument longer than `max` bytes.
fn size_issue(args: &Value, key: &str, max: usize) -> Option<Issue> {
    let text = args.get(key)?.as_str()?;
    (text.len() > max).then(|| {
        arg_issue(
            key,
            &format!("at most {max} bytes"),
            format!("{} bytes", text.len()),
            format!(
                "`{key}` is {} bytes, over the limit of {max} bytes",
                text.len()
            ),
        )
    })
}

/// Bytes kept free under the output cap for a truncation note.
const NOTE_RESERVE: usize = 200;

/// How many leading bytes are inspected for NUL when deciding whether a file is binary.
const SNIFF_BYTES: usize = 8 * 1024;

/// The content budget under an output cap of `max_output_bytes`, leaving room for a note.
fn content_budget(max_output_bytes: usize) -> usize {
    max_output_bytes
        .saturating_sub(NOTE_RESERVE)
        .max(max_output_bytes / 2)
}

/// Whether the start of a file looks binary (contains a NUL byte).
fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(SNIFF_BYTES).any(|&b| b == 0)
}

/// The longest prefix of `text` that fits in `max` bytes without splitting a character.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// Lines of text collected under a byte budget.
#[derive(Debug)]
struct BoundedLines {
    text: String,
    budget: usize,
    full: bool,
}

impl BoundedLines {
    fn new(budget: usize) -> Self {
        Self {
            text: String::new(),
            budget,
            full: false,
        }
    }

    /// Appends one line; returns `false` (and keeps nothing of it) once the budget is spent.
    fn push(&mut self, line: &str) -> bool {
        if self.full || self.text.len() + line.len() + 1 > self.budget {
            self.full = true;
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        true
    }

    /// The text, with `note` on its own last line when there is one.
    fn finish(mut self, note: Option<String>) -> String {
        if let Some(note) = note {
            self.text.push_str(&note);
        } else if self.text.ends_with('\n') {
            self.text.pop();
        }
        self.text
    }
}

/// The default of a path argument that may be left out: the workspace root.
fn workspace_root() -> String {
    ".".to_owned()
}

/// The default of a flag that is on unless turned off.
fn yes() -> bool {
    true
}

/// Sets its flag when dropped, telling blocking work that nobody waits for it any more.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on the blocking pool. `work` receives a flag that turns true when the calling
/// future is dropped, and should check it between files so an abandoned walk stops early.
async fn run_blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> Result<T, ToolError> + Send + 'static,
{
    let cancelled = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(Arc::clone(&cancelled));
    let handle = tokio::task::spawn_blocking(move || work(&cancelled));
    let result = handle
        .await
        .map_err(|e| ToolError::Io(format!("the file task failed: {e}")))?;
    drop(guard);
    result
}

/// An I/O error on `what`, in words.
fn io_error(what: &str, err: &std::io::Error) -> ToolError {
    match err.kind() {
        std::io::ErrorKind::NotFound => ToolError::Io(format!("`{what}` does not exist")),
        std::io::ErrorKind::PermissionDenied => {
            ToolError::Io(format!("permission denied for `{what}`"))
        }
        _ => ToolError::Io(format!("cannot access `{what}`: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_whole_characters() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
    }

    #[test]
    fn bounded_lines_stop_at_budget() {
        let mut lines = BoundedLines::new(8);
        assert!(lines.push("abc"));
        assert!(!lines.push("defgh"));
        assert!(!lines.push("x"));
        assert_eq!(lines.finish(None), "abc");
    }

    #[test]
    fn each_tool_answers_to_its_name_in_the_list() {
        let names: Vec<String> = builtins(&BuiltinToolSettings::default())
            .iter()
            .map(|t| t.spec().name.clone())
            .collect();
        assert_eq!(names, keel_workspace::BUILTIN_TOOLS);
        for name in keel_workspace::BUILTIN_TOOLS {
            assert!(builtin(name).is_some_and(|t| t.spec().name == *name));
        }
        assert!(builtin("exec_run").is_none());
    }
}
