//! `list_dir`: the entries of a directory, optionally recursive, sorted by name.
//!
//! Directories end in `/`, symlinks in `@` (they are shown but never followed). `.git` and
//! `.keel` are skipped. Paths are relative to the listed directory.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use walkdir::{DirEntry, WalkDir};

use super::{BoundedLines, content_budget, path_issues, run_blocking};
use crate::input;
use crate::paths::{self, Access};

/// Entries shown when the caller sets no `maxEntries`.
const DEFAULT_MAX_ENTRIES: usize = 1000;

/// `list_dir`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ListDirInput {
    /// Directory relative to the workspace root (default: the root).
    #[serde(default = "super::workspace_root")]
    path: String,
    /// Also list the contents of subdirectories.
    #[serde(default)]
    recursive: bool,
    /// Stop after this many entries.
    #[serde(default = "default_max_entries")]
    #[schemars(range(min = 1))]
    max_entries: usize,
}

fn default_max_entries() -> usize {
    DEFAULT_MAX_ENTRIES
}

/// Lists a directory inside the workspace.
#[derive(Debug)]
pub struct ListDir {
    spec: ToolSpec,
}

impl ListDir {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "list_dir".to_owned(),
                description: "List the entries of a directory in the workspace, one per line, \
                    sorted by name. Directories end with `/`, symbolic links with `@` (links are \
                    not followed). `.git` and `.keel` are skipped. With `recursive`, \
                    subdirectories are listed too, as paths relative to the listed directory."
                    .to_owned(),
                parameters: input::schema_of::<ListDirInput>(),
            },
        }
    }
}

impl Default for ListDir {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        path_issues(ctx, args, "path", Some("."), Access::Read)
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: ListDirInput = input::parse(args)?;
        let requested = input.path;
        let recursive = input.recursive;
        let max_entries = input.max_entries.max(1);
        let dir = paths::resolve(&ctx.workspace_root, &requested, Access::Read)?;
        if !dir.is_dir() {
            return Err(ToolError::Io(format!(
                "`{requested}` is not a directory; use read_file"
            )));
        }
        let budget = content_budget(ctx.max_output_bytes);
        let text = run_blocking(move |cancelled| {
            Ok(list(&dir, recursive, max_entries, budget, cancelled))
        })
        .await?;
        Ok(ToolOutput::text(text))
    }
}

/// Whether a walk skips this entry (and, for a directory, everything below it).
pub(super) fn is_skipped(entry: &DirEntry) -> bool {
    entry.depth() > 0 && matches!(entry.file_name().to_str(), Some(".git" | ".keel"))
}

fn list(
    dir: &Path,
    recursive: bool,
    max_entries: usize,
    budget: usize,
    cancelled: &AtomicBool,
) -> String {
    let walk = WalkDir::new(dir)
        .min_depth(1)
        .max_depth(if recursive { usize::MAX } else { 1 })
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_skipped(e));
    let mut lines = BoundedLines::new(budget);
    let mut shown = 0usize;
    let mut unreadable = 0usize;
    let mut note = None;
    for entry in walk {
        if cancelled.load(Ordering::Relaxed) {
            break;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(_) => {
                unreadable += 1;
                continue;
            }
        };
        if shown == max_entries {
            note = Some(format!(
                "[stopped after {max_entries} entries; list a subdirectory or raise maxEntries]"
            ));
            break;
        }
        if !lines.push(&render(dir, &entry)) {
            note = Some(format!(
                "[output truncated after {shown} entries; list a subdirectory instead]"
            ));
            break;
        }
        shown += 1;
    }
    if note.is_none() && unreadable > 0 {
        note = Some(format!("[{unreadable} entries could not be read]"));
    }
    if shown == 0 && note.is_none() {
        return "(empty directory)".to_owned();
    }
    lines.finish(note)
}

fn render(dir: &Path, entry: &DirEntry) -> String {
    let rel = paths::display(dir, entry.path());
    let kind = entry.file_type();
    if kind.is_symlink() {
        format!("{rel}@")
    } else if kind.is_dir() {
        format!("{rel}/")
    } else {
        rel
    }
}
