//! `keel chat`: an interactive session in the terminal. Each input is one run in the
//! session, its answer streamed as it comes. A line ending in `\` continues on the next line;
//! `"""` on a line of its own starts and ends a block. Ctrl-C cancels the turn in progress,
//! not the session; Ctrl-D or `/exit` leaves, and the session's `SessionEnd` hooks run
//! (reason `prompt_input_exit`). SIGTERM cancels the turn in progress and leaves the same way,
//! exiting 143.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use keel::{RequestOptions, SessionId};
use tokio::sync::mpsc;

use crate::error::CliError;
use crate::follow::{self, Answers, Interrupts, OutputArgs};
use crate::{out, run, workspace};

#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// The workspace folder.
    #[arg(short = 'w', long = "workspace", default_value = ".")]
    workspace: PathBuf,
    /// The agent to chat with (default: the workspace's default agent).
    #[arg(long)]
    agent: Option<String>,
    /// Continue this session (default: a new one).
    #[arg(long)]
    session: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) async fn chat(args: ChatArgs) -> Result<(), CliError> {
    let session = match args
        .session
        .as_deref()
        .map(keel::SessionId::parse)
        .transpose()?
    {
        Some(session) => session,
        None => SessionId::generate(),
    };
    let (runtime, printer) = workspace::start(&args.workspace, &args.output).await?;
    let interactive = std::io::stdin().is_terminal();
    out::status(&format!(
        "Session {session}. Ctrl-C cancels a turn; Ctrl-D or /exit leaves. Continue later with: keel chat --session {session}"
    ));
    // One reader of the terminal, shared by the prompt loop and approval questions.
    let inputs: Answers = std::sync::Arc::new(tokio::sync::Mutex::new(read_inputs()));
    let printer = printer
        .with_approver(runtime.clone())
        .with_answers(inputs.clone());
    let interrupts = Interrupts::listen(false);
    // The chat exits as its last turn ended; each turn's error is reported as it happens.
    let mut last_turn = Ok(());
    loop {
        if interactive {
            out::prompt("› ");
        }
        // SIGTERM leaves the chat as Ctrl-D does, but exits 143.
        let next = tokio::select! {
            next = async { inputs.lock().await.recv().await } => next,
            () = interrupts.terminated().cancelled() => None,
        };
        let Some(input) = next else {
            break;
        };
        let input = input.trim();
        if input.is_empty() {
            continue;
        }
        if matches!(input, "/exit" | "/quit") {
            break;
        }
        let options = RequestOptions {
            input: input.to_owned(),
            agent: args.agent.clone(),
            session_id: Some(session.clone()),
            mode: None,
            ..Default::default()
        };
        let handle = run::start_run(&runtime, options).await?;
        let turn = follow::follow(handle, printer.clone(), &interrupts)
            .await
            .and_then(|response| follow::finish(&response));
        last_turn = turn.map_err(|error| CliError::Silent(error.report()));
        if interrupts.terminated().is_cancelled() {
            break;
        }
    }
    if interrupts.terminated().is_cancelled() {
        last_turn = Err(CliError::Terminated);
    }
    // Leaving the chat closes the session: its `SessionEnd` hooks run.
    runtime.sessions().end(&session, "prompt_input_exit").await;
    runtime.stop_mcp().await;
    last_turn
}

/// Reads whole inputs (joining continued lines and blocks) on a thread, so the async side
/// never blocks on the terminal.
fn read_inputs() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        let mut buffer = String::new();
        let mut in_block = false;
        while let Some(Ok(line)) = lines.next() {
            if line.trim() == "\"\"\"" {
                in_block = !in_block;
                if in_block {
                    continue;
                }
            } else if in_block {
                buffer.push_str(&line);
                buffer.push('\n');
                continue;
            } else if let Some(head) = line.strip_suffix('\\') {
                buffer.push_str(head);
                buffer.push('\n');
                continue;
            } else {
                buffer.push_str(&line);
            }
            if tx.blocking_send(std::mem::take(&mut buffer)).is_err() {
                return;
            }
        }
        if !buffer.trim().is_empty() {
            let _ = tx.blocking_send(buffer);
        }
    });
    rx
}
