//! Opening a connection to one MCP server: the transport (a child process in its own process
//! group, or streamable HTTP), the client handler that receives the server's notifications,
//! and the `initialize` handshake. This file and `server.rs`/`tool.rs` are the only places
//! that name `rmcp`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use keel_tools::process::ProcessGroup;
use keel_types::ToolProgress;
use keel_workspace::{McpServerSpec, McpTransport};
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, NumberOrString, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc};
use tracing::debug;

/// Largest JSON-RPC message read from a stdio server: a larger one is dropped (and the call
/// it answers times out), so a server cannot make Keel buffer without bound.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// How many of a server's last stderr lines are kept to explain a crash.
const STDERR_TAIL_LINES: usize = 20;

/// Variables a stdio server gets from Keel's environment without asking.
const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TMPDIR"];

/// What the handler shares with the server's supervisor and its calls.
#[derive(Default)]
pub(crate) struct Signals {
    /// Notified on `notifications/tools/list_changed`.
    pub(crate) tools_changed: Notify,
    /// Where progress goes, by progress token.
    pub(crate) progress: Mutex<ProgressRoutes>,
}

/// The progress channels of calls in flight, and reports that came before their call
/// registered (the token is known only once the request is sent; a quick server may report
/// first). Early reports are bounded: the oldest token's are dropped past the bound.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    channels: HashMap<String, mpsc::UnboundedSender<ToolProgress>>,
    early: VecDeque<(String, ToolProgress)>,
}

/// How many reports for tokens not (yet) registered are kept.
const EARLY_REPORTS: usize = 64;

impl ProgressRoutes {
    /// Routes `token`'s reports to `sender`, starting with those that came early.
    pub(crate) fn register(&mut self, token: String, sender: mpsc::UnboundedSender<ToolProgress>) {
        let mut kept = VecDeque::with_capacity(self.early.len());
        for (early, report) in self.early.drain(..) {
            match early == token {
                true => drop(sender.send(report)),
                false => kept.push_back((early, report)),
            }
        }
        self.early = kept;
        self.channels.insert(token, sender);
    }

    /// Stops routing `token`'s reports.
    pub(crate) fn remove(&mut self, token: &str) {
        self.channels.remove(token);
        self.early.retain(|(early, _)| early != token);
    }

    fn route(&mut self, token: String, report: ToolProgress) {
        match self.channels.get(&token) {
            Some(sender) => drop(sender.send(report)),
            None => {
                if self.early.len() == EARLY_REPORTS {
                    self.early.pop_front();
                }
                self.early.push_back((token, report));
            }
        }
    }
}

/// Keel's side of the connection: it implements no client capability (no sampling, roots or
/// elicitation) and listens for tool-list changes and progress.
pub(crate) struct Handler {
    pub(crate) signals: Arc<Signals>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.signals.tools_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let token = token_key(&params.progress_token.0);
        self.signals
            .progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .route(
                token,
                ToolProgress {
                    progress: params.progress,
                    total: params.total,
                    message: params.message,
                },
            );
    }
}

