//! The JSONL form of a run's log: `<runs>/<requestId>/events.jsonl`, one event per line, for
//! `tail -f` and export: [`crate::SqliteStore`] mirrors what it committed in this form.
//!
//! The format is append-only and every batch of lines is written with one `write`, so after a
//! crash the file is a run of whole lines followed, at worst, by a *torn tail*: bytes after the
//! last newline. A torn tail is expected damage: reads skip it and writers cut it before
//! appending. Any other line that does not parse is *damage* — reported as
//! [`StoreError::Corrupt`] naming `file:line` — and the file is then never rewritten, so a
//! person can look at it.
//!
//! Start with [`read_events_file`]; `MirrorFiles` (crate-private) keeps the SQLite store's
//! open mirrors and repairs a mirror that fell behind its store.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use keel_types::{Event, RequestId, StoreError};

/// File name of the event log inside a run folder.
pub const EVENTS_FILE: &str = "events.jsonl";

/// How a run's JSONL mirror compares with the store (see [`crate::SqliteStore::verify_mirror`]).
///
/// A mirror that disagrees with the store in any other way — a damaged line, an event that
/// differs from the stored one, events the store does not have — is not a status but an error,
/// [`StoreError::Corrupt`] naming the first bad line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorStatus {
    /// The run has no mirror file of its own: its events are in the shared segments
    /// (`.keel/log/`), which are repaired as a whole when the store opens.
    Shared,
    /// The mirror holds exactly the store's events.
    InSync {
        /// Events in both.
        events: u64,
    },
    /// The mirror is a correct prefix of the store's log but lacks its newest events, or ends
    /// in a torn line: the process died between a commit and the mirror write (or the run is
    /// being written right now). `recover` and `claim` repair it by appending what is missing.
    Behind {
        /// Whole events in the mirror.
        mirrored: u64,
        /// Events in the store.
        stored: u64,
        /// Whether the mirror ends in a torn (partial) line.
        torn_tail: bool,
    },
}

/// One whole event line of a mirror, with its 1-based line number in the file.
#[derive(Debug)]
pub(crate) struct MirrorLine {
    pub line: usize,
    pub event: Event,
}

/// Everything a full read of a mirror found.
#[derive(Debug, Default)]
pub(crate) struct MirrorContents {
    pub lines: Vec<MirrorLine>,
    /// Length of the file up to and including its last newline.
    pub whole_len: u64,
    /// Whether bytes follow the last newline (a torn write).
    pub torn_tail: bool,
}

/// Reads an event log. A last line without its newline that does not parse is a torn write
/// and is skipped; any other bad line is corruption. A missing file is an empty log.
pub fn read_events_file(path: &Path) -> Result<Vec<Event>, StoreError> {
    Ok(read_mirror(path)?
        .lines
        .into_iter()
        .map(|line| line.event)
        .collect())
}

/// Reads a whole mirror, keeping line numbers, and locates a torn tail.
pub(crate) fn read_mirror(path: &Path) -> Result<MirrorContents, StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(MirrorContents::default());
        }
        Err(e) => return Err(io_error(path, &e)),
    };
    let mut reader = BufReader::new(file);
    let mut contents = MirrorContents::default();
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error(path, &e))?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.ends_with(b"\n");
        if !complete {
            // Bytes after the last newline: whatever they are, the write that made them was
            // cut short (a whole line always ends with its newline).
            tracing::warn!(path = %path.display(), line = number, "Skipping torn last line of event log.");
            contents.torn_tail = true;
            break;
        }
        contents.whole_len += read as u64;
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Event>(text) {
            Ok(event) => contents.lines.push(MirrorLine {
                line: number,
                event,
            }),
            Err(e) => {
                return Err(StoreError::Corrupt {
                    location: format!("{}:{number}", path.display()),
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(contents)
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// Cuts a torn last line (bytes after the final newline) so appends start on a fresh line.
/// Returns whether something was cut.
pub fn truncate_torn_tail(path: &Path) -> Result<bool, StoreError> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(path, &e)),
    };
    let tail = read_tail(&mut file, path)?;
    if tail.whole_len == tail.len {
        return Ok(false);
    }
    tracing::warn!(path = %path.display(), bytes = tail.len - tail.whole_len, "Truncating torn last line of event log.");
    file.set_len(tail.whole_len)
        .map_err(|e| io_error(path, &e))?;
    Ok(true)
}

/// The end of a mirror: its length, where its whole lines end, and its last whole line.
#[derive(Debug)]
struct Tail {
    len: u64,
    whole_len: u64,
    last_line: Option<Vec<u8>>,
}

/// Reads backwards from the end, a chunk at a time, until the last whole line is found. Cheap
/// for a long log: it touches only the end of the file.
fn read_tail(file: &mut File, path: &Path) -> Result<Tail, StoreError> {
    const CHUNK: u64 = 16 * 1024;
    let len = file.metadata().map_err(|e| io_error(path, &e))?.len();
    // Bytes read so far, from `start` to `len`.
    let mut buf: Vec<u8> = Vec::new();
    let mut start = len;
    let mut whole_len: Option<u64> = None;
    loop {
        if let Some(whole) = whole_len {
            // The last whole line ends at `whole`; find the newline before it.
            let end = usize::try_from(whole - start).unwrap_or(buf.len());
            let body = &buf[..end.saturating_sub(1)];
            let found = body.iter().rposition(|&b| b == b'\n');
            if found.is_some() || start == 0 {
                let from = found.map_or(0, |i| i + 1);
                let line = trim_line(&buf[from..end]).to_vec();
                return Ok(Tail {
                    len,
                    whole_len: whole,
                    last_line: (!line.is_empty()).then_some(line),
                });
            }
        } else if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            whole_len = Some(start + i as u64 + 1);
            continue;
        } else if start == 0 {
            return Ok(Tail {
                len,
                whole_len: 0,
                last_line: None,
            });
        }
        let next = start.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; usize::try_from(start - next).unwrap_or(0)];
        file.seek(SeekFrom::Start(next))
            .map_err(|e| io_error(path, &e))?;
        file.read_exact(&mut chunk)
            .map_err(|e| io_error(path, &e))?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
        start = next;
    }
}

