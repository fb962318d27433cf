//! Ports: the traits at the runtime's seams. Model providers, tools and stores implement them;
//! the runtime only knows these traits. Cancellation is by dropping: a dropped model stream
//! closes its connection and a dropped tool future kills its processes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_core::Stream;
use serde_json::Value;

use crate::event::Event;
use crate::message::{ModelEvent, ModelRequest, ToolSpec};
use crate::run::{ErrorCode, RunStatus};
use crate::{RequestId, SessionId};

mod run_store;
pub use run_store::{
    ApprovalStore, EvalStore, RunLog, RunStore, SessionStore, SkillCandidateStore, TaskStore,
    check_run_of,
};

/// A boxed, sendable stream.
pub type BoxStream<'a, T> = Pin<Box<dyn Stream<Item = T> + Send + 'a>>;

/// The deltas of one model answer. Text deltas that are ready together (one network read)
/// are one `agent.output.delta` event: the agent loop takes what is already there.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A model answer known in advance (a script, a recorded run), streamed the way a network
/// answer arrives: whatever follows a text delta comes one poll later, so each delta is its
/// own `agent.output.delta` event rather than being joined with the next.
pub fn one_read_at_a_time(
    items: impl IntoIterator<Item = Result<ModelEvent, ModelError>>,
) -> ModelStream {
    Box::pin(Reads {
        items: items.into_iter().collect(),
        pause: false,
    })
}

/// See [`one_read_at_a_time`].
struct Reads {
    items: std::collections::VecDeque<Result<ModelEvent, ModelError>>,
    /// The last item was a text delta: the next poll yields (and wakes itself at once).
    pause: bool,
}

impl Stream for Reads {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.pause) {
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let item = this.items.pop_front();
        this.pause = matches!(item, Some(Ok(ModelEvent::TextDelta { .. })));
        std::task::Poll::Ready(item)
    }
}

/// A failure talking to a model, classified so the runtime knows whether to retry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The endpoint could not be reached.
    #[error("cannot reach the model endpoint: {0}")]
    Connect(String),
    /// No answer (or no further chunk) within the provider's timeout.
    #[error("the model did not answer in time: {0}")]
    Timeout(String),
    /// HTTP 429; `retry_after` is the server's `Retry-After`, when it sent one.
    #[error("rate limited by the provider: {message}")]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    /// A 5xx answer.
    #[error("the provider failed with HTTP {status}: {message}")]
    Server { status: u16, message: String },
    /// HTTP 401/403: the key is missing, wrong or lacks permission.
    #[error("the provider rejected the credentials (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    /// The prompt does not fit the model's context window.
    #[error("the prompt exceeds the model's context length: {0}")]
    ContextLength(String),
    /// Any other 4xx: the request itself is wrong.
    #[error("the provider rejected the request (HTTP {status}): {message}")]
    BadRequest { status: u16, message: String },
    /// The answer could not be understood (bad JSON, broken SSE, impossible deltas).
    #[error("malformed model stream: {0}")]
    MalformedStream(String),
    /// A failure read back from a run's log (replay): the same code, message and wait as the
    /// original, so the replayed run records the same events.
    #[error("{}", .error.message)]
    Recorded {
        error: crate::ErrorInfo,
        retry_after: Option<Duration>,
    },
}

impl ModelError {
    /// Whether trying again may succeed (connect, timeout, 429, 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Recorded { error, .. } => error.code == ErrorCode::ModelUnavailable,
            other => matches!(
                other,
                Self::Connect(_)
                    | Self::Timeout(_)
                    | Self::RateLimited { .. }
                    | Self::Server { .. }
            ),
        }
    }

    /// How long the server asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Recorded { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// The stable error code recorded on a run that fails with this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Auth { .. } => ErrorCode::ModelAuth,
            Self::BadRequest { .. } => ErrorCode::ModelBadRequest,
            Self::ContextLength(_) => ErrorCode::ModelContextLength,
            Self::MalformedStream(_) => ErrorCode::ModelMalformedStream,
            Self::Connect(_)
            | Self::Timeout(_)
            | Self::RateLimited { .. }
            | Self::Server { .. } => ErrorCode::ModelUnavailable,
            Self::Recorded { error, .. } => error.code,
        }
    }
}

