//! `read_file`: a text file, or a window of its lines, under the output cap.
//!
//! The file is streamed line by line, so a window near the start of a huge file is cheap and
//! no line is held in memory beyond the cap. A file of at most 32 KiB is read on the calling
//! task (microseconds from the page cache, less than a trip through the blocking pool); a
//! larger one on the blocking pool. Binary files (a NUL byte, or bytes that are not UTF-8) are
//! refused with a clear error rather than shown as noise. A file read (even a window of it)
//! counts as seen by the run, so `write_file` and `edit_file` may change it. When the
//! request's caller offers its own view of the files (`ToolContext::files`, an editor's
//! buffers), the text comes from there, windowed the same way.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{content_budget, io_error, looks_binary, mark_seen, path_issues, run_blocking};
use crate::input;
use crate::paths::{self, Access};

/// `read_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadFileInput {
    /// File path relative to the workspace root.
    #[schemars(length(min = 1))]
    path: String,
    /// First line to return, counting from 1 (default 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// Maximum number of lines to return (default: all that fit).
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

/// Reads a text file inside the workspace.
#[derive(Debug)]
pub struct ReadFile {
    spec: ToolSpec,
}

impl ReadFile {
    /// The tool with its schema.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "read_file".to_owned(),
                description: "Read a UTF-8 text file in the workspace. Returns the file's text \
                    as is; use `offset` and `limit` to read a window of lines of a long file. \
                    Output over the size limit is cut at a line boundary with a note saying \
                    where to continue. Binary files are refused."
                    .to_owned(),
                parameters: input::schema_of::<ReadFileInput>(),
            },
        }
    }
}

impl Default for ReadFile {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        path_issues(ctx, args, "path", None, Access::Read)
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: ReadFileInput = input::parse(args)?;
        let requested = input.path;
        let offset = input.offset.unwrap_or(1).max(1);
        let limit = input.limit.unwrap_or(usize::MAX).max(1);
        let path = paths::resolve(&ctx.workspace_root, &requested, Access::Read)?;
        let window = Window {
            offset,
            limit,
            budget: content_budget(ctx.max_output_bytes),
        };
        // The caller's view of the file (an editor's buffer), windowed the same way.
        if let Some(files) = &ctx.files
            && let Some(text) = files.read(&path).await
        {
            let text = text?;
            let text = read_window(io::Cursor::new(text.as_bytes()), &requested, window)?;
            mark_seen(ctx, &path);
            return Ok(ToolOutput::text(text));
        }
        let metadata = path.metadata().map_err(|e| io_error(&requested, &e))?;
        if metadata.is_dir() {
            return Err(ToolError::Io(format!(
                "`{requested}` is a directory; use list_dir"
            )));
        }
        // A small regular file is read here, like the path checks above: handing it to the
        // blocking pool would cost more than reading it (two thread wake-ups).
        let text = if metadata.is_file() && metadata.len() <= INLINE_READ {
            read_file_window(&path, &requested, window)?
        } else {
            let read = path.clone();
            run_blocking(move |_| read_file_window(&read, &requested, window)).await?
        };
        mark_seen(ctx, &path);
        Ok(ToolOutput::text(text))
    }
}

/// Files up to this size are read on the calling task; larger ones on the blocking pool.
const INLINE_READ: u64 = 32 * 1024;

/// Which lines to return, and how many bytes of them at most.
#[derive(Debug, Clone, Copy)]
struct Window {
    offset: usize,
    limit: usize,
    budget: usize,
}

/// Why reading stopped before the end of the file.
enum Stop {
    /// `limit` lines were shown and more follow.
    Limit,
    /// The next line would not fit the byte budget.
    Size,
    /// The first line of the window alone exceeds the budget and was cut.
    LongLine,
}

/// Reads `window` of the file at `path` (not a directory: the caller checked).
fn read_file_window(path: &Path, requested: &str, window: Window) -> Result<String, ToolError> {
    let file = File::open(path).map_err(|e| io_error(requested, &e))?;
    read_window(BufReader::new(file), requested, window)
}

/// Reads `window` of the text `reader` gives (the file `requested`).
fn read_window<R: BufRead>(
    mut reader: R,
    requested: &str,
    window: Window,
) -> Result<String, ToolError> {
    let head = reader.fill_buf().map_err(|e| io_error(requested, &e))?;
    if looks_binary(head) {
        return Err(binary(requested));
    }

    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    let mut stop = None;
    let line_cap = window.budget.saturating_add(1);
    while let Some(complete) =
        read_line_capped(&mut reader, &mut line, line_cap).map_err(|e| io_error(requested, &e))?
    {
        number += 1;
        if line.contains(&0) {
            return Err(binary(requested));
        }
        if number < window.offset {
            continue;
        }
        if shown == window.limit {
            stop = Some(Stop::Limit);
            break;
        }
        let text = utf8_line(&line, complete).ok_or_else(|| binary(requested))?;
        // A line cut by `line_cap` is over the budget even when its kept part would fit.
        if !complete || out.len() + text.len() > window.budget {
            if shown == 0 {
                out.push_str(super::clip(text, window.budget));
                shown = 1;
                stop = Some(Stop::LongLine);
            } else {
                stop = Some(Stop::Size);
            }
            break;
        }
        out.push_str(text);
        shown += 1;
    }

    if shown == 0 && window.offset > 1 {
        return Err(ToolError::InvalidArguments(format!(
            "offset {} is past the end of `{requested}`, which has {number} lines",
            window.offset
        )));
    }
    if let Some(stop) = stop {
        let first = window.offset;
        let last = window.offset + shown - 1;
        let note = match stop {
            Stop::Limit => format!(
                "[showing lines {first}-{last}; the file continues, use offset={} to read more]",
                last + 1
            ),
            Stop::Size => format!(
                "[output truncated at {} bytes after line {last}; use offset={} to read more]",
                window.budget,
                last + 1
            ),
            Stop::LongLine => format!(
                "[line {first} is longer than {} bytes and was cut]",
                window.budget
            ),
        };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&note);
    }
    Ok(out)
}

/// Reads one line (with its `\n`) into `buf`, keeping at most `cap` bytes of it but always
/// consuming the whole line. `None` at end of file; otherwise whether the line fit in `cap`.
fn read_line_capped<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<bool>> {
    buf.clear();
    let mut any = false;
    let mut complete = true;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(any.then_some(complete));
        }
        any = true;
        let (take, end_of_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        if take > room {
            complete = false;
        }
        buf.extend_from_slice(chunk.get(..take.min(room)).unwrap_or_default());
        reader.consume(take);
        if end_of_line {
            return Ok(Some(complete));
        }
    }
}

/// The line as text; a line cut short may end in the middle of a character, which is dropped.
fn utf8_line(bytes: &[u8], complete: bool) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) if !complete && e.error_len().is_none() => {
            std::str::from_utf8(bytes.get(..e.valid_up_to())?).ok()
        }
        Err(_) => None,
    }
}

fn binary(requested: &str) -> ToolError {
    ToolError::Io(format!(
        "`{requested}` is a binary file (not UTF-8 text) and cannot be read as text"
    ))
}