/// A committed event ready for the mirror: its `seq`, id and JSON line (without newline).
#[derive(Debug, Clone)]
pub(crate) struct StoredLine {
    pub seq: u64,
    pub id: String,
    pub body: String,
}

/// Reads a run's committed events from the store: `(run, after_seq, up_to_seq)` → the events
/// with `after_seq < seq <= up_to_seq`, in order. `u64::MAX` means "to the end".
pub(crate) type FetchStored<'a> =
    dyn FnMut(&RequestId, u64, u64) -> Result<Vec<StoredLine>, StoreError> + 'a;

/// The SQLite store's mirrors: open append handles of active runs (a bounded map, least
/// recently used closed first), and the runs whose mirror is damaged and left alone.
///
/// Owned by the store's writer thread: every mirror write of this process goes through it, in
/// commit order.
#[derive(Debug)]
pub(crate) struct MirrorFiles {
    /// `false` when the store mirrors into shared segments instead: nothing is written here.
    enabled: bool,
    root: PathBuf,
    open: HashMap<RequestId, OpenMirror>,
    /// Runs whose mirror is damaged or disagrees with the store, with the reason. Their mirror
    /// is not written until a repair succeeds.
    damaged: HashMap<RequestId, String>,
    clock: u64,
    capacity: usize,
}

#[derive(Debug)]
struct OpenMirror {
    file: File,
    /// The last `seq` in the file.
    last_seq: u64,
    used: u64,
}

