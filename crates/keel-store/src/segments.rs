//! The default JSONL mirror: append-only *segment* files shared by every run,
//! `.keel/log/00000001.jsonl`, `00000002.jsonl`, … — each committed group of events is one
//! `write` of its lines, in commit order, to the newest segment; a segment past its size limit
//! (64 MiB) is followed by the next. No file or folder is created per run, so the hot path
//! costs no inode; `tail -F .keel/log/*.jsonl` follows everything, and `keel runs export ID`
//! or `keel runs events --follow ID` give one run's JSONL from the store.
//!
//! The mirror and the store never disagree: lines are written only after their commit, so a
//! crash leaves the newest segment *behind* (maybe with a torn last line). The first process
//! to open the log while no other process has it open (an exclusive lock on `.keel/log/.lock`,
//! held shared afterwards) repairs it: it cuts a torn tail and appends, in commit order, the
//! events the store committed after the last mirrored one (or, when that one's run was pruned
//! since, after the newest mirrored event still stored). A line that does not parse (other
//! than a torn tail) is never rewritten. Several processes on one workspace append whole
//! lines to the same segment (`O_APPEND`, one `write` per group), interleaved.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use keel_types::{Event, RequestId, StoreError};

use crate::mirror::io_error;

/// A segment is closed once it holds this much.
pub const SEGMENT_BYTES: u64 = 64 << 20;

/// The folder of the segments inside `.keel`.
pub const LOG_DIR: &str = "log";

/// How the SQLite store mirrors its committed events as JSONL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MirrorLayout {
    /// Append-only segments shared by every run, `.keel/log/*.jsonl` (the default: no file
    /// per run).
    #[default]
    Segments,
    /// One file per run, `.keel/runs/<requestId>/events.jsonl` (a folder and a file created
    /// for each run; hooks get it as `transcript_path`).
    PerRun,
}

/// Reads the lines the store committed after event `(run, seq)` (after nothing: none), in
/// commit order; `None` when that event is no longer stored (pruned), so the gap is unknown.
pub(crate) type FetchAfter<'a> =
    dyn FnMut(&RequestId, u64) -> Result<Option<Vec<String>>, StoreError> + 'a;

/// The open log: the newest segment, appended to.
#[derive(Debug)]
pub(crate) struct Segments {
    dir: PathBuf,
    file: File,
    path: PathBuf,
    size: u64,
    limit: u64,
    /// Held shared while the log is open, so a process that starts meanwhile does not repair
    /// it under our feet.
    _lock: File,
}

/// `00000042.jsonl`.
fn segment_name(index: u64) -> String {
    format!("{index:08}.jsonl")
}

/// The segments in `dir`, oldest first, with their numbers.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(io_error(dir, &e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, &e))?;
        let name = entry.file_name();
        let Some(index) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        found.push((index, entry.path()));
    }
    found.sort();
    Ok(found)
}