/// A model provider: turns one [`ModelRequest`] into a stream of normalised deltas.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// Short provider name for events and errors (`openai`, `scripted`, …).
    fn provider_name(&self) -> &str;

    /// The model name the provider targets.
    fn model_name(&self) -> &str;

    /// Starts one model round. Errors before the first delta come back here; errors during
    /// the answer come back as stream items. Dropping the stream cancels the round.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;

    /// The next summary a recording holds (a cassette's, in the order its run compacted),
    /// answered instead of asking the model to summarize: the summary and its usage, or why
    /// the original had none. `None` for a live model (the default).
    fn recorded_summary(&self) -> Option<Result<(String, crate::Usage), String>> {
        None
    }
}

/// What a tool call runs with.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace root; file tools resolve paths inside it.
    pub workspace_root: PathBuf,
    pub request_id: RequestId,
    pub session_id: Option<SessionId>,
    pub agent: String,
    /// Output above this size is truncated (or stored as an artifact, later).
    pub max_output_bytes: usize,
    /// The files this run has seen (read, written or created), for the read-before-edit
    /// check of `write_file` and `edit_file`; `None` when nobody tracks them (a call an
    /// operator makes directly), which skips the check.
    pub seen_files: Option<SeenFiles>,
    /// Where a tool that reports progress ([`Tool::reports_progress`]) sends it while its
    /// call runs (the runtime records each report as `agent.tool.progress`); `None` when
    /// nobody listens.
    pub progress: Option<ProgressSink>,
    /// The request's metadata (`metadata` of the request; memory namespaces read it).
    pub metadata: Arc<std::collections::BTreeMap<String, String>>,
    /// The call being executed, when a run makes it (its tool events carry this id).
    pub call_id: Option<String>,
    /// The `seq` of that call's start event in the run's log (memory provenance points at it).
    pub call_seq: Option<u64>,
    /// The W3C `traceparent` naming the call's span (`docs/observability.md`): HTTP tools
    /// send it as a header, command tools get it as `TRACEPARENT`, MCP calls in `_meta`.
    pub traceparent: Option<String>,
    /// Where the file tools read and write text instead of the disk, when the request's
    /// caller offers it ([`TextFiles`]: an editor's buffers); `None`: the disk.
    pub files: Option<Arc<dyn TextFiles>>,
}

/// A caller's own view of the workspace's text files, which the file tools (`read_file`,
/// `write_file`, `edit_file`) read and write through instead of the disk: an editor's open
/// buffers, reached over the Agent Client Protocol's `fs/read_text_file` and
/// `fs/write_text_file` (`keel acp`). The tools check every call as always — the path inside
/// the workspace and not under `.keel/`, read before edit, the size limits — and hand this
/// the checked absolute path; what they return to the model is the same either way. A method
/// answers `None` for what it does not take (a client that reads but does not write), and the
/// tool uses the disk for it.
#[async_trait]
pub trait TextFiles: Send + Sync + std::fmt::Debug {
    /// The file's whole text, `None` to read it from disk.
    async fn read(&self, path: &Path) -> Option<Result<String, ToolError>>;

    /// Replaces the file's text, `None` to write it to disk.
    async fn write(&self, path: &Path, content: &str) -> Option<Result<(), ToolError>>;
}

/// One progress report of a running tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Receives a running call's progress reports. Cheap to clone.
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(ToolProgress) + Send + Sync>);

impl ProgressSink {
    /// A sink calling `report` for each report (keep it quick and non-blocking).
    pub fn new(report: impl Fn(ToolProgress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(report))
    }

