//! `glob`: the files whose paths match a glob pattern, sorted.
//!
//! The pattern is matched against each file's path relative to the searched directory (the
//! workspace root by default), with `/` separators: `*` stays within one directory, `**`
//! crosses any number of them (`**/*.rs`, `src/**/mod.rs`, `*.{yaml,yml}`). The walk never
//! follows symlinks (so it cannot leave the workspace) and skips `.git` and `.keel`. Paths in
//! the output are relative to the workspace root, ready for `read_file`.

use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use walkdir::WalkDir;

use super::list_dir::is_skipped;
use super::{BoundedLines, arg_issue, content_budget, path_issues, run_blocking};
use crate::input;
use crate::paths::{self, Access};

/// Files shown when the caller sets no `maxResults`.
const DEFAULT_MAX_RESULTS: usize = 500;

/// `glob`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GlobInput {
    /// Glob pattern, relative to `path`.
    #[schemars(length(min = 1))]
    pattern: String,
    /// Directory to search, relative to the workspace root (default: the root).
    #[serde(default = "super::workspace_root")]
    path: String,
    /// Stop after this many files.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1))]
    max_results: usize,
}

fn default_max_results() -> usize {
    DEFAULT_MAX_RESULTS
}

/// Finds files by path pattern inside the workspace.
#[derive(Debug)]
pub struct Glob {
    spec: ToolSpec,
}

impl Glob {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "glob".to_owned(),
                description: "Find files in the workspace whose path matches a glob pattern, \
                    e.g. `**/*.rs`, `src/**/mod.rs` or `config/*.{yaml,yml}`. The pattern is \
                    matched against paths relative to `path` (default: the workspace root); \
                    `*` matches within one directory, `**` across directories. Returns one path \
                    per line, relative to the workspace root, sorted. `.git` and `.keel` are \
                    skipped; symbolic links are not followed."
                    .to_owned(),
                parameters: input::schema_of::<GlobInput>(),
            },
        }
    }
}

impl Default for Glob {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Glob {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = path_issues(ctx, args, "path", Some("."), Access::Read);
        if let Some(pattern) = args.get("pattern").and_then(Value::as_str)
            && let Err(ToolError::InvalidArguments(message) | ToolError::PathEscape(message)) =
                matcher(pattern)
        {
            issues.push(arg_issue(
                "pattern",
                "a relative glob such as `**/*.rs`",
                pattern,
                message,
            ));
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: GlobInput = input::parse(args)?;
        let requested = input.path;
        let max_results = input.max_results.max(1);
        let matcher = matcher(&input.pattern)?;
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let base = paths::resolve(&root, &requested, Access::Read)?;
        if !base.is_dir() {
            return Err(ToolError::Io(format!("`{requested}` is not a directory")));
        }
        let search = Search {
            root,
            base,
            matcher,
            max_results,
            budget: content_budget(ctx.max_output_bytes),
        };
        let pattern = input.pattern;
        let text = run_blocking(move |cancelled| Ok(search.run(&pattern, cancelled))).await?;
        Ok(ToolOutput::text(text))
    }
}

/// The compiled pattern, or why it cannot be used.
fn matcher(pattern: &str) -> Result<GlobMatcher, ToolError> {
    let path = Path::new(pattern);
    if path.is_absolute() {
        return Err(ToolError::InvalidArguments(format!(
            "`pattern` must be relative to `path`, not absolute: `{pattern}`; set `path` to the \
             directory instead"
        )));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(ToolError::InvalidArguments(format!(
            "`pattern` cannot contain `..` (files outside the searched directory are never \
             listed): `{pattern}`"
        )));
    }
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| ToolError::InvalidArguments(format!("invalid `pattern`: {e}")))
}

struct Search {
    root: std::path::PathBuf,
    base: std::path::PathBuf,
    matcher: GlobMatcher,
    max_results: usize,
    budget: usize,
}

impl Search {
    fn run(&self, pattern: &str, cancelled: &AtomicBool) -> String {
        let walk = WalkDir::new(&self.base)
            .min_depth(1)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| !is_skipped(e));
        let mut lines = BoundedLines::new(self.budget);
        let mut shown = 0usize;
        let mut note = None;
        for entry in walk.flatten() {
            if cancelled.load(Ordering::Relaxed) {
                break;
            }
            // Symlinks have their own file type here and are never followed.
            if !entry.file_type().is_file() {
                continue;
            }
            if !self
                .matcher
                .is_match(paths::display(&self.base, entry.path()))
            {
                continue;
            }
            if shown == self.max_results {
                note = Some(format!(
                    "[stopped after {} files; narrow the pattern or raise maxResults]",
                    self.max_results
                ));
                break;
            }
            if !lines.push(&paths::display(&self.root, entry.path())) {
                note = Some(format!(
                    "[output truncated after {shown} files; narrow the pattern]"
                ));
                break;
            }
            shown += 1;
        }
        if shown == 0 && note.is_none() {
            return format!("no files match `{pattern}`");
        }
        lines.finish(note)
    }
}