impl Segments {
    /// Opens the log in `dir` (created if missing), repairing it when no other process has it
    /// open: a torn tail is cut and what the store committed after the last mirrored event is
    /// appended. A log with no line yet starts at the next commit.
    pub(crate) fn open(
        dir: &Path,
        limit: u64,
        fetch: &mut FetchAfter<'_>,
    ) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
        let lock_path = dir.join(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io_error(&lock_path, &e))?;
        let alone = lock.try_lock().is_ok();
        let segments = list(dir)?;
        let path = match segments.last() {
            Some((_, path)) => path.clone(),
            None => dir.join(segment_name(1)),
        };
        let mut file = open_append(&path)?;
        if alone && let Err(error) = repair(&segments, &path, &mut file, fetch) {
            // The store has every event; a log that cannot be repaired is left as it is (a
            // damaged line is never rewritten) and written on after its end.
            tracing::warn!(path = %path.display(), %error, "The event log was not repaired; the store keeps every event.");
        }
        if alone {
            // Downgrade: others may open the log now, but not repair it while we write.
            let _ = lock.unlock();
        }
        lock.lock_shared().map_err(|e| io_error(&lock_path, &e))?;
        let size = file.metadata().map_err(|e| io_error(&path, &e))?.len();
        Ok(Self {
            dir: dir.to_path_buf(),
            file,
            path,
            size,
            limit: limit.max(1),
            _lock: lock,
        })
    }

    /// The segment being written.
    pub(crate) fn current(&self) -> &Path {
        &self.path
    }

    /// Appends whole lines (newline-terminated) with one `write`, then moves to a new segment
    /// when this one is full.
    pub(crate) fn append(&mut self, lines: &[u8]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(lines)
            .map_err(|e| io_error(&self.path, &e))?;
        self.size += lines.len() as u64;
        if self.size >= self.limit {
            self.rotate()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), StoreError> {
        // Another process may have rotated already: continue after the newest segment.
        let newest = list(&self.dir)?.last().map_or(0, |(index, _)| *index);
        let path = self.dir.join(segment_name(newest + 1));
        self.file = open_append(&path)?;
        self.size = self.file.metadata().map_err(|e| io_error(&path, &e))?.len();
        self.path = path;
        Ok(())
    }
}

fn open_append(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| io_error(path, &e))
}

/// Cuts a torn tail of the newest segment and appends what the store committed after the last
/// whole line of the log (looking back through older segments when the newest has none).
fn repair(
    segments: &[(u64, PathBuf)],
    newest: &Path,
    file: &mut File,
    fetch: &mut FetchAfter<'_>,
) -> Result<(), StoreError> {
    let (whole, last) = tail(newest, file)?;
    let len = file.metadata().map_err(|e| io_error(newest, &e))?.len();
    if whole < len {
        file.set_len(whole).map_err(|e| io_error(newest, &e))?;
        tracing::warn!(path = %newest.display(), cut = len - whole, "Cut a torn line at the end of the event log.");
    }
    let mut last = last;
    for (_, older) in segments.iter().rev().skip(1) {
        if last.is_some() {
            break;
        }
        let mut older_file = File::open(older).map_err(|e| io_error(older, &e))?;
        last = tail(older, &mut older_file)?.1;
    }
    let Some(last) = last else {
        return Ok(());
    };
    let event: Event = serde_json::from_str(&last).map_err(|e| StoreError::Corrupt {
        location: newest.display().to_string(),
        message: format!("the last line of the event log does not parse: {e}"),
    })?;
    let mut found = fetch(&event.request_id, event.seq)?;
    if found.is_none() {
        // The last logged event was pruned since: what follows the newest logged event that is
        // still stored was not logged (everything logged after it has been pruned too).
        found = walk_back(segments, fetch)?;
    }
    match found {
        Some(missing) if !missing.is_empty() => {
            let mut buf = Vec::new();
            for line in &missing {
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
            }
            file.write_all(&buf).map_err(|e| io_error(newest, &e))?;
            tracing::info!(path = %newest.display(), added = missing.len(), "Event log repaired from the store.");
        }
        Some(_) => {}
        None => tracing::warn!(
            path = %newest.display(),
            "No recent event of the event log is still in the store (pruned); events committed after them and not mirrored before a crash stay only in the store."
        ),
    }
    Ok(())
}

/// How many lines [`walk_back`] looks at before it gives up.
const WALK_BACK_LINES: usize = 100_000;

