//! `list_dir`: the entries of a directory, optionally recursive, sorted by name.
//!
//! Directories end in `/`, symlinks in `@` (they are shown but never followed). `.git` and
//! `.keel` are skipped. Paths are relative to the listed directory.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::{Value, json};
use walkdir::{DirEntry, WalkDir};

use super::{
    BoundedLines, content_budget, opt_bool, opt_count, opt_str, path_issues, run_blocking,
};
use crate::paths::{self, Access};

/// Entries shown when the caller sets no `maxEntries`.
const DEFAULT_MAX_ENTRIES: usize = 1000;

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
                parameters: json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {
                        "path": {
                            "type": "string",
                            "default": ".",
                            "description": "Directory relative to the workspace root (default: the root)."
                        },
                        "recursive": {
                            "type": "boolean",
                            "default": false,
                            "description": "Also list the contents of subdirectories."
                        },
                        "maxEntries": {
                            "type": "integer",
                            "minimum": 1,
                            "default": DEFAULT_MAX_ENTRIES,
                            "description": "Stop after this many entries."
                        }
                    },
                    "additionalProperties": false
                }),
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
        let requested = opt_str(&args, "path")?.unwrap_or(".").to_owned();
        let recursive = opt_bool(&args, "recursive")?.unwrap_or(false);
        let max_entries = opt_count(&args, "maxEntries")?
            .unwrap_or(DEFAULT_MAX_ENTRIES)
            .max(1);
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
