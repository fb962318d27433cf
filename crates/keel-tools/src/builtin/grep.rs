//! `grep`: lines matching a regular expression, as `file:line: text`.
//!
//! The walk never follows symlinks (so it cannot leave the workspace), skips `.git`, `.keel`,
//! binary files and files over [`MAX_FILE_BYTES`], and visits files in name order so results
//! are stable. File paths in the output are relative to the workspace root, ready for
//! `read_file`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use walkdir::WalkDir;

use super::list_dir::is_skipped;
use super::{
    BoundedLines, arg_issue, clip, content_budget, looks_binary, path_issues, run_blocking,
};
use crate::input;
use crate::paths::{self, Access};

/// Matches shown when the caller sets no `maxMatches`.
const DEFAULT_MAX_MATCHES: usize = 200;

/// Files larger than this are not searched.
pub(super) const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Matching lines longer than this (in bytes) are cut.
const MAX_LINE_BYTES: usize = 400;

/// `grep`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GrepInput {
    /// Regular expression to search for.
    #[schemars(length(min = 1))]
    pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root).
    #[serde(default = "super::workspace_root")]
    path: String,
    // One line: a doc comment's line breaks would reach the model.
    /// Only search files whose name matches this glob, e.g. `*.rs` or `*.{yaml,yml}`; a glob containing `/` is matched against the path relative to `path`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    glob: Option<String>,
    /// Match letters regardless of case.
    #[serde(default)]
    case_insensitive: bool,
    /// Stop after this many matching lines.
    #[serde(default = "default_max_matches")]
    #[schemars(range(min = 1))]
    max_matches: usize,
}

fn default_max_matches() -> usize {
    DEFAULT_MAX_MATCHES
}

/// Searches file contents inside the workspace.
#[derive(Debug)]
pub struct Grep {
    spec: ToolSpec,
}

impl Grep {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "grep".to_owned(),
                description: "Search text files in the workspace for lines matching a regular \
                    expression (Rust regex syntax). Returns one `file:line: text` line per match, \
                    with file paths relative to the workspace root. Binary files, files over \
                    8 MiB, `.git` and `.keel` are skipped; symbolic links are not followed."
                    .to_owned(),
                parameters: input::schema_of::<GrepInput>(),
            },
        }
    }
}

impl Default for Grep {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = path_issues(ctx, args, "path", Some("."), Access::Read);
        if let Some(pattern) = args.get("pattern").and_then(Value::as_str)
            && let Err(e) = Regex::new(pattern)
        {
            issues.push(arg_issue(
                "pattern",
                "a regular expression (Rust regex syntax)",
                pattern,
                format!("invalid `pattern`: {e}"),
            ));
        }
        if let Some(glob) = args.get("glob").and_then(Value::as_str)
            && let Err(ToolError::InvalidArguments(message)) = FileFilter::new(glob)
        {
            issues.push(arg_issue("glob", "a glob such as `*.rs`", glob, message));
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: GrepInput = input::parse(args)?;
        let requested = input.path;
        let max_matches = input.max_matches.max(1);
        let regex = RegexBuilder::new(&input.pattern)
            .case_insensitive(input.case_insensitive)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("invalid `pattern`: {e}")))?;
        let filter = input.glob.as_deref().map(FileFilter::new).transpose()?;
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let target = paths::resolve(&root, &requested, Access::Read)?;
        let search = Search {
            root,
            regex,
            filter,
            max_matches,
            budget: content_budget(ctx.max_output_bytes),
        };
        let text = run_blocking(move |cancelled| Ok(search.run(&target, cancelled))).await?;
        Ok(ToolOutput::text(text))
    }
}

/// The optional file filter.
struct FileFilter {
    matcher: GlobMatcher,
    /// Whether the glob is matched against the relative path rather than the file name.
    whole_path: bool,
}

impl FileFilter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("invalid `glob`: {e}")))?
            .compile_matcher();
        Ok(Self {
            matcher,
            whole_path: glob.contains('/'),
        })
    }

    fn accepts(&self, base: &Path, file: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(paths::display(base, file))
        } else {
            file.file_name().is_some_and(|n| self.matcher.is_match(n))
        }
    }
}

struct Search {
    root: std::path::PathBuf,
    regex: Regex,
    filter: Option<FileFilter>,
    max_matches: usize,
    budget: usize,
}

impl Search {
    fn run(&self, target: &Path, cancelled: &AtomicBool) -> String {
        let mut lines = BoundedLines::new(self.budget);
        let mut matches = 0usize;
        let mut note = None;
        if target.is_file() {
            // A file named explicitly is searched whatever the glob says.
            self.search_file(target, &mut lines, &mut matches, &mut note);
        } else {
            let walk = WalkDir::new(target)
                .follow_links(false)
                .sort_by_file_name()
                .into_iter()
                .filter_entry(|e| !is_skipped(e));
            for entry in walk.flatten() {
                if cancelled.load(Ordering::Relaxed) || note.is_some() {
                    break;
                }
                // Symlinks have their own file type here and are never followed.
                if !entry.file_type().is_file() {
                    continue;
                }
                if self
                    .filter
                    .as_ref()
                    .is_some_and(|f| !f.accepts(target, entry.path()))
                {
                    continue;
                }
                self.search_file(entry.path(), &mut lines, &mut matches, &mut note);
            }
        }
        if matches == 0 && note.is_none() {
            return "no matches".to_owned();
        }
        lines.finish(note)
    }

    fn search_file(
        &self,
        file: &Path,
        lines: &mut BoundedLines,
        matches: &mut usize,
        note: &mut Option<String>,
    ) {
        let Some(text) = read_text(file) else {
            return;
        };
        let shown = paths::display(&self.root, file);
        for (index, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            if *matches == self.max_matches {
                *note = Some(format!(
                    "[stopped after {} matches; narrow the pattern, path or glob]",
                    self.max_matches
                ));
                return;
            }
            let line = line.trim_end_matches('\r');
            let clipped = clip(line, MAX_LINE_BYTES);
            let ellipsis = if clipped.len() < line.len() {
                "…"
            } else {
                ""
            };
            if !lines.push(&format!("{shown}:{}: {clipped}{ellipsis}", index + 1)) {
                *note = Some(format!(
                    "[output truncated after {matches} matches; narrow the pattern, path or glob]"
                ));
                return;
            }
            *matches += 1;
        }
    }
}

/// The file's text, or `None` when it is too large, unreadable or binary.
fn read_text(file: &Path) -> Option<String> {
    let metadata = file.metadata().ok()?;
    if metadata.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(file).ok()?;
    if looks_binary(&bytes) {
        return None;
    }
    String::from_utf8(bytes).ok()
}