/// Looks back through the log, newest line first, for an event that is still stored, and
/// returns what the store committed after it; `None` when none of the last
/// [`WALK_BACK_LINES`] lines is.
fn walk_back(
    segments: &[(u64, PathBuf)],
    fetch: &mut FetchAfter<'_>,
) -> Result<Option<Vec<String>>, StoreError> {
    let mut looked = 0;
    for (_, path) in segments.iter().rev() {
        let text = fs::read(path).map_err(|e| io_error(path, &e))?;
        // Whole lines only (a torn end of the newest segment was cut already).
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in text[..whole].split(|b| *b == b'\n').rev() {
            if line.is_empty() {
                continue;
            }
            looked += 1;
            if looked > WALK_BACK_LINES {
                return Ok(None);
            }
            // A line that does not parse is left alone and looked past.
            let Ok(event) = serde_json::from_slice::<Event>(line) else {
                continue;
            };
            if let Some(missing) = fetch(&event.request_id, event.seq)? {
                return Ok(Some(missing));
            }
        }
    }
    Ok(None)
}

/// The length of `file` up to its last newline, and its last whole line (if any). Reads
/// backwards in growing chunks until it has the last whole line.
fn tail(path: &Path, file: &mut File) -> Result<(u64, Option<String>), StoreError> {
    let len = file.metadata().map_err(|e| io_error(path, &e))?.len();
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = 64 * 1024u64;
    loop {
        let from = start.saturating_sub(chunk);
        let mut piece = vec![0; (start - from) as usize];
        file.seek(SeekFrom::Start(from))
            .map_err(|e| io_error(path, &e))?;
        file.read_exact(&mut piece)
            .map_err(|e| io_error(path, &e))?;
        piece.extend_from_slice(&buf);
        buf = piece;
        start = from;
        chunk *= 2;
        let newlines: Vec<usize> = buf
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i)
            .take(2)
            .collect();
        match (newlines.first(), newlines.get(1)) {
            // The last whole line lies between the two newlines.
            (Some(&last), Some(&previous)) => {
                let line = String::from_utf8_lossy(&buf[previous + 1..last]).into_owned();
                return Ok((start + last as u64 + 1, Some(line)));
            }
            // One newline: the line starts at the file's start, or further back.
            (Some(&last), None) if start == 0 => {
                let line = String::from_utf8_lossy(&buf[..last]).into_owned();
                return Ok((last as u64 + 1, (!line.is_empty()).then_some(line)));
            }
            (None, _) if start == 0 => return Ok((0, None)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_segment_is_followed_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let mut none = |_: &RequestId, _: u64| Ok(Some(Vec::new()));
        let mut log = Segments::open(dir.path(), 10, &mut none).unwrap();
        log.append(b"{\"n\":1}\n").unwrap();
        assert!(log.current().ends_with("00000001.jsonl"));
        log.append(b"{\"n\":2}\n").unwrap();
        assert!(
            log.current().ends_with("00000002.jsonl"),
            "{:?}",
            log.current()
        );
        log.append(b"{\"n\":3}\n").unwrap();
        let names: Vec<u64> = list(dir.path())
            .unwrap()
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(names, [1, 2]);
        assert_eq!(
            fs::read_to_string(dir.path().join("00000001.jsonl")).unwrap(),
            "{\"n\":1}\n{\"n\":2}\n"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("00000002.jsonl")).unwrap(),
            "{\"n\":3}\n"
        );
    }

    #[test]
    fn the_tail_is_the_last_whole_line_and_a_torn_end_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000001.jsonl");
        fs::write(&path, "{\"a\":1}\n{\"b\":2}\n{\"c\":").unwrap();
        let mut file = File::open(&path).unwrap();
        let (whole, last) = tail(&path, &mut file).unwrap();
        assert_eq!(whole, 16);
        assert_eq!(last.as_deref(), Some("{\"b\":2}"));
        fs::write(&path, "").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(tail(&path, &mut file).unwrap(), (0, None));
        fs::write(&path, "only\n").unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(tail(&path, &mut file).unwrap(), (5, Some("only".into())));
        let long = "x".repeat(200_000);
        fs::write(&path, format!("first\n{long}\ntorn")).unwrap();
        let mut file = File::open(&path).unwrap();
        assert_eq!(
            tail(&path, &mut file).unwrap(),
            (6 + 200_001, Some(long.clone()))
        );
    }
}
