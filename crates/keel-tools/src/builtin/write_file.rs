//! `write_file`: create or replace a text file, atomically.
//!
//! The content goes to a temporary file in the target's directory, is flushed to disk, then
//! renamed over the target, so readers see either the old file or the new one, never half of
//! it. A replaced file keeps its permissions. Paths outside the workspace and inside `.keel/`
//! are refused by [`crate::paths`]. An existing file the run has not seen is refused (read
//! before edit, see [`super`]); a file the run writes counts as seen from then on. When the
//! request's caller offers its own view of the files (`ToolContext::files`, an editor's
//! buffers), the content goes there instead of the disk.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    MAX_WRITE_BYTES, ensure_seen, io_error, mark_seen, path_issues, run_blocking, size_issue,
};
use crate::input;
use crate::paths::{self, Access};

/// `write_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WriteFileInput {
    /// File path relative to the workspace root.
    #[schemars(length(min = 1))]
    path: String,
    /// The complete new content of the file.
    content: String,
    /// Create missing parent directories.
    #[serde(default = "super::yes")]
    create_dirs: bool,
}

/// Writes a file inside the workspace.
#[derive(Debug)]
pub struct WriteFile {
    spec: ToolSpec,
    /// Refuse to replace an existing file the run has not seen.
    read_check: bool,
}

impl WriteFile {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "write_file".to_owned(),
                description: "Create or replace a text file in the workspace with the given \
                    content (the whole file). Missing parent directories are created unless \
                    `createDirs` is false. An existing file must be read first. Files under \
                    `.keel/` cannot be written."
                    .to_owned(),
                parameters: input::schema_of::<WriteFileInput>(),
            },
            read_check: true,
        }
    }

    /// Whether an existing file must have been read by the run before it is replaced
    /// (default yes).
    pub fn with_read_check(mut self, required: bool) -> Self {
        self.read_check = required;
        self
    }
}

impl Default for WriteFile {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = path_issues(ctx, args, "path", None, Access::Write);
        issues.extend(size_issue(args, "content", MAX_WRITE_BYTES));
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let WriteFileInput {
            path: requested,
            content,
            create_dirs,
        } = input::parse(args)?;
        if content.len() > MAX_WRITE_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "`content` is {} bytes, over the limit of {MAX_WRITE_BYTES} bytes",
                content.len()
            )));
        }
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let path = paths::resolve(&root, &requested, Access::Write)?;
        let shown = paths::display(&root, &path);
        ensure_seen(ctx, self.read_check, &path, &shown)?;
        let bytes = content.len();
        // The caller's view of the file (an editor's buffer), else the disk.
        let written = match &ctx.files {
            Some(files) => files.write(&path, &content).await,
            None => None,
        };
        match written {
            Some(written) => written?,
            None => {
                let target = path.clone();
                run_blocking(move |_| {
                    write_atomically(&target, &requested, content.as_bytes(), create_dirs)
                })
                .await?;
            }
        }
        mark_seen(ctx, &path);
        Ok(ToolOutput::text(format!("wrote {bytes} bytes to {shown}")))
    }
}

pub(super) fn write_atomically(
    path: &Path,
    requested: &str,
    content: &[u8],
    create_dirs: bool,
) -> Result<(), ToolError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ToolError::InvalidArguments(format!(
            "`{requested}` does not name a file"
        )));
    };
    match parent.metadata() {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ToolError::Io(format!(
                "the parent of `{requested}` is not a directory"
            )));
        }
        Err(_) if create_dirs => {
            fs::create_dir_all(parent).map_err(|e| {
                ToolError::Io(format!(
                    "cannot create the directories for `{requested}`: {e}"
                ))
            })?;
        }
        Err(_) => {
            return Err(ToolError::Io(format!(
                "the directory of `{requested}` does not exist (set createDirs to create it)"
            )));
        }
    }
    let existing = match path.metadata() {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::Io(format!("`{requested}` is a directory")));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(_) => None,
    };

    let temp = temp_path(parent, &name.to_string_lossy());
    let written = write_temp(&temp, content, existing)
        .and_then(|()| fs::rename(&temp, path))
        .map_err(|e| io_error(requested, &e));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

fn write_temp(
    temp: &Path,
    content: &[u8],
    permissions: Option<fs::Permissions>,
) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(content)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()
}

/// A fresh hidden name next to the target.
fn temp_path(dir: &Path, name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    dir.join(format!(
        ".{name}.{}.{nanos}.{count}.keel-tmp",
        std::process::id()
    ))
}