pub(crate) fn token_key(token: &NumberOrString) -> String {
    match token {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// A live session with a server.
pub(crate) struct Session {
    /// Taken by the supervisor when the session is ready.
    pub(crate) service: Option<RunningService<RoleClient, Handler>>,
    /// The stdio server's process group, killed when the session is dropped.
    pub(crate) group: Option<ProcessGroup>,
    pub(crate) child: Option<Child>,
    /// The last lines the stdio server wrote to stderr.
    pub(crate) stderr: Arc<Mutex<VecDeque<String>>>,
    /// The task filling `stderr`; it ends when the pipe closes.
    pub(crate) stderr_reader: Option<tokio::task::JoinHandle<()>>,
    /// The stdio server's sandbox: what is left in its cgroup is killed when it drops.
    pub(crate) _sandbox: Option<keel_tools::sandbox::Guard>,
    /// The sandbox the stdio server started in, in words (`runtime.mcp.lifecycle`'s detail).
    pub(crate) sandboxed: Option<String>,
}

impl Session {
    /// Why the session ended, in words: the process's exit status and its last stderr lines.
    pub(crate) async fn end_reason(&mut self) -> String {
        let mut reason = match self.child.as_mut() {
            Some(child) => {
                match tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await {
                    Ok(Ok(status)) => {
                        // The process is gone: let the reader take its last stderr lines.
                        if let Some(reader) = self.stderr_reader.take() {
                            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), reader)
                                .await;
                        }
                        format!("the server process exited ({status})")
                    }
                    Ok(Err(e)) => format!("the server process could not be waited for: {e}"),
                    Err(_) => "the server closed its output".to_owned(),
                }
            }
            None => "the server closed the connection".to_owned(),
        };
        let tail = self
            .stderr
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(last) = tail.back() {
            reason.push_str(&format!("; last stderr line: {last}"));
        }
        reason
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(group) = &self.group {
            group.kill();
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error("cannot start `{program}`: {message}")]
    Spawn { program: String, message: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the initialize handshake failed: {0}")]
    Handshake(String),
}

/// Opens a session: starts the transport and runs the `initialize` handshake (the caller
/// bounds it with the startup timeout).
pub(crate) async fn open(
    spec: &McpServerSpec,
    root: &Path,
    env: &BTreeMap<String, String>,
    signals: Arc<Signals>,
) -> Result<Session, ConnectError> {
    let handler = Handler { signals };
    match spec.transport {
        McpTransport::Stdio => open_stdio(spec, root, env, handler).await,
        McpTransport::Http => open_http(spec, handler).await,
    }
}

async fn open_stdio(
    spec: &McpServerSpec,
    root: &Path,
    env: &BTreeMap<String, String>,
    handler: Handler,
) -> Result<Session, ConnectError> {
    let Some((program, args)) = spec.command.split_first() else {
        return Err(ConnectError::Config("`command` is empty".into()));
    };
    let cwd = working_dir(root, spec.cwd.as_deref())?;
    let program_path = match program.contains('/') && Path::new(program).is_relative() {
        true => root.join(program),
        false => PathBuf::from(program),
    };
    let profile = spec
        .sandbox
        .as_ref()
        .and_then(|sandbox| keel_tools::sandbox::Profile::resolve(sandbox, root));
    let mut sandboxed = None;
    let prepared = match &profile {
        None => None,
        Some(profile) => {
            let temp_dir = keel_tools::sandbox::run_temp_dir("mcp");
            let prepared = profile
                .prepare(&program_path, root, &temp_dir, std::slice::from_ref(&cwd))
                .map_err(|e| ConnectError::Spawn {
                    program: program.clone(),
                    message: e.to_string(),
                })?;
            let record = prepared.record();
            tracing::debug!(program = %program, mechanisms = ?record.mechanisms, "MCP server sandboxed.");
            sandboxed = Some(format!(
                "sandbox: filesystem {}, network {}; by {}",
                record.filesystem,
                record.network,
                record.mechanisms.join(", ")
            ));
            Some(prepared)
        }
    };
    let (started, started_args) = match &prepared {
        Some(prepared) => prepared.argv(&program_path, args),
        None => (
            program_path.clone().into_os_string(),
            args.iter().map(std::ffi::OsString::from).collect(),
        ),
    };
    let mut command = Command::new(&started);
    command
        .args(&started_args)
        .current_dir(&cwd)
        .env_clear()
        .envs(server_env(spec, env))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let sandbox = prepared.map(|p| p.apply(&mut command));
    let mut child = command.spawn().map_err(|e| ConnectError::Spawn {
        program: program.clone(),
        message: match e.kind() {
            std::io::ErrorKind::NotFound => "program not found".to_owned(),
            _ => e.to_string(),
        },
    })?;
    let group = child.id().map(ProcessGroup::new);
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let stderr_reader = child
        .stderr
        .take()
        .map(|pipe| tokio::spawn(keep_stderr(pipe, stderr.clone())));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(ConnectError::Config(
            "the server's pipes are missing".into(),
        ));
    };
    let transport =
        AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
    // A failed handshake drops `group`, which kills the process group.
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    Ok(Session {
        service: Some(service),
        group,
        child: Some(child),
        stderr,
        stderr_reader,
        _sandbox: sandbox,
        sandboxed,
    })
}

async fn open_http(spec: &McpServerSpec, handler: Handler) -> Result<Session, ConnectError> {
    let Some(url) = spec.url.as_deref() else {
        return Err(ConnectError::Config("`url` is missing".into()));
    };
    let mut headers = HashMap::new();
    for (name, value) in &spec.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ConnectError::Config(format!("header name `{name}`: {e}")))?;
        let value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|e| ConnectError::Config(format!("header `{name}`: {e}")))?;
        headers.insert(name, value);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| ConnectError::Config(format!("HTTP client: {e}")))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    Ok(Session {
        service: Some(service),
        group: None,
        child: None,
        stderr: Arc::default(),
        stderr_reader: None,
        _sandbox: None,
        sandboxed: None,
    })
}

