//! `keel run`: one request, the answer streamed to stdout, narration (or the selected events)
//! to stderr; `--json` prints events as JSON lines on stdout instead. Ctrl-C cancels the run
//! (exit 130); a second Ctrl-C exits at once.
//!
//! [`follow`] — printing a run as it happens — is shared by every command that runs
//! something (`run`, `chat`, `runs resume|replay|fork`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};
use keel::types::{AdapterEvent, PermissionMode};
use keel::{
    Event, EventPayload, RequestOptions, RunHandle, RunResponse, RunStatus, Runtime, SessionId,
    Workspace,
};
use tokio_util::sync::CancellationToken;

use crate::{EXIT_CANCELLED, EXIT_FAILED, EXIT_USAGE, config, out};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workspace folder.
    #[arg(short = 'w', long = "workspace", default_value = ".")]
    workspace: PathBuf,
    /// The agent to run (default: the workspace's default agent).
    #[arg(long)]
    agent: Option<String>,
    /// Run in this session: its history is sent along and this turn is added to it (the
    /// session is created if it does not exist).
    #[arg(long)]
    session: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
    /// The run's permission mode: `default`, `acceptEdits` (file edits need no approval),
    /// `dontAsk` (what would ask is denied) or `plan` (nothing with side effects runs).
    #[arg(long)]
    mode: Option<String>,
    /// Answer approvals here, on the terminal (the default when stdin is a terminal); with
    /// `--no-approve-here` they wait for `keel approvals` from anywhere.
    #[arg(long, overrides_with = "no_approve_here")]
    approve_here: bool,
    #[arg(long, hide = true)]
    no_approve_here: bool,
    /// The prompt.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    prompt: Vec<String>,
}

/// How a followed run is printed.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print every event as one JSON line on stdout instead of the answer.
    #[arg(long)]
    pub json: bool,
    /// Show events whose type matches this glob (repeatable), e.g. `runtime.tool.*`.
    /// Default: the workspace's `cli.events.include` (narration).
    #[arg(long = "events", value_name = "GLOB")]
    pub events: Vec<String>,
}

pub async fn run(args: RunArgs) -> u8 {
    let session = match args.session.as_deref().map(parse_session).transpose() {
        Ok(session) => session,
        Err(message) => {
            out::error(&message);
            return EXIT_USAGE;
        }
    };
    let mode = match args
        .mode
        .as_deref()
        .map(str::parse::<PermissionMode>)
        .transpose()
    {
        Ok(mode) => mode,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_USAGE;
        }
    };
    let (runtime, printer) = match start(&args.workspace, &args.output).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let options = RequestOptions {
        input: args.prompt.join(" "),
        agent: args.agent.clone(),
        session_id: session,
        mode,
        ..Default::default()
    };
    let handle = match runtime.request(options).await {
        Ok(handle) => handle,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_USAGE;
        }
    };
    let interactive = !args.no_approve_here
        && (args.approve_here || std::io::IsTerminal::is_terminal(&std::io::stdin()));
    let printer = match interactive {
        true => printer.with_approver(runtime.clone()),
        false => printer,
    };
    let interrupts = Interrupts::listen(true);
    finish(follow(handle, printer, &interrupts).await)
}

/// Asks on the terminal whether to approve a call, and records the answer.
async fn approve_here(
    runtime: &Runtime,
    approval: &keel::ApprovalRecord,
    answers: Option<&Answers>,
) {
    out::prompt(&format!(
        "Approve {} {}? ({}{}) [y]es / [n]o / [s]ession: ",
        approval.tool,
        approval.arguments,
        approval.asked_by,
        approval
            .ask_reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    ));
    let answer = match answers {
        Some(answers) => answers.lock().await.recv().await.unwrap_or_default(),
        None => tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default(),
    };
    let answer = answer.trim().to_ascii_lowercase();
    let (approve, scope) = match answer.as_str() {
        "y" | "yes" => (true, keel::ApprovalScope::Once),
        "s" | "session" => (true, keel::ApprovalScope::Session),
        _ => (false, keel::ApprovalScope::Once),
    };
    let decided_by =
        std::env::var("USER").map_or_else(|_| "terminal".to_owned(), |u| format!("{u}@terminal"));
    if let Err(error) = runtime
        .decide_approval(&approval.approval_id, approve, scope, &decided_by, None)
        .await
    {
        // Decided elsewhere first: that decision stands.
        out::status(&format!("» {error}"));
    }
}

