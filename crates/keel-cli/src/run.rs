//! `keel run`: one run of an agent, the answer streamed to stdout, narration (or the selected
//! events) to stderr; `--json` prints events as JSON lines on stdout instead. Ctrl-C cancels
//! the run (exit 130), SIGTERM too (exit 143); a second signal exits at once. Following the run
//! is [`crate::follow`]'s.

use std::path::PathBuf;

use keel::{RequestOptions, RunHandle, Runtime, SessionId};
use keel_types::PermissionMode;

use crate::error::CliError;
use crate::follow::{self, Interrupts, OutputArgs};
use crate::workspace;

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
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
    /// Request metadata, `KEY=VALUE` (repeat for several); memory namespaces are rendered
    /// from it (`users/{metadata.user}`).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    meta: Vec<String>,
    /// Continue `--session` even though another principal (API key, `metadata.user`) created
    /// it; the owner overridden is recorded in the run's `runtime.request.started`. Without
    /// it such a run is refused (exit 2).
    #[arg(long, requires = "session")]
    override_session_owner: bool,
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

/// `--meta KEY=VALUE` pairs as a map; a pair without `=` or with an empty key is an error.
fn metadata(pairs: &[String]) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_owned(), value.to_owned()))
            }
            _ => Err(CliError::usage(format!(
                "--meta `{pair}`: write KEY=VALUE, e.g. --meta user=alice"
            ))),
        })
        .collect()
}

pub(crate) async fn run(args: RunArgs) -> Result<(), CliError> {
    let session = args.session.as_deref().map(SessionId::parse).transpose()?;
    let mode = args
        .mode
        .as_deref()
        .map(str::parse::<PermissionMode>)
        .transpose()?;
    // Listening before anything starts: a SIGTERM meanwhile cancels the run once it exists.
    let interrupts = Interrupts::listen(true);
    let (runtime, printer) = workspace::start(&args.workspace, &args.output).await?;
    if interrupts.terminated().is_cancelled() {
        runtime.stop_mcp().await;
        return Err(CliError::Terminated);
    }
    let options = RequestOptions {
        input: args.prompt.join(" "),
        agent: args.agent.clone(),
        session_id: session,
        mode,
        metadata: metadata(&args.meta)?,
        override_session_owner: args.override_session_owner,
        ..Default::default()
    };
    let handle = start_run(&runtime, options).await?;
    let interactive = !args.no_approve_here
        && (args.approve_here || std::io::IsTerminal::is_terminal(&std::io::stdin()));
    let printer = match interactive {
        true => printer.with_approver(runtime.clone()),
        false => printer,
    };
    let result = follow::to_end_with(handle, printer, &interrupts).await;
    // The MCP servers this run started end with it (a stdio server's whole process group).
    runtime.stop_mcp().await;
    result
}

/// Starts a run of an agent; what the runtime refuses (an unknown agent, …) is a usage error.
pub(crate) async fn start_run(
    runtime: &Runtime,
    options: RequestOptions,
) -> Result<RunHandle, CliError> {
    runtime.request(options).await.map_err(CliError::usage)
}