    /// Reports progress.
    pub fn report(&self, progress: ToolProgress) {
        (self.0)(progress);
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// The set of files a run has seen, keyed by canonical path; clones share one set.
#[derive(Debug, Clone, Default)]
pub struct SeenFiles(Arc<Mutex<HashSet<PathBuf>>>);

impl SeenFiles {
    /// Records that the run has seen `path` (canonical).
    pub fn insert(&self, path: &Path) {
        let mut set = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        set.insert(path.to_path_buf());
    }

    /// Whether the run has seen `path` (canonical).
    pub fn contains(&self, path: &Path) -> bool {
        let set = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        set.contains(path)
    }
}

/// The result of a successful tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    /// Binary parts of the result (an MCP tool's images or audio): the runtime stores each as
    /// an artifact and tells the model its URI.
    pub attachments: Vec<Attachment>,
    /// Events the run records for the call once its output is settled, e.g. the
    /// `runtime.skill.injected` of a skill `load_skill` read.
    pub events: Vec<crate::EventPayload>,
}

/// A binary part of a tool's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// What it is, e.g. `image 1`.
    pub name: String,
    pub media_type: String,
    pub data: Vec<u8>,
}

impl ToolOutput {
    /// A text result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            attachments: Vec::new(),
            events: Vec::new(),
        }
    }

    /// A JSON result, rendered compactly.
    pub fn json(value: &Value) -> Self {
        Self::text(value.to_string())
    }
}

/// A tool call that failed. The message goes back to the model as the tool's result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The arguments are acceptable to the schema but not to the tool.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A path resolves outside the workspace.
    #[error("path `{0}` is outside the workspace")]
    PathEscape(String),
    /// A file or directory operation failed.
    #[error("{0}")]
    Io(String),
    /// The tool did not finish within its timeout.
    #[error("the tool timed out after {0:?}")]
    Timeout(Duration),
    /// The tool ran and reported failure (a command's non-zero exit, with its stderr).
    #[error("{0}")]
    Failed(String),
}

/// A tool the gateway can run.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and argument schema.
    fn spec(&self) -> &ToolSpec;

    /// Whether the tool only reads (it may then run without approval by default).
    fn read_only(&self) -> bool {
        false
    }

    /// The OS sandbox the tool's process starts in, when it starts one in a sandbox: the run
    /// records it with each call (`runtime.tool.sandbox`).
    fn sandbox(&self, _ctx: &ToolContext) -> Option<crate::SandboxRecord> {
        None
    }

    /// Whether running the same call twice is safe. A resumed run re-runs a call that started
    /// but has no recorded result only when its tool is idempotent. Read-only tools are.
    fn idempotent(&self) -> bool {
        self.read_only()
    }

    /// Whether the tool may destroy or overwrite what exists (MCP's `destructiveHint`), when
    /// its author says; meaningful only for a tool that is not read-only.
    fn destructive(&self) -> Option<bool> {
        None
    }

    /// Whether the tool reports progress while it runs (through [`ToolContext::progress`]).
    fn reports_progress(&self) -> bool {
        false
    }

    /// Semantic validation after the schema check (paths inside the workspace, size limits,
    /// URL allow-lists…), with the request's context. Issues block the call like schema
    /// issues do. The default accepts everything.
    fn check(&self, _ctx: &ToolContext, _args: &Value) -> Vec<crate::Issue> {
        Vec::new()
    }

    /// Semantic repairs, run before [`Tool::check`] in the gateway's `repair` mode: the tool
    /// may rewrite a value it understands better than the schema does, and returns what it
    /// changed (kind `tool_check`). The gateway records the repairs like its own and
    /// validates the result against the schema again. The default changes nothing.
    fn repair(&self, _ctx: &ToolContext, _args: &mut Value) -> Vec<crate::Repair> {
        Vec::new()
    }

    /// Runs the tool. The gateway guarantees `args` is valid against the schema. Dropping the
    /// future must stop the work, including any child processes.
    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError>;
}

/// A stored artifact (a large tool result, a file a run produced), addressed by a logical
/// URI `keel://artifacts/<id>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRecord {
    pub id: String,
    pub uri: String,
    pub request_id: RequestId,
    /// What it is, e.g. `shell output (call_1)`.
    pub name: String,
    pub media_type: String,
    pub bytes: u64,
    /// Hex SHA-256 of the content.
    pub sha256: String,
    pub created_at: String,
}

/// The scheme and prefix of artifact URIs.
pub const ARTIFACT_URI_PREFIX: &str = "keel://artifacts/";

