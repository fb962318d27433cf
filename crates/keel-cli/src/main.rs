//! The `keel` command line: set up, validate and explain workspaces, run agents, inspect runs.
//!
//! Exit codes: 0 completed, 1 failed, 2 usage or configuration error, 130 cancelled (Ctrl-C),
//! 143 cancelled (SIGTERM).
//! Output goes through [`out`]; each subcommand lives in its own module and returns
//! `Result<_, CliError>`, which [`main`] reports in one place ([`error`]). Commands open the
//! workspace through [`workspace`] and follow the runs they start through [`follow`].
//! [`logging`] sets up the log on stderr (`KEEL_LOG`, `KEEL_LOG_FORMAT`).

mod acp;
mod approvals;
mod artifacts;
mod chat;
mod config;
mod doctor;
mod error;
mod eval;
mod eval_gateway;
mod follow;
mod init;
mod logging;
mod mcp;
mod memory;
mod models;
mod out;
mod policy;
mod run;
mod runs;
mod serve;
mod sessions;
mod skills;
mod store;
mod tools;
mod trace_view;
mod usage;
mod workflows;
mod workspace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc instead of glibc's malloc: allocation was about a fifth of `keel serve`'s CPU
/// under load, and glibc's arenas keep what a burst freed (see the crate's README).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (the `_RJEM_MALLOC_CONF` environment variable
/// still overrides them): background threads give memory freed and left unused for about a
/// second back to the system, so a server that goes quiet after a burst shrinks again without
/// a request having to come.
// SAFETY: jemalloc (prefixed `_rjem_` by tikv-jemalloc-sys) declares this symbol as a weak
// `const char *` and nothing else in the program defines it.
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// jemalloc's own counts for `/metrics`: the live heap and the pages that hold it. jemalloc
/// refreshes them when the epoch advances, so each reading advances it first.
fn memory_use() -> Option<keel_server::MemoryUse> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(keel_server::MemoryUse {
        allocated: u64::try_from(stats::allocated::read().ok()?).ok()?,
        active: u64::try_from(stats::active::read().ok()?).ok()?,
    })
}

