//! Following a run in the terminal as it happens — shared by every command that runs
//! something (`run`, `chat`, `runs resume|replay|fork`, `tools call`, `tasks run`).
//!
//! [`Printer`] puts the answer on stdout and the selected events (narration by default) on
//! stderr, or every selected event as JSON lines on stdout with `--json`; it answers
//! approvals on the terminal when asked to. [`Interrupts`] routes Ctrl-C and SIGTERM to the
//! run in progress. [`finish`] turns how the run ended into the command's result.

use std::sync::{Arc, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};
use keel::{Event, EventPayload, RunHandle, RunResponse, RunStatus, Runtime, Workspace};
use keel_types::AdapterEvent;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::error::{CliError, EXIT_CANCELLED, EXIT_FAILED, EXIT_TERMINATED};
use crate::out;

/// How a followed run is printed.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct OutputArgs {
    /// Print every event as one JSON line on stdout instead of the answer.
    #[arg(long)]
    pub json: bool,
    /// Show events whose type matches this glob (repeatable), e.g. `runtime.tool.*`.
    /// Default: the workspace's `cli.events.include` (narration).
    #[arg(long = "events", value_name = "GLOB")]
    pub events: Vec<String>,
}

/// Routes Ctrl-C (SIGINT) and SIGTERM to the run in progress: the first cancels it; with
/// `exit_on_second`, a second exits the process at once (130 after Ctrl-C, 143 after SIGTERM).
/// SIGTERM — sent by `timeout`, systemd or a container stop — is also remembered: a run that
/// starts afterwards is cancelled as soon as it is watched, the command exits 143
/// ([`CliError::Terminated`]) and `keel chat` leaves ([`Interrupts::terminated`]).
pub(crate) struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
    terminate: CancellationToken,
    listener: tokio::task::JoinHandle<()>,
}

impl Interrupts {
    /// Starts listening. The handlers are installed before this returns, so no signal sent
    /// afterwards takes the default action (killing the process and leaving its run behind).
    pub(crate) fn listen(exit_on_second: bool) -> Self {
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::default();
        let terminate = CancellationToken::new();
        let signals = Signals::install();
        let shared = current.clone();
        let terminated = terminate.clone();
        let listener = tokio::spawn(async move {
            let Some(mut signals) = signals else {
                return;
            };
            let mut cancelled_one = false;
            while let Some(term) = signals.next().await {
                // A SIGTERM came before: this signal is a second one.
                let again = terminated.is_cancelled();
                if term {
                    terminated.cancel();
                }
                let token = shared.lock().ok().and_then(|mut c| c.take());
                match token {
                    Some(token) => {
                        token.cancel();
                        cancelled_one = true;
                    }
                    None if exit_on_second && (cancelled_one || again) => {
                        let code = match terminated.is_cancelled() {
                            true => EXIT_TERMINATED,
                            false => EXIT_CANCELLED,
                        };
                        std::process::exit(i32::from(code))
                    }
                    // Remembered: the run about to start is cancelled when watched.
                    None if term || again => {}
                    None => out::status("\n(no turn in progress: Ctrl-D or /exit leaves)"),
                }
            }
        });
        Self {
            current,
            terminate,
            listener,
        }
    }

    /// Fires once SIGTERM arrived.
    pub(crate) fn terminated(&self) -> &CancellationToken {
        &self.terminate
    }

    fn watch(&self, token: CancellationToken) {
        // A SIGTERM that came before the run was watched still cancels it.
        if self.terminate.is_cancelled() {
            token.cancel();
            return;
        }
        if let Ok(mut current) = self.current.lock() {
            *current = Some(token);
        }
    }

    fn clear(&self) {
        if let Ok(mut current) = self.current.lock() {
            *current = None;
        }
    }