/// The longest artifact id accepted (the ids Keel makes are about 30 characters).
pub const ARTIFACT_ID_MAX_LEN: usize = 128;

/// The id in an artifact URI (or a bare id): `None` unless it is 1–[`ARTIFACT_ID_MAX_LEN`]
/// ASCII letters, digits, `-` and `_` (so it is safe as a file name on every filesystem).
pub fn artifact_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(ARTIFACT_URI_PREFIX).unwrap_or(uri);
    let valid = !id.is_empty()
        && id.len() <= ARTIFACT_ID_MAX_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then_some(id)
}

/// Why `uri` is not an artifact id, in a message short enough for a log line: a long id
/// is described by its length, never echoed whole.
pub fn artifact_id_problem(uri: &str) -> String {
    const RULE: &str = "use 1-128 letters, digits, `_` or `-`";
    let id = uri.strip_prefix(ARTIFACT_URI_PREFIX).unwrap_or(uri);
    if id.len() > ARTIFACT_ID_MAX_LEN {
        return format!(
            "invalid artifact id: it has {} bytes, more than {ARTIFACT_ID_MAX_LEN}; {RULE}",
            id.len()
        );
    }
    format!("invalid artifact id {id:?}; {RULE}")
}

/// Where artifacts are kept.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores content for a run.
    async fn put(
        &self,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<ArtifactRecord, StoreError>;
    /// Stores content handed over by value: a store that writes it from another thread
    /// takes it there as it is rather than copying it first (a large tool output is held
    /// once). By default, [`put`](Self::put).
    async fn put_owned(
        &self,
        request_id: &RequestId,
        name: &str,
        media_type: &str,
        content: Vec<u8>,
    ) -> Result<ArtifactRecord, StoreError> {
        self.put(request_id, name, media_type, &content).await
    }
    /// An artifact by URI (`keel://artifacts/<id>`) or bare id.
    async fn get(&self, uri: &str) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError>;
}

/// A failure of the run store.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the store failed.
    #[error("store i/o error at {path}: {message}")]
    Io { path: String, message: String },
    /// Stored data could not be understood.
    #[error("corrupt store data at {location}: {message}")]
    Corrupt { location: String, message: String },
    /// No run with that id.
    #[error("no run `{0}`")]
    NotFound(String),
    /// The caller broke the store's contract (e.g. a gap in `seq`).
    #[error("invalid store operation: {0}")]
    Invalid(String),
    /// The store was written by a newer Keel; nothing was changed.
    #[error(
        "the store at {path} has schema version {found}, newer than this keel supports ({supported}); upgrade keel"
    )]
    Version {
        path: String,
        found: u32,
        supported: u32,
    },
    /// This process lost its lease on the run (it expired, and another process may have
    /// taken the run over): the write was refused, so two processes never write one log.
    #[error("write refused: {0}")]
    Fenced(String),
    /// The store does not keep this kind of record (an embedder's store that implements only
    /// what it stores, e.g. runs and events but no tasks).
    #[error("this store does not keep {0}")]
    Unsupported(&'static str),
}

/// What a store reports when asked whether it is usable ([`RunLog::health`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    /// The kind of store, e.g. `sqlite`.
    pub kind: String,
    /// The schema version of the stored data, if the store has one.
    pub schema_version: Option<u32>,
    /// `true` when a write just succeeded; `None` when the store did not try one.
    pub writable: Option<bool>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub agent: Option<String>,
    pub session: Option<SessionId>,
    /// Only runs started at or after this RFC 3339 time.
    pub since: Option<String>,
    /// Only runs created by this principal ([`crate::RunRecord::owner`]).
    pub owner: Option<String>,
    /// Only the runs this run started (subagents, workflow nodes).
    pub parent: Option<crate::RequestId>,
    /// Only runs strictly after this position in the list order (the next page).
    pub before: Option<crate::RunCursor>,
    pub limit: Option<usize>,
}

/// Sees every event of every run a runtime executes, once, in `seq` order per run, right
/// after it is stored (narration excluded). Called from the run's delivery path: it must be
/// quick and must not block (hand work to a channel or a counter).
pub trait EventObserver: Send + Sync {
    fn observe(&self, event: &Event);