/// A C string jemalloc reads at its start.
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` C string literal, which nobody writes.
#[allow(unsafe_code)]
unsafe impl Sync for MallocConf {}

use crate::error::{CliError, EXIT_USAGE};

#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "Keel: a stable runtime for agent applications"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct WorkspaceArg {
    /// The workspace folder.
    #[arg(short = 'w', long = "workspace", default_value = ".", global = true)]
    workspace: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a workspace that runs offline on a scripted model.
    Init {
        /// Where to create it (default: the current folder).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// What to start from: the quickstart (the default), or an agent written with
        /// another framework and run by Keel (`langgraph`, `openai-agents`, `deepagents`;
        /// docs/adapters.md).
        #[arg(long, value_enum, default_value_t = init::Template::Quickstart)]
        template: init::Template,
    },
    /// Check a workspace and report every problem with its file:line:column.
    Validate(WorkspaceArg),
    /// Inspect the effective configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Run an agent once and stream the answer.
    Run(run::RunArgs),
    /// Serve the workspace over HTTP (OpenAI-compatible `/v1`, the `/api`, MCP at `/mcp`).
    Serve {
        #[command(flatten)]
        ws: WorkspaceArg,
        /// Address to listen on (default: the workspace's `server.listen`, 127.0.0.1:8642).
        #[arg(long)]
        listen: Option<String>,
    },
    /// Serve the workspace to MCP clients over stdio (its tools, agents, tasks, runs).
    Mcp {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(flatten)]
        args: mcp::McpArgs,
    },
    /// Serve an agent to a code editor over the Agent Client Protocol on stdio (Zed and
    /// others): sessions, prompts with streamed updates, permission requests, cancel.
    Acp {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(flatten)]
        args: acp::AcpArgs,
    },
    /// Chat with an agent in a session, in the terminal.
    Chat(chat::ChatArgs),
    /// Inspect, export, resume, replay, fork and prune recorded runs.
    Runs {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: runs::RunsCommand,
    },
    /// What runs used and cost, by agent, session, API key or day.
    Usage {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(flatten)]
        args: usage::UsageArgs,
    },
    /// What this machine can enforce (Landlock, seccomp, namespaces, cgroups), whether the
    /// workspace's sandbox profiles are enforceable here, its store and its MCP servers'
    /// programs; exit 1 when something it needs is missing.
    Doctor {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(flatten)]
        args: doctor::DoctorArgs,
    },
    /// Check the workspace's models: reachable, credentials accepted, streaming, tool calls.
    Models {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: models::ModelsCommand,
    },
    /// List, describe and call tools; usage statistics.
    Tools {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: tools::ToolsCommand,
    },
    /// Staged tool calls: create, inspect, update, run, delete.
    Tasks {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: tools::TasksCommand,
    },
    /// Explain how the workspace's policies decide a tool call.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Decide gated tool calls: list, show, approve, deny.
    Approvals {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: approvals::ApprovalsCommand,
    },
    /// Show stored artifacts (large tool outputs).
    Artifacts {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: artifacts::ArtifactsCommand,
    },
    /// The workspace's workflows: list, show, graph (Mermaid), run.
    Workflows {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: workflows::WorkflowsCommand,
    },
    /// The workspace's skills: list, show, validate.
    Skills {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: skills::SkillsCommand,
    },
    /// Long-term memory: list, search, add, update, rm, history, candidates, maintain,
    /// export, import, backup.
    Memory {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: memory::MemoryCommand,
    },
    /// The store: migrate, check, copy (SQLite → PostgreSQL).
    Store {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// Evaluate agents and workflows: run an `Eval` document's cases and grade them, list and
    /// show results, compare two, capture cases from recorded runs.
    Eval {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: eval::EvalCommand,
    },
    /// List, show and delete sessions.
    Sessions {
        #[command(flatten)]
        ws: WorkspaceArg,
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Which rule decides a call of TOOL with these arguments (exit 0 allow, 1 deny, 3 ask).
    Check {
        #[command(flatten)]
        ws: WorkspaceArg,
        tool: String,
        /// The arguments as JSON.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        agent: Option<String>,
        /// default, acceptEdits, dontAsk or plan.
        #[arg(long)]
        mode: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print every effective field, its value and where it came from.
    Explain(WorkspaceArg),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(match error.use_stderr() {
                true => EXIT_USAGE,
                false => 0,
            });
        }
    };
    logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let error = CliError::failed(format!("cannot start the async runtime: {error}"));
            return ExitCode::from(error.report());
        }
    };
    let result = runtime.block_on(dispatch(cli.command));
    // The runs' last spans reach the collector before the process ends (bounded: a dead
    // collector does not hold the exit).
    keel::flush_telemetry(std::time::Duration::from_secs(2));
    // Don't wait for blocking tasks (stdin readers) still parked.
    runtime.shutdown_background();
    result.unwrap_or_else(|error| ExitCode::from(error.report()))
}

/// Runs a command: `Ok` is a success's exit code (0, or `keel policy check`'s verdict).
async fn dispatch(command: Command) -> Result<ExitCode, CliError> {
    let result = match command {
        Command::Init { dir, template } => init::init(&dir, template),
        Command::Validate(ws) => config::validate(&ws.workspace),
        Command::Config {
            command: ConfigCommand::Explain(ws),
        } => config::explain(&ws.workspace),
        Command::Run(args) => run::run(args).await,
        Command::Chat(args) => chat::chat(args).await,
        Command::Serve { ws, listen } => serve::serve(&ws.workspace, listen).await,
        Command::Mcp { ws, args } => mcp::mcp(&ws.workspace, args).await,
        Command::Acp { ws, args } => acp::acp(&ws.workspace, args).await,
        Command::Runs { ws, command } => runs::runs(&ws.workspace, command).await,
        Command::Usage { ws, args } => usage::usage(&ws.workspace, args).await,
        Command::Doctor { ws, args } => doctor::doctor(&ws.workspace, args).await,
        Command::Models { ws, command } => models::models(&ws.workspace, command).await,
        Command::Tools { ws, command } => tools::tools(&ws.workspace, command).await,
        Command::Skills { ws, command } => skills::skills(&ws.workspace, command).await,
        Command::Workflows { ws, command } => workflows::workflows(&ws.workspace, command).await,
        Command::Memory { ws, command } => memory::memory(&ws.workspace, command).await,
        Command::Store { ws, command } => store::store(&ws.workspace, command).await,
        Command::Eval { ws, command } => eval::eval(&ws.workspace, command).await,
        Command::Tasks { ws, command } => tools::tasks(&ws.workspace, command).await,
        Command::Approvals { ws, command } => {
            let stores = workspace::open_store(&ws.workspace).await?;
            approvals::approvals(stores.runs.as_ref(), command).await
        }
        Command::Artifacts { ws, command } => artifacts::artifacts(&ws.workspace, command).await,
        Command::Sessions { ws, command } => {
            let stores = workspace::open_store(&ws.workspace).await?;
            sessions::sessions(&ws.workspace, stores.runs.as_ref(), command).await
        }
        Command::Policy {
            command:
                PolicyCommand::Check {
                    ws,
                    tool,
                    args,
                    agent,
                    mode,
                },
        } => {
            // The one command whose success has more than one exit code.
            let args = tools::read_args(args)?;
            let verdict = policy::check(
                &ws.workspace,
                &tool,
                &args,
                agent.as_deref(),
                mode.as_deref(),
            );
            return verdict.await;
        }
    };
    result.map(|()| ExitCode::SUCCESS)
}
