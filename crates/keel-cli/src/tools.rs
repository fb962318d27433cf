//! `keel tools list|describe|call|stats` and `keel tasks create|get|list|update|run|delete`:
//! tool calls made directly, through the same gateway as a model's calls.

use std::path::Path;

use clap::Subcommand;
use keel::{Runtime, TaskDecision};

use crate::error::CliError;
use crate::follow::{self, Interrupts, OutputArgs};
use crate::{out, workspace};

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// The tools an agent may call.
    List {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A tool's description and argument schema.
    Describe {
        name: String,
        #[arg(long)]
        agent: Option<String>,
    },
    /// Call a tool directly (checked by the gateway, recorded as a run).
    Call {
        name: String,
        /// The arguments as JSON; `@FILE` reads them from a file, `-` from stdin.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Usage per tool: calls, errors, repairs, blocks, latency.
    Stats {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TasksCommand {
    /// Stage a call: check it (gateway, policy, `PreToolUse` hooks) and print the task with
    /// the decision; exits 1 unless it is `allow`.
    Create {
        tool: String,
        /// The arguments as JSON; `@FILE` reads them from a file, `-` from stdin.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        agent: Option<String>,
        /// Run the `PreToolUse` hooks again when the task runs.
        #[arg(long)]
        double_check_on_run: bool,
        /// The permission mode the call is checked under, at create and when it runs:
        /// `default`, `acceptEdits`, `dontAsk` or `plan` (nothing with side effects runs);
        /// default: the agent's.
        #[arg(long)]
        mode: Option<String>,
    },
    /// Print a task.
    Get { id: String },
    /// List tasks, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Patch a task's arguments (JSON merge patch) and check it again.
    Update {
        id: String,
        /// The patch as JSON; `@FILE` reads it from a file, `-` from stdin.
        #[arg(long)]
        args: String,
    },
    /// Run an allowed task.
    Run {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a task.
    Delete { id: String },
}

pub(crate) async fn tools(root: &Path, command: ToolsCommand) -> Result<(), CliError> {
    let output = match &command {
        ToolsCommand::Call { output, .. } => output.clone(),
        _ => OutputArgs::default(),
    };
    // A call listens before anything starts: a SIGTERM meanwhile cancels it once it exists.
    let interrupts = matches!(command, ToolsCommand::Call { .. }).then(|| Interrupts::listen(true));
    let (runtime, printer) = workspace::start(root, &output).await?;
    let result = match (command, &interrupts) {
        (_, Some(interrupts)) if interrupts.terminated().is_cancelled() => {
            Err(CliError::Terminated)
        }
        (
            ToolsCommand::Call {
                name, args, agent, ..
            },
            Some(interrupts),
        ) => {
            let args = read_args(args)?;
            match runtime.tools().call(agent.as_deref(), &name, &args).await {
                Ok(handle) => follow::to_end_with(handle, printer, interrupts).await,
                Err(error) => Err(CliError::usage(error)),
            }
        }
        (command, _) => inspect(&runtime, command).await,
    };
    // MCP servers this command started end with it (a stdio server's whole process group).
    runtime.stop_mcp().await;
    result
}

/// The agent's tools once its MCP servers have answered or failed, and a line for each
/// listed server whose tools are unavailable (with why).
async fn agent_tools(
    runtime: &Runtime,
    agent: Option<&str>,
) -> Result<(Vec<keel::ToolSpec>, Vec<(String, String)>), CliError> {
    runtime.settle_mcp().await;
    let specs = runtime.tools().specs(agent).map_err(CliError::usage)?;
    let listed = runtime.tools().listed(agent).map_err(CliError::usage)?;
    let unavailable = runtime
        .mcp_servers()
        .into_iter()
        .filter(|server| server.state != keel::ServerState::Ready)
        .filter(|server| {
            listed
                .iter()
                .any(|entry| entry.starts_with(&server.tool_prefix))
        })
        .map(|server| {
            let why = server
                .last_error
                .unwrap_or_else(|| server.state.as_str().to_owned());
            (format!("{}*", server.tool_prefix), why)
        })
        .collect();
    Ok((specs, unavailable))
}

async fn inspect(runtime: &Runtime, command: ToolsCommand) -> Result<(), CliError> {
    match command {
        ToolsCommand::List { agent, json } => {
            let (specs, unavailable) = agent_tools(runtime, agent.as_deref()).await?;
            for spec in specs {
                match json {
                    true => out::line(&serde_json::to_string(&spec)?),
                    false => out::line(&format!("{:<20}  {}", spec.name, spec.description)),
                }
            }
            for (tools, why) in unavailable {
                match json {
                    true => out::line(&serde_json::to_string(
                        &serde_json::json!({ "name": tools, "unavailable": why }),
                    )?),
                    false => out::line(&format!("{tools:<20}  (unavailable: {why})")),
                }
            }
            Ok(())
        }
        ToolsCommand::Describe { name, agent } => {
            let (specs, _) = agent_tools(runtime, agent.as_deref()).await?;
            let spec = specs
                .into_iter()
                .find(|s| s.name == name)
                .ok_or_else(|| CliError::usage(format!("the agent has no tool `{name}`")))?;
            out::line(&serde_json::to_string_pretty(&spec)?);
            Ok(())
        }
        ToolsCommand::Stats { json } => {
            let stats = runtime.tools().stats().await.map_err(CliError::failed)?;
            if json {
                for s in &stats {
                    out::line(&serde_json::to_string(s)?);
                }
                return Ok(());
            }
            out::line(&format!(
                "{:<20}  {:>6}  {:>6}  {:>7}  {:>6}  {:>8}  {:>8}",
                "TOOL", "CALLS", "ERRORS", "REPAIRS", "BLOCKS", "P50 MS", "P99 MS"
            ));
            for s in &stats {
                out::line(&format!(
                    "{:<20}  {:>6}  {:>6}  {:>7}  {:>6}  {:>8}  {:>8}",
                    s.tool,
                    s.calls,
                    s.errors,
                    s.repairs,
                    s.blocks,
                    s.latency_p50_ms,
                    s.latency_p99_ms
                ));
            }
            Ok(())
        }
        ToolsCommand::Call { .. } => Ok(()),
    }
}

pub(crate) async fn tasks(root: &Path, command: TasksCommand) -> Result<(), CliError> {
    let output = match &command {
        TasksCommand::Run { output, .. } => output.clone(),
        _ => OutputArgs::default(),
    };
    let (runtime, printer) = workspace::start(root, &output).await?;
    match command {
        TasksCommand::Run { id, .. } => {
            let handle = runtime.tasks().run(&id).await.map_err(CliError::usage)?;
            follow::to_end(handle, printer).await
        }
        command => task_command(&runtime, command).await,
    }
}

/// The text of an `--args` option: the value itself, or what `@FILE` (relative to the current
/// directory) or `-` (stdin) holds — for arguments too large for a command line.
pub(crate) fn read_args(args: String) -> Result<String, CliError> {
    if args == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| CliError::usage(format!("cannot read --args from stdin: {e}")))?;
        return Ok(text);
    }
    match args.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("cannot read --args file `{path}`: {e}"))),
        None => Ok(args),
    }
}

