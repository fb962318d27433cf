//! `edit_file`: replace an exact piece of text in a file, atomically.
//!
//! `old_string` must appear exactly once (or, with `replace_all`, at least once); otherwise
//! the call fails with an error that says what to do — the text was not found, or it appears
//! several times and needs more context. The new content is written like `write_file` writes
//! (temporary file, flush, rename), so the file is never half-edited. Paths outside the
//! workspace and inside `.keel/` are refused, and so is a file the run has not read (read
//! before edit, see [`super`]). When the request's caller offers its own view of the files
//! (`ToolContext::files`, an editor's buffers), the text is read from and written back there.

use std::path::Path;

use async_trait::async_trait;
use keel_types::{Issue, TextFiles, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::write_file::write_atomically;
use super::{
    MAX_WRITE_BYTES, arg_issue, ensure_seen, io_error, looks_binary, mark_seen, path_issues,
    run_blocking, size_issue,
};
use crate::input;
use crate::paths::{self, Access};

/// `edit_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditFileInput {
    /// File path relative to the workspace root.
    #[schemars(length(min = 1))]
    path: String,
    /// The exact text to replace.
    #[schemars(length(min = 1))]
    old_string: String,
    /// The text to put in its place (may be empty to delete).
    new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    replace_all: bool,
}

/// Edits a text file inside the workspace.
#[derive(Debug)]
pub struct EditFile {
    spec: ToolSpec,
    /// Refuse to edit a file the run has not seen.
    read_check: bool,
}

impl EditFile {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "edit_file".to_owned(),
                description: "Edit a text file in the workspace by replacing an exact piece of \
                    text. `old_string` must match the file's text exactly (whitespace and \
                    indentation included) and appear exactly once; include enough surrounding \
                    lines to make it unique, or set `replace_all` to replace every occurrence. \
                    Read the file first. Files under `.keel/` cannot be edited."
                    .to_owned(),
                parameters: input::schema_of::<EditFileInput>(),
            },
            read_check: true,
        }
    }

    /// Whether the file must have been read by the run before it is edited (default yes).
    pub fn with_read_check(mut self, required: bool) -> Self {
        self.read_check = required;
        self
    }
}

impl Default for EditFile {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = path_issues(ctx, args, "path", None, Access::Write);
        issues.extend(size_issue(args, "old_string", MAX_WRITE_BYTES));
        issues.extend(size_issue(args, "new_string", MAX_WRITE_BYTES));
        if let (Some(old), Some(new)) = (
            args.get("old_string").and_then(Value::as_str),
            args.get("new_string").and_then(Value::as_str),
        ) && old == new
        {
            issues.push(arg_issue(
                "new_string",
                "text different from `old_string`",
                new,
                "`new_string` is the same as `old_string`; nothing would change".to_owned(),
            ));
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: EditFileInput = input::parse(args)?;
        let requested = input.path;
        let edit = Edit {
            old: input.old_string,
            new: input.new_string,
            replace_all: input.replace_all,
        };
        if edit.old.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`old_string` must not be empty".to_owned(),
            ));
        }
        if edit.old == edit.new {
            return Err(ToolError::InvalidArguments(
                "`new_string` is the same as `old_string`; nothing would change".to_owned(),
            ));
        }
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let path = paths::resolve(&root, &requested, Access::Write)?;
        let shown = paths::display(&root, &path);
        ensure_seen(ctx, self.read_check, &path, &shown)?;
        let replaced = match &ctx.files {
            Some(files) => edit.through(files.as_ref(), &path, &shown).await?,
            None => None,
        };
        let replaced = match replaced {
            Some(replaced) => replaced,
            None => {
                let (path, shown) = (path.clone(), shown.clone());
                run_blocking(move |_| edit.apply(&path, &shown)).await?
            }
        };
        mark_seen(ctx, &path);
        Ok(ToolOutput::text(format!(
            "replaced {replaced} occurrence{} in {shown}",
            if replaced == 1 { "" } else { "s" }
        )))
    }
}

/// One replacement to make.
struct Edit {
    old: String,
    new: String,
    replace_all: bool,
}

impl Edit {
    /// Replaces the text in the file at `path` (shown to the model as `shown`) and returns
    /// how many occurrences were replaced.
    fn apply(&self, path: &Path, shown: &str) -> Result<usize, ToolError> {
        let metadata = path.metadata().map_err(|e| io_error(shown, &e))?;
        if metadata.is_dir() {
            return Err(ToolError::Io(format!("`{shown}` is a directory")));
        }
        if metadata.len() > MAX_WRITE_BYTES as u64 {
            return Err(ToolError::Io(format!(
                "`{shown}` is {} bytes, over the {MAX_WRITE_BYTES}-byte limit of edit_file",
                metadata.len()
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| io_error(shown, &e))?;
        let not_text = || ToolError::Io(format!("`{shown}` is a binary file and cannot be edited"));
        if looks_binary(&bytes) {
            return Err(not_text());
        }
        let text = String::from_utf8(bytes).map_err(|_| not_text())?;
        let (edited, count) = self.replace(&text, shown)?;
        write_atomically(path, shown, edited.as_bytes(), false)?;
        Ok(count)
    }

    /// [`Self::apply`] through the caller's view of the files: `None` when it takes neither
    /// the read nor the write (the disk is used then); a file it reads but does not write is
    /// written to disk.
    async fn through(
        &self,
        files: &dyn TextFiles,
        path: &Path,
        shown: &str,
    ) -> Result<Option<usize>, ToolError> {
        let Some(text) = files.read(path).await else {
            return Ok(None);
        };
        let text = text?;
        if text.len() > MAX_WRITE_BYTES {
            return Err(ToolError::Io(format!(
                "`{shown}` is {} bytes, over the {MAX_WRITE_BYTES}-byte limit of edit_file",
                text.len()
            )));
        }
        if looks_binary(text.as_bytes()) {
            return Err(ToolError::Io(format!(
                "`{shown}` is a binary file and cannot be edited"
            )));
        }
        let (edited, count) = self.replace(&text, shown)?;
        match files.write(path, &edited).await {
            Some(written) => written?,
            None => {
                let (path, shown) = (path.to_path_buf(), shown.to_owned());
                run_blocking(move |_| write_atomically(&path, &shown, edited.as_bytes(), false))
                    .await?;
            }
        }
        Ok(Some(count))
    }

    /// `text` with the replacement made, and how many occurrences were replaced.
    fn replace(&self, text: &str, shown: &str) -> Result<(String, usize), ToolError> {
        let count = text.matches(self.old.as_str()).count();
        match count {
            0 => {
                return Err(ToolError::Failed(format!(
                    "`old_string` was not found in {shown}; read the file and copy the text \
                     exactly, including whitespace and indentation"
                )));
            }
            1 => {}
            n if !self.replace_all => {
                return Err(ToolError::Failed(format!(
                    "`old_string` appears {n} times in {shown}; give more context to make it \
                     unique, or set replace_all to replace every occurrence"
                )));
            }
            _ => {}
        }
        let edited = text.replace(self.old.as_str(), &self.new);
        if edited.len() > MAX_WRITE_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "the edited `{shown}` would be {} bytes, over the limit of {MAX_WRITE_BYTES} bytes",
                edited.len()
            )));
        }
        Ok((edited, count))
    }
}
