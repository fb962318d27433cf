//! [`JsonlStore`]: the first, file-only run store, kept while callers move to
//! [`crate::SqliteStore`]. Each run lives under `.keel/runs/<requestId>/`: the run record as
//! `run.json` (replaced atomically) and its events as append-only `events.jsonl` in the
//! [`crate::mirror`] format.
//!
//! Sessions, resuming and pruning need the SQLite store; here they are refused or empty.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_types::{
    Event, Message, RequestId, RunFilter, RunRecord, RunStore, SessionId, SessionMessage,
    SessionRecord, StoreError,
};

use crate::batch;
use crate::mirror::{EVENTS_FILE, io_error, read_events_file, truncate_torn_tail};

/// File name of the run record inside a run folder.
pub const RUN_FILE: &str = "run.json";

/// A run store made of plain files under `<workspace>/.keel/runs`.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    runs_dir: PathBuf,
    /// Open event logs of active runs, with the last `seq` written.
    open: Mutex<HashMap<RequestId, OpenLog>>,
}

#[derive(Debug)]
struct OpenLog {
    file: File,
    last_seq: u64,
}

impl JsonlStore {
    /// Opens (creating if needed) the store of the workspace at `workspace_root`.
    pub fn open(workspace_root: &Path) -> Result<Self, StoreError> {
        let runs_dir = workspace_root.join(".keel").join("runs");
        fs::create_dir_all(&runs_dir).map_err(|e| io_error(&runs_dir, &e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                runs_dir,
                open: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The folder holding one run's files.
    pub fn run_dir(&self, id: &RequestId) -> PathBuf {
        self.inner.runs_dir.join(id.as_str())
    }

    /// The event log of a run, for `tail -f` and export.
    pub fn events_path(&self, id: &RequestId) -> PathBuf {
        self.run_dir(id).join(EVENTS_FILE)
    }

    fn write_record(&self, run: &RunRecord) -> Result<(), StoreError> {
        let dir = self.run_dir(&run.request_id);
        let path = dir.join(RUN_FILE);
        let tmp = dir.join(".run.json.tmp");
        let bytes =
            serde_json::to_vec_pretty(run).map_err(|e| StoreError::Invalid(e.to_string()))?;
        fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, &e))?;
        fs::rename(&tmp, &path).map_err(|e| io_error(&path, &e))
    }

    fn append_sync(&self, events: &[Event]) -> Result<(), StoreError> {
        let Some(batch) = batch::encode(events)? else {
            return Ok(());
        };
        let id = &batch.request_id;
        let mut open = self
            .inner
            .open
            .lock()
            .map_err(|_| StoreError::Invalid("event log lock poisoned".into()))?;
        let log = match open.get_mut(id) {
            Some(log) => log,
            None => {
                let path = self.events_path(id);
                truncate_torn_tail(&path)?;
                let last_seq = read_events_file(&path)?.last().map_or(0, |e| e.seq);
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| io_error(&path, &e))?;
                open.entry(id.clone()).or_insert(OpenLog { file, last_seq })
            }
        };
        if batch.first_seq() != log.last_seq + 1 {
            return Err(batch::continuity_error(&batch, log.last_seq + 1));
        }
        // One write per batch: a line is either wholly in the file or torn at the end.
        log.file
            .write_all(&batch.lines())
            .map_err(|e| io_error(&self.events_path(id), &e))?;
        log.last_seq = batch.last_seq();
        if batch.terminal {
            open.remove(id);
        }
        Ok(())
    }
}

#[async_trait]
impl RunStore for JsonlStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let dir = self.run_dir(&run.request_id);
        fs::create_dir(&dir).map_err(|e| io_error(&dir, &e))?;
        self.write_record(run)?;
        // The log is new: open it now, so the first append needs no look at an old tail.
        let path = self.events_path(&run.request_id);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_error(&path, &e))?;
        self.inner
            .open
            .lock()
            .map_err(|_| StoreError::Invalid("event log lock poisoned".into()))?
            .insert(run.request_id.clone(), OpenLog { file, last_seq: 0 });
        Ok(())
    }

    async fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        self.append_sync(events)
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.write_record(run)
    }

    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        read_record(&self.run_dir(id).join(RUN_FILE))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let dir = &self.inner.runs_dir;
        let mut ids: Vec<String> = fs::read_dir(dir)
            .map_err(|e| io_error(dir, &e))?
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        // Ids are time-ordered, so newest first is reverse lexical order.
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut runs = Vec::new();
        for id in ids {
            if runs.len() >= limit {
                break;
            }
            let Some(run) = read_record(&dir.join(&id).join(RUN_FILE))? else {
                continue;
            };
            let keep = filter.status.is_none_or(|s| s == run.status)
                && filter.agent.as_ref().is_none_or(|a| a == &run.agent)
                && filter
                    .session
                    .as_ref()
                    .is_none_or(|s| Some(s) == run.session_id.as_ref());
            if keep {
                runs.push(run);
            }
        }
        Ok(runs)
    }

    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError> {
        let path = self.events_path(id);
        if !path.exists() {
            return match self.run_dir(id).exists() {
                true => Ok(Vec::new()),
                false => Err(StoreError::NotFound(id.to_string())),
            };
        }
        let mut events = read_events_file(&path)?;
        events.retain(|e| e.seq > after);
        Ok(events)
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        Ok(Vec::new())
    }

    async fn claim(&self, _id: &RequestId) -> Result<RunRecord, StoreError> {
        Err(unsupported("resuming runs"))
    }

    async fn prune(&self, _before: &str) -> Result<u64, StoreError> {
        Err(unsupported("pruning"))
    }

    async fn ensure_session(
        &self,
        _id: &SessionId,
        _agent: &str,
    ) -> Result<SessionRecord, StoreError> {
        Err(unsupported("sessions"))
    }

    async fn get_session(&self, _id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        Ok(None)
    }

    async fn list_sessions(&self, _limit: Option<usize>) -> Result<Vec<SessionRecord>, StoreError> {
        Ok(Vec::new())
    }

    async fn delete_session(&self, _id: &SessionId) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn session_messages(&self, _id: &SessionId) -> Result<Vec<SessionMessage>, StoreError> {
        Ok(Vec::new())
    }

    async fn append_session_messages(
        &self,
        _id: &SessionId,
        _request_id: &RequestId,
        _messages: &[Message],
    ) -> Result<(), StoreError> {
        Err(unsupported("sessions"))
    }
}

fn unsupported(what: &str) -> StoreError {
    StoreError::Invalid(format!("{what} need the SQLite store"))
}

fn read_record(path: &Path) -> Result<Option<RunRecord>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, &e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            location: path.display().to_string(),
            message: e.to_string(),
        })
}