fn print_task(task: &keel::TaskRecord) -> Result<(), CliError> {
    out::line(&serde_json::to_string_pretty(task)?);
    Ok(())
}

async fn task_command(runtime: &Runtime, command: TasksCommand) -> Result<(), CliError> {
    match command {
        TasksCommand::Create {
            tool,
            args,
            agent,
            double_check_on_run,
            mode,
        } => {
            let args = read_args(args)?;
            let task = runtime
                .tasks()
                .create(keel::TaskRequest {
                    agent,
                    tool,
                    arguments: args,
                    double_check_on_run,
                    mode: mode
                        .as_deref()
                        .map(str::parse::<keel::PermissionMode>)
                        .transpose()?,
                })
                .await
                .map_err(CliError::usage)?;
            print_task(&task)?;
            let because = task
                .reason
                .as_deref()
                .map(|reason| format!(": {reason}"))
                .unwrap_or_default();
            match task.decision {
                TaskDecision::Allow => Ok(()),
                TaskDecision::NeedsApproval => Err(CliError::failed(format!(
                    "task {} needs a human's approval when it runs{because}",
                    task.task_id
                ))),
                TaskDecision::Deny => Err(CliError::failed(format!(
                    "task {} is denied{because}",
                    task.task_id
                ))),
            }
        }
        TasksCommand::Get { id } => {
            match runtime.tasks().get(&id).await.map_err(CliError::failed)? {
                Some(task) => print_task(&task),
                None => Err(CliError::failed(format!("no task `{id}`"))),
            }
        }
        TasksCommand::List { limit } => {
            for task in runtime
                .tasks()
                .list(Some(limit))
                .await
                .map_err(CliError::failed)?
            {
                out::line(&serde_json::to_string(&task)?);
            }
            Ok(())
        }
        TasksCommand::Update { id, args } => {
            let args = read_args(args)?;
            let patch: serde_json::Value = serde_json::from_str(&args)
                .map_err(|e| CliError::usage(format!("--args is not JSON: {e}")))?;
            let task = runtime
                .tasks()
                .update(&id, &patch)
                .await
                .map_err(CliError::usage)?;
            print_task(&task)
        }
        TasksCommand::Delete { id } => {
            match runtime
                .tasks()
                .delete(&id)
                .await
                .map_err(CliError::failed)?
            {
                true => {
                    out::line(&format!("deleted task {id}"));
                    Ok(())
                }
                false => Err(CliError::failed(format!("no task `{id}`"))),
            }
        }
        TasksCommand::Run { .. } => Ok(()),
    }
}