    /// A run's log is opened for writing in this process (a new run, or one resumed), before
    /// any of the events it is about to store are observed; `last_seq` is how many it holds
    /// already. The trace exporter keeps the run's trace from here.
    fn opened(&self, _run: &crate::RunRecord, _last_seq: u64) {}

    /// This process stopped writing the run's log (it ended, or its writer stopped).
    fn closed(&self, _run: &crate::RequestId) {}
}

/// An embeddings model (an OpenAI-compatible `/embeddings` endpoint, or one injected): turns
/// texts into vectors for hybrid memory recall.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model's name, as its `Model` document declares it.
    fn model_name(&self) -> &str;
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// Long-term memory records (`docs/workspace.md#memory`), kept by the store beside the runs.
/// Nothing is changed in place: updates, deletions, expiries and merges close the current
/// version and (for updates and merges) store a new one, in one transaction.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores a candidate as a new record (version 1), approved by `approved_by`.
    async fn store_memory(
        &self,
        candidate: &crate::MemoryCandidate,
        approved_by: &str,
    ) -> Result<crate::MemoryRecord, StoreError>;
    /// The latest version of a record (whatever its status).
    async fn get_memory(&self, id: &str) -> Result<Option<crate::MemoryRecord>, StoreError>;
    /// Every version of a record, oldest first.
    async fn memory_history(&self, id: &str) -> Result<Vec<crate::MemoryRecord>, StoreError>;
    /// Records, newest first: the current versions, or every version with `all_versions`.
    async fn list_memory(
        &self,
        filter: &crate::MemoryFilter,
    ) -> Result<Vec<crate::MemoryRecord>, StoreError>;
    /// The namespaces that hold active records, sorted.
    async fn memory_namespaces(&self) -> Result<Vec<String>, StoreError>;
    /// Full-text search (bm25) over the active records of `namespaces`, best first.
    async fn search_memory(
        &self,
        namespaces: &[String],
        query: &str,
        limit: usize,
    ) -> Result<Vec<crate::MemoryHit>, StoreError>;
    /// A new version with the update applied; the old one is superseded.
    async fn update_memory(
        &self,
        id: &str,
        update: &crate::MemoryUpdate,
        by: &str,
    ) -> Result<crate::MemoryRecord, StoreError>;
    /// Closes the current version as deleted (it stays in the history).
    async fn delete_memory(
        &self,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<crate::MemoryRecord, StoreError>;
    /// Closes every active record whose `expiresAt` is at or before `now`; returns them.
    async fn expire_memory(&self, now: &str) -> Result<Vec<crate::MemoryRecord>, StoreError>;
    /// Merges one record into another (compaction); returns the kept record's new version.
    async fn merge_memory(
        &self,
        merge: &crate::MemoryMerge,
        by: &str,
    ) -> Result<crate::MemoryRecord, StoreError>;
    /// Active records of `namespaces` that have no embedding yet: `(id, version, text)`.
    async fn memory_without_embedding(
        &self,
        namespaces: &[String],
        limit: usize,
    ) -> Result<Vec<(String, u32, String)>, StoreError>;
    /// Keeps the embedding of one version.
    async fn set_memory_embedding(
        &self,
        id: &str,
        version: u32,
        embedding: &[f32],
    ) -> Result<(), StoreError>;
    /// The active records of `namespaces` nearest to `embedding` by cosine similarity, best
    /// first.
    async fn nearest_memory(
        &self,
        namespaces: &[String],
        embedding: &[f32],
        limit: usize,
    ) -> Result<Vec<crate::MemoryHit>, StoreError>;
    /// Inserts exported versions as they are (ids, versions, statuses, times). A record id
    /// that already exists is refused, and then nothing is imported.
    async fn import_memory(&self, records: &[crate::MemoryRecord]) -> Result<u64, StoreError>;
    /// A consistent copy of the whole store at `to`, taken while it is in use.
    async fn backup(&self, to: &Path) -> Result<(), StoreError>;
}