/// Validates a session id given on the command line.
pub fn parse_session(text: &str) -> Result<SessionId, String> {
    let valid = !text.is_empty()
        && text.len() <= 128
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match valid {
        true => Ok(SessionId::from(text)),
        false => Err(format!(
            "invalid session id `{text}`: use 1-128 letters, digits, `-`, `_` or `.`"
        )),
    }
}

/// Loads the workspace, builds the runtime, recovers runs of dead processes, and prepares the
/// printer. `Err` is the exit code (the problem was printed).
pub async fn start(root: &Path, output: &OutputArgs) -> Result<(Runtime, Printer), u8> {
    start_with(root, output, |builder| builder).await
}

/// [`start`], with a chance to add to the runtime's builder (observers, tools).
pub async fn start_with(
    root: &Path,
    output: &OutputArgs,
    configure: impl FnOnce(keel::RuntimeBuilder) -> keel::RuntimeBuilder,
) -> Result<(Runtime, Printer), u8> {
    let workspace = config::load(root)?;
    let printer = Printer::new(&workspace, output)?;
    let runtime = configure(Runtime::builder().loaded_workspace(workspace))
        .build()
        .map_err(|error| {
            out::error(&error.to_string());
            EXIT_USAGE
        })?;
    match runtime.recover().await {
        Ok(ids) if !ids.is_empty() => out::status(&format!(
            "» {} run(s) left running by a process that stopped are now interrupted: {} (keel runs resume ID)",
            ids.len(),
            ids.iter()
                .map(|id| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Ok(_) => {}
        Err(error) => {
            out::error(&error.to_string());
            return Err(EXIT_FAILED);
        }
    }
    Ok((runtime, printer))
}

/// Routes Ctrl-C to the run in progress: the first cancels it; with `exit_on_second`, a
/// second exits the process with 130.
pub struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
    listener: tokio::task::JoinHandle<()>,
}

impl Interrupts {
    pub fn listen(exit_on_second: bool) -> Self {
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::default();
        let shared = current.clone();
        let listener = tokio::spawn(async move {
            let mut cancelled_one = false;
            while tokio::signal::ctrl_c().await.is_ok() {
                let token = shared.lock().ok().and_then(|mut c| c.take());
                match token {
                    Some(token) => {
                        token.cancel();
                        cancelled_one = true;
                    }
                    None if exit_on_second && cancelled_one => {
                        std::process::exit(i32::from(EXIT_CANCELLED))
                    }
                    None => out::status("\n(no turn in progress: Ctrl-D or /exit leaves)"),
                }
            }
        });
        Self { current, listener }
    }

    fn watch(&self, token: CancellationToken) {
        if let Ok(mut current) = self.current.lock() {
            *current = Some(token);
        }
    }

    fn clear(&self) {
        if let Ok(mut current) = self.current.lock() {
            *current = None;
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Prints a run as it happens and returns its response.
pub async fn follow(
    mut handle: RunHandle,
    mut printer: Printer,
    interrupts: &Interrupts,
) -> Result<RunResponse, String> {
    interrupts.watch(handle.cancel_token());
    while let Some(event) = handle.next_event().await {
        printer.show(&event);
        if let (Some(runtime), EventPayload::ApprovalRequested { approval }) =
            (&printer.approver, &event.payload)
        {
            approve_here(runtime, approval, printer.answers.as_ref()).await;
        }
    }
    interrupts.clear();
    let response = handle.wait().await.map_err(|e| e.to_string())?;
    printer.end(&response);
    Ok(response)
}

/// The exit code for a followed run, printing its error.
pub fn finish(result: Result<RunResponse, String>) -> u8 {
    let response = match result {
        Ok(response) => response,
        Err(message) => {
            out::error(&message);
            return EXIT_FAILED;
        }
    };
    match response.status {
        RunStatus::Completed => 0,
        RunStatus::Cancelled => EXIT_CANCELLED,
        _ => {
            if let Some(error) = &response.error {
                out::error(&format!(
                    "run {} failed: {}",
                    response.request_id, error.message
                ));
            }
            EXIT_FAILED
        }
    }
}

/// Prints a run's events: answer text to stdout, selected events to stderr (or everything
/// selected as JSON lines on stdout with `--json`).
#[derive(Clone)]
pub struct Printer {
    json: bool,
    filter: GlobSet,
    printed_text: bool,
    at_line_start: bool,
    /// Approvals are answered on this terminal, through this runtime.
    approver: Option<Runtime>,
    /// Where answers come from when another reader owns stdin (`keel chat`).
    answers: Option<Answers>,
}

/// Lines typed on the terminal, shared by a chat's input loop and its approval prompts.
pub type Answers = std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<String>>>;

impl Printer {
    fn new(workspace: &Workspace, output: &OutputArgs) -> Result<Self, u8> {
        let patterns = match output.events.is_empty() {
            true if output.json => vec!["*".to_owned()],
            true => workspace.runtime.cli.events.include.clone(),
            false => output.events.clone(),
        };
        let mut builder = GlobSetBuilder::new();
        for pattern in &patterns {
            let glob = Glob::new(pattern).map_err(|e| {
                out::error(&format!("invalid --events glob `{pattern}`: {e}"));
                EXIT_USAGE
            })?;
            builder.add(glob);
        }
        let filter = builder.build().map_err(|e| {
            out::error(&e.to_string());
            EXIT_USAGE
        })?;
        Ok(Self {
            json: output.json,
            filter,
            printed_text: false,
            at_line_start: true,
            approver: None,
            answers: None,
        })
    }

    /// Answers approvals on the terminal.
    pub fn with_approver(mut self, runtime: Runtime) -> Self {
        self.approver = Some(runtime);
        self
    }

    /// Answers approvals with lines from `answers` instead of reading stdin itself.
    pub fn with_answers(mut self, answers: Answers) -> Self {
        self.answers = Some(answers);
        self
    }

    fn show(&mut self, event: &Event) {
        let selected = self.filter.is_match(event.type_name());
        if self.json {
            if selected {
                out::line(&serde_json::to_string(event).unwrap_or_default());
            }
            return;
        }
        match &event.payload {
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { text, .. },
            } => {
                out::stdout_raw(text);
                self.printed_text = true;
                self.at_line_start = text.ends_with('\n');
            }
            // Text from a failed attempt is void: start the retried answer on a fresh line.
            EventPayload::ModelRetry { .. } if !self.at_line_start => {
                out::line("");
                self.at_line_start = true;
            }
            _ => {}
        }
        if !selected {
            return;
        }
        // End the answer's line first, so a terminal showing both streams stays readable.
        if !self.at_line_start {
            out::line("");
            self.at_line_start = true;
        }
        match &event.payload {
            EventPayload::Narration { text, .. } => out::status(&format!("» {text}")),
            _ => out::status(&serde_json::to_string(event).unwrap_or_default()),
        }
    }

    fn end(&mut self, response: &RunResponse) {
        if self.json {
            return;
        }
        match (&response.output, self.printed_text) {
            (Some(output), false) => out::line(output),
            _ if !self.at_line_start => out::line(""),
            _ => {}
        }
        self.printed_text = false;
        self.at_line_start = true;
    }
}