    /// A run's result as the command's: a run cancelled after SIGTERM exits 143, not 130.
    pub(crate) fn outcome(&self, result: Result<(), CliError>) -> Result<(), CliError> {
        match result {
            Err(CliError::Cancelled) if self.terminate.is_cancelled() => Err(CliError::Terminated),
            result => result,
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// The process's SIGINT and SIGTERM streams.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    /// Installs both handlers; `None` (with a warning) when the OS refuses, and signals keep
    /// their default action.
    fn install() -> Option<Self> {
        let installed = signal(SignalKind::interrupt())
            .and_then(|interrupt| Ok((interrupt, signal(SignalKind::terminate())?)));
        match installed {
            Ok((interrupt, terminate)) => Some(Self {
                interrupt,
                terminate,
            }),
            Err(error) => {
                out::status(&format!(
                    "warning: cannot handle Ctrl-C and SIGTERM ({error}): they end the process at once"
                ));
                None
            }
        }
    }

    /// The next signal: `true` for SIGTERM, `false` for SIGINT; `None` when neither can come.
    async fn next(&mut self) -> Option<bool> {
        tokio::select! {
            got = self.interrupt.recv() => got.map(|()| false),
            got = self.terminate.recv() => got.map(|()| true),
        }
    }
}

/// Follows a run a command started to its end: Ctrl-C or SIGTERM cancels it, a second one
/// exits at once.
pub(crate) async fn to_end(handle: RunHandle, printer: Printer) -> Result<(), CliError> {
    let interrupts = Interrupts::listen(true);
    to_end_with(handle, printer, &interrupts).await
}

/// [`to_end`] with interrupts the command listened for before it started the run, so a
/// SIGTERM during the start cancels the run as soon as it exists.
pub(crate) async fn to_end_with(
    handle: RunHandle,
    printer: Printer,
    interrupts: &Interrupts,
) -> Result<(), CliError> {
    let ended = follow(handle, printer, interrupts)
        .await
        .and_then(|response| finish(&response));
    interrupts.outcome(ended)
}

/// Prints a run as it happens and returns its response.
pub(crate) async fn follow(
    mut handle: RunHandle,
    mut printer: Printer,
    interrupts: &Interrupts,
) -> Result<RunResponse, CliError> {
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
    let response = handle.wait().await.map_err(CliError::failed)?;
    printer.end(&response);
    Ok(response)
}

/// How a followed run ended, as a command's result.
pub(crate) fn finish(response: &RunResponse) -> Result<(), CliError> {
    match response.status {
        RunStatus::Completed => Ok(()),
        RunStatus::Cancelled => Err(CliError::Cancelled),
        _ => Err(match &response.error {
            Some(error) => CliError::failed(format!(
                "run {} failed: {}",
                response.request_id, error.message
            )),
            None => CliError::Silent(EXIT_FAILED),
        }),
    }
}

/// Prints a run's events: answer text to stdout, selected events to stderr (or everything
/// selected as JSON lines on stdout with `--json`).
#[derive(Clone)]
pub(crate) struct Printer {
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
pub(crate) type Answers = std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<String>>>;

impl Printer {
    pub(crate) fn new(workspace: &Workspace, output: &OutputArgs) -> Result<Self, CliError> {
        let patterns = match output.events.is_empty() {
            true if output.json => vec!["*".to_owned()],
            true => workspace.runtime.cli.events.include.clone(),
            false => output.events.clone(),
        };
        let mut builder = GlobSetBuilder::new();
        for pattern in &patterns {
            let glob = Glob::new(pattern)
                .map_err(|e| CliError::usage(format!("invalid --events glob `{pattern}`: {e}")))?;
            builder.add(glob);
        }
        let filter = builder.build().map_err(CliError::usage)?;
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
    pub(crate) fn with_approver(mut self, runtime: Runtime) -> Self {
        self.approver = Some(runtime);
        self
    }

    /// Answers approvals with lines from `answers` instead of reading stdin itself.
    pub(crate) fn with_answers(mut self, answers: Answers) -> Self {
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
        .approvals()
        .decide(&approval.approval_id, approve, scope, &decided_by, None)
        .await
    {
        // Decided elsewhere first: that decision stands.
        out::status(&format!("» {error}"));
    }
}