impl MirrorFiles {
    /// Mirrors under `root` (`<root>/<requestId>/events.jsonl`), at most `capacity` kept open.
    pub(crate) fn new(root: PathBuf, capacity: usize) -> Self {
        Self {
            enabled: true,
            root,
            open: HashMap::new(),
            damaged: HashMap::new(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// No per-run mirrors (the store writes segments): every operation does nothing.
    pub(crate) fn disabled(root: PathBuf) -> Self {
        Self {
            enabled: false,
            ..Self::new(root, 1)
        }
    }

    /// The mirror file of a run.
    pub(crate) fn path(&self, id: &RequestId) -> PathBuf {
        mirror_path(&self.root, id)
    }

    /// Creates the (empty) mirror of a new run and keeps it open.
    pub(crate) fn create(&mut self, id: &RequestId) -> Result<(), StoreError> {
        if !self.enabled {
            return Ok(());
        }
        let path = self.path(id);
        let file = open_for_append(&path)?;
        self.damaged.remove(id);
        self.insert(id.clone(), file, 0);
        Ok(())
    }

    /// Closes a run's mirror file (its log ended).
    pub(crate) fn close(&mut self, id: &RequestId) {
        self.open.remove(id);
    }

    /// Closes a run's mirror and forgets all about it (the run was deleted).
    pub(crate) fn forget(&mut self, id: &RequestId) {
        self.open.remove(id);
        self.damaged.remove(id);
    }

    /// Appends committed events `first_seq..` (the JSON lines in `lines`, newline-terminated)
    /// to a run's mirror with one `write`. When the mirror is not open, its end is checked first:
    /// a torn tail is cut and events it lacks before `first_seq` are fetched from the store.
    /// A damaged mirror is left untouched (and logged); the store keeps the truth.
    pub(crate) fn append(
        &mut self,
        id: &RequestId,
        first_seq: u64,
        last_seq: u64,
        lines: &[u8],
        fetch: &mut FetchStored<'_>,
    ) {
        if !self.enabled || self.damaged.contains_key(id) {
            return;
        }
        if let Err(error) = self.try_append(id, first_seq, last_seq, lines, fetch) {
            let path = self.path(id);
            tracing::warn!(request_id = %id, path = %path.display(), %error, "Mirror not written; the store has the events and a repair will add them.");
            self.open.remove(id);
            if matches!(error, StoreError::Corrupt { .. }) {
                self.damaged.insert(id.clone(), error.to_string());
            }
        }
    }

    fn try_append(
        &mut self,
        id: &RequestId,
        first_seq: u64,
        last_seq: u64,
        lines: &[u8],
        fetch: &mut FetchStored<'_>,
    ) -> Result<(), StoreError> {
        self.clock += 1;
        let clock = self.clock;
        let path = self.path(id);
        if let Some(open) = self.open.get_mut(id)
            && open.last_seq + 1 == first_seq
        {
            open.file
                .write_all(lines)
                .map_err(|e| io_error(&path, &e))?;
            open.last_seq = last_seq;
            open.used = clock;
            return Ok(());
        }
        // Not open (or out of step): look at the file's end and fill any gap from the store.
        self.open.remove(id);
        let (mut file, mirrored) = open_checked(&path, id, fetch)?;
        if mirrored >= first_seq {
            return Err(StoreError::Corrupt {
                location: path.display().to_string(),
                message: format!(
                    "the mirror already holds seq {mirrored}, but the store just committed seq {first_seq}"
                ),
            });
        }
        let mut buf = Vec::new();
        for line in fetch(id, mirrored, first_seq - 1)? {
            buf.extend_from_slice(line.body.as_bytes());
            buf.push(b'\n');
        }
        buf.extend_from_slice(lines);
        file.write_all(&buf).map_err(|e| io_error(&path, &e))?;
        self.insert(id.clone(), file, last_seq);
        Ok(())
    }

    /// Brings a run's mirror up to date with the store after a crash: reads the whole file
    /// (so damage anywhere is found), checks that every line is the stored event of its `seq`,
    /// cuts a torn tail and appends what is missing. A damaged mirror is reported as
    /// [`StoreError::Corrupt`] and not touched. Returns how many events were appended.
    pub(crate) fn repair(
        &mut self,
        id: &RequestId,
        fetch: &mut FetchStored<'_>,
    ) -> Result<u64, StoreError> {
        if !self.enabled {
            return Ok(0);
        }
        self.open.remove(id);
        let path = self.path(id);
        let result = repair_file(&path, id, fetch);
        match &result {
            Err(error @ StoreError::Corrupt { .. }) => {
                self.damaged.insert(id.clone(), error.to_string());
            }
            _ => {
                self.damaged.remove(id);
            }
        }
        result
    }

    fn insert(&mut self, id: RequestId, file: File, last_seq: u64) {
        if self.open.len() >= self.capacity && !self.open.contains_key(&id) {
            // Close the least recently used mirror. Linear, but only when the map is full.
            if let Some(oldest) = self
                .open
                .iter()
                .min_by_key(|(_, open)| open.used)
                .map(|(id, _)| id.clone())
            {
                self.open.remove(&oldest);
            }
        }
        self.open.insert(
            id,
            OpenMirror {
                file,
                last_seq,
                used: self.clock,
            },
        );
    }
}

/// `<root>/<requestId>/events.jsonl`.
pub(crate) fn mirror_path(root: &Path, id: &RequestId) -> PathBuf {
    root.join(id.as_str()).join(EVENTS_FILE)
}

/// Opens a mirror for appending, creating it and its folder if needed.
pub(crate) fn open_for_append(path: &Path) -> Result<File, StoreError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io_error(path, &e))
}

/// Opens a mirror that was not open, cuts a torn tail and returns the last `seq` it holds,
/// after checking that its last event is the stored event of that `seq`.
fn open_checked(
    path: &Path,
    id: &RequestId,
    fetch: &mut FetchStored<'_>,
) -> Result<(File, u64), StoreError> {
    let file = open_for_append(path)?;
    let mut reader = File::open(path).map_err(|e| io_error(path, &e))?;
    let tail = read_tail(&mut reader, path)?;
    let Some(last_line) = &tail.last_line else {
        cut_torn_tail(&file, path, &tail)?;
        return Ok((file, 0));
    };
    let Ok(last) = serde_json::from_slice::<Event>(last_line) else {
        // A full read names the damaged line (and would also find damage further up).
        read_mirror(path)?;
        return Err(StoreError::Corrupt {
            location: path.display().to_string(),
            message: "the last whole line is not an event".into(),
        });
    };
    check_same_as_stored(path, id, &last, fetch)?;
    cut_torn_tail(&file, path, &tail)?;
    Ok((file, last.seq))
}

fn cut_torn_tail(file: &File, path: &Path, tail: &Tail) -> Result<(), StoreError> {
    if tail.whole_len < tail.len {
        tracing::warn!(path = %path.display(), bytes = tail.len - tail.whole_len, "Truncating torn last line of event log.");
        file.set_len(tail.whole_len)
            .map_err(|e| io_error(path, &e))?;
    }
    Ok(())
}

/// Checks that a mirrored event is the store's event of the same `seq` (same run, same id).
fn check_same_as_stored(
    path: &Path,
    id: &RequestId,
    event: &Event,
    fetch: &mut FetchStored<'_>,
) -> Result<(), StoreError> {
    let stored = fetch(id, event.seq.saturating_sub(1), event.seq)?;
    let same = &event.request_id == id
        && stored
            .first()
            .is_some_and(|s| s.seq == event.seq && s.id == event.id.as_str());
    if same {
        Ok(())
    } else {
        Err(StoreError::Corrupt {
            location: path.display().to_string(),
            message: format!(
                "the mirror's last event (seq {}, {}) is not the stored event of that seq",
                event.seq, event.id
            ),
        })
    }
}

fn repair_file(
    path: &Path,
    id: &RequestId,
    fetch: &mut FetchStored<'_>,
) -> Result<u64, StoreError> {
    let mut file = open_for_append(path)?;
    // Whole-file lock while we read, cut and append, against another process repairing the
    // same mirror at the same time. Released when `file` closes.
    file.lock().map_err(|e| io_error(path, &e))?;
    let contents = read_mirror(path)?;
    let stored = fetch(id, 0, u64::MAX)?;
    let mirrored = check_prefix_of_store(path, id, &contents.lines, &stored)?;
    let missing = stored
        .get(usize::try_from(mirrored).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    if contents.torn_tail {
        tracing::warn!(path = %path.display(), "Truncating torn last line of event log.");
        file.set_len(contents.whole_len)
            .map_err(|e| io_error(path, &e))?;
    }
    if !missing.is_empty() {
        let mut buf = Vec::new();
        for line in missing {
            buf.extend_from_slice(line.body.as_bytes());
            buf.push(b'\n');
        }
        file.write_all(&buf).map_err(|e| io_error(path, &e))?;
    }
    Ok(missing.len() as u64)
}

/// Checks that the mirror's whole lines are exactly the first stored events, in order, and
/// returns how many there are.
fn check_prefix_of_store(
    path: &Path,
    id: &RequestId,
    lines: &[MirrorLine],
    stored: &[StoredLine],
) -> Result<u64, StoreError> {
    for (index, line) in lines.iter().enumerate() {
        let corrupt = |message: String| StoreError::Corrupt {
            location: format!("{}:{}", path.display(), line.line),
            message,
        };
        let Some(expected) = stored.get(index) else {
            return Err(corrupt(format!(
                "the mirror has more events than the store ({})",
                stored.len()
            )));
        };
        let event = &line.event;
        if &event.request_id != id || event.seq != expected.seq || event.id.as_str() != expected.id
        {
            return Err(corrupt(format!(
                "event seq {} ({}) where the store has seq {} ({})",
                event.seq, event.id, expected.seq, expected.id
            )));
        }
    }
    Ok(lines.len() as u64)
}

pub(crate) fn io_error(path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(bytes: &[u8]) -> Tail {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, bytes).unwrap();
        read_tail(&mut File::open(&path).unwrap(), &path).unwrap()
    }

    #[test]
    fn tail_finds_the_last_whole_line_and_a_torn_end() {
        let t = tail_of(b"a\nbb\ncc");
        assert_eq!((t.len, t.whole_len), (7, 5));
        assert_eq!(t.last_line.as_deref(), Some(&b"bb"[..]));

        let t = tail_of(b"a\nbb\n");
        assert_eq!((t.len, t.whole_len), (5, 5));
        assert_eq!(t.last_line.as_deref(), Some(&b"bb"[..]));

        let t = tail_of(b"only torn");
        assert_eq!((t.whole_len, t.last_line), (0, None));

        let t = tail_of(b"");
        assert_eq!((t.len, t.whole_len, t.last_line), (0, 0, None));

        let t = tail_of(b"one\n");
        assert_eq!(t.last_line.as_deref(), Some(&b"one"[..]));
    }

    #[test]
    fn tail_reads_lines_longer_than_one_chunk() {
        let long = "x".repeat(40_000);
        let text = format!("first\n{long}\n{}", "y".repeat(20_000));
        let t = tail_of(text.as_bytes());
        assert_eq!(t.whole_len as usize, 6 + long.len() + 1);
        assert_eq!(t.last_line.unwrap().len(), long.len());
    }
}