/// The server's working directory: the workspace, or `cwd` inside it.
fn working_dir(root: &Path, cwd: Option<&str>) -> Result<PathBuf, ConnectError> {
    let Some(cwd) = cwd else {
        return Ok(root.to_path_buf());
    };
    let relative = Path::new(cwd);
    let escapes = relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir));
    if escapes {
        return Err(ConnectError::Config(format!(
            "`cwd` {cwd} is not inside the workspace"
        )));
    }
    Ok(root.join(relative))
}

/// The environment of a stdio server: the base variables and the `envAllow` names from Keel's
/// environment, then the document's `env` (already interpolated). Nothing else is inherited.
pub(crate) fn server_env(
    spec: &McpServerSpec,
    env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in BASE_ENV
        .iter()
        .copied()
        .chain(spec.env_allow.iter().map(String::as_str))
    {
        if let Some(value) = env.get(name) {
            out.insert(name.to_owned(), value.clone());
        }
    }
    out.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// Keeps the last lines a server writes to stderr (and logs them at debug level).
async fn keep_stderr(pipe: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        debug!(line = %line, "MCP server stderr.");
        let mut tail = tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        let mut line = line;
        if line.len() > 500 {
            let mut cut = 500;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        tail.push_back(line);
    }
}

/// A result as JSON (the SDK's types are read through JSON: Keel keeps only what it uses).
pub(crate) fn json_of<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

/// Every page of a paginated list (`tools/list`, `prompts/list`, `resources/list`): `page`
/// asks for one page as JSON; the items of its `field` are read as `T` (an unreadable one is
/// left out with a warning), following `nextCursor` for at most 1,000 pages.
pub(crate) async fn list_pages<T, F, Fut>(field: &str, mut page: F) -> Result<Vec<T>, String>
where
    T: serde::de::DeserializeOwned,
    F: FnMut(rmcp::model::PaginatedRequestParams) -> Fut,
    Fut: std::future::Future<Output = Result<serde_json::Value, String>>,
{
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor.take());
        let mut value = page(params).await?;
        if let serde_json::Value::Array(listed) = value[field].take() {
            for item in listed {
                let name = item["name"].as_str().unwrap_or_default().to_owned();
                match serde_json::from_value::<T>(item) {
                    Ok(item) => items.push(item),
                    Err(error) => {
                        tracing::warn!(field, %name, %error, "An unreadable MCP list item left out.")
                    }
                }
            }
        }
        match value["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(items),
        }
    }
    Err(format!("the {field} list has more than 1000 pages"))
}
