//! `keel runs`: inspect recorded runs straight from the store (so that works even when the
//! workspace's configuration is broken), export them, resume, replay and fork them, and prune
//! old ones.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use keel::types::{AdapterEvent, RunFilter};
use keel::{Event, EventPayload, RequestId, RunStatus, RunStore, SessionId};
use keel_store::{MirrorStatus, SqliteStore};

use crate::run::{self, Interrupts, OutputArgs};
use crate::{EXIT_FAILED, EXIT_USAGE, config, out};

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs with this status (completed, failed, cancelled, interrupted, running…).
        #[arg(long)]
        status: Option<String>,
        /// Only runs of this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only runs of this session.
        #[arg(long)]
        session: Option<String>,
        /// Only runs started since: a duration (`2h`, `7d`) or an RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one run's record.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print one run's events in order.
    Events {
        id: String,
        /// Raw JSON lines (the export format).
        #[arg(long)]
        json: bool,
    },
    /// Write a run's events as JSON lines (from the store), to stdout or a file.
    Export {
        id: String,
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Continue an interrupted run from its log.
    Resume {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Re-execute a run with the model answers from its log, and report where it diverges.
    Replay {
        id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Start a new run from a copy of a run's first events.
    Fork {
        id: String,
        /// The last event (seq) to take from the original.
        #[arg(long)]
        at: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete ended runs older than a duration (default: the workspace's store.retention).
    Prune {
        /// e.g. `30d`, `12h`.
        #[arg(long)]
        older_than: Option<String>,
    },
}

/// Opens the workspace's store without loading its configuration, so inspection works even
/// when the configuration is broken.
pub fn open_store(root: &Path) -> Result<SqliteStore, (u8, String)> {
    if !root.join("config").is_dir() {
        return Err((
            EXIT_USAGE,
            format!(
                "{} is not a Keel workspace (no config/ folder)",
                root.display()
            ),
        ));
    }
    SqliteStore::open(root).map_err(failed)
}

pub async fn runs(root: &Path, command: RunsCommand) -> u8 {
    let result = match command {
        RunsCommand::Resume { id, output } => return resume(root, &id, &output).await,
        RunsCommand::Replay { id, output } => return replay(root, &id, &output).await,
        RunsCommand::Fork { id, at, output } => return fork(root, &id, at, &output).await,
        RunsCommand::Prune { older_than } => prune(root, older_than).await,
        command => match open_store(root) {
            Ok(store) => {
                // Keel starting here is Keel starting: runs of dead processes are interrupted.
                if let Err(error) = store.recover().await {
                    out::status(&format!(
                        "warning: could not recover interrupted runs: {error}"
                    ));
                }
                inspect(&store, command).await
            }
            Err(error) => Err(error),
        },
    };
    report(result)
}

/// Exit code of a command result, printing its error.
pub fn report(result: CmdResult) -> u8 {
    match result {
        Ok(()) => 0,
        Err((code, message)) => {
            out::error(&message);
            code
        }
    }
}

async fn inspect(store: &SqliteStore, command: RunsCommand) -> CmdResult {
    match command {
        RunsCommand::List {
            status,
            agent,
            session,
            since,
            limit,
            json,
        } => {
            let filter = RunFilter {
                status: status.as_deref().map(parse_status).transpose()?,
                agent,
                session: session.map(SessionId::from),
                since: since.as_deref().map(parse_since).transpose()?,
                limit: Some(limit),
                ..Default::default()
            };
            list(store, &filter, json).await
        }
        RunsCommand::Show { id, json } => show(store, &RequestId::from(id), json).await,
        RunsCommand::Events { id, json } => events(store, &RequestId::from(id), json).await,
        RunsCommand::Export { id, output } => export(store, &RequestId::from(id), output).await,
        _ => Ok(()),
    }
}

async fn resume(root: &Path, id: &str, output: &OutputArgs) -> u8 {
    let (runtime, printer) = match run::start(root, output).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    match runtime.resume(&RequestId::from(id)).await {
        Ok(handle) => {
            let interrupts = Interrupts::listen(true);
            run::finish(run::follow(handle, printer, &interrupts).await)
        }
        Err(error) => report(Err((EXIT_USAGE, error.to_string()))),
    }
}

async fn fork(root: &Path, id: &str, at: u64, output: &OutputArgs) -> u8 {
    let (runtime, printer) = match run::start(root, output).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    match runtime.fork(&RequestId::from(id), at).await {
        Ok(handle) => {
            out::status(&format!(
                "» Fork {} of {id} at event {at}.",
                handle.request_id()
            ));
            let interrupts = Interrupts::listen(true);
            run::finish(run::follow(handle, printer, &interrupts).await)
        }
        Err(error) => report(Err((EXIT_USAGE, error.to_string()))),
    }
}

async fn replay(root: &Path, id: &str, output: &OutputArgs) -> u8 {
    let (runtime, printer) = match run::start(root, output).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let original = RequestId::from(id);
    let handle = match runtime.replay(&original).await {
        Ok(handle) => handle,
        Err(error) => return report(Err((EXIT_USAGE, error.to_string()))),
    };
    let replayed = handle.request_id().clone();
    let interrupts = Interrupts::listen(true);
    let code = run::finish(run::follow(handle, printer, &interrupts).await);
    match runtime.divergence(&original, &replayed).await {
        Ok(None) => {
            out::status(&format!(
                "» Replay {replayed} matches {original} event for event."
            ));
            code
        }
        Ok(Some(divergence)) => {
            out::status(&format!(
                "» Replay {replayed} diverges from {original} at event {}:\n  expected: {}\n  found:    {}",
                divergence.seq,
                divergence
                    .expected
                    .map_or("(nothing)".into(), |v| v.to_string()),
                divergence
                    .found
                    .map_or("(nothing)".into(), |v| v.to_string()),
            ));
            EXIT_FAILED
        }
        Err(error) => report(Err(failed(error))),
    }
}

async fn prune(root: &Path, older_than: Option<String>) -> CmdResult {
    let age = match older_than {
        Some(text) => humantime::parse_duration(&text)
            .map_err(|e| (EXIT_USAGE, format!("invalid --older-than `{text}`: {e}")))?,
        None => {
            config::load(root)
                .map_err(|code| (code, "cannot read store.retention".to_owned()))?
                .runtime
                .store
                .retention
                .0
        }
    };
    let store = open_store(root)?;
    let before = keel::types::time_before(age);
    let deleted = store.prune(&before).await.map_err(failed)?;
    out::line(&format!(
        "deleted {deleted} ended run(s) started before {before}"
    ));
    Ok(())
}

async fn export(store: &SqliteStore, id: &RequestId, output: Option<PathBuf>) -> CmdResult {
    if store.get_run(id).await.map_err(failed)?.is_none() {
        return Err(failed(format!("no run `{id}`")));
    }
    let events = store.events(id, 0).await.map_err(failed)?;
    let mut text = String::new();
    for event in &events {
        text.push_str(&serde_json::to_string(event).map_err(failed)?);
        text.push('\n');
    }
    match output {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?,
        None => out::stdout_raw(&text),
    }
    Ok(())
}

/// `--since`: a duration before now, or an RFC 3339 time as is.
fn parse_since(text: &str) -> Result<String, (u8, String)> {
    if let Ok(age) = humantime::parse_duration(text) {
        return Ok(keel::types::time_before(age));
    }
    if text.len() >= 10 && text.as_bytes().get(4) == Some(&b'-') {
        return Ok(text.to_owned());
    }
    Err((
        EXIT_USAGE,
        format!("invalid --since `{text}`: give a duration like 2h or 7d, or an RFC 3339 time"),
    ))
}

/// A command's outcome: `Err` carries the exit code and the message.
pub type CmdResult = Result<(), (u8, String)>;

/// A failure (exit 1) with its message.
pub fn failed(error: impl ToString) -> (u8, String) {
    (EXIT_FAILED, error.to_string())
}

fn parse_status(text: &str) -> Result<RunStatus, (u8, String)> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        (
            EXIT_USAGE,
            format!(
                "unknown status `{text}` (one of: queued, running, waiting_approval, completed, failed, cancelled, interrupted)"
            ),
        )
    })
}

async fn list(store: &SqliteStore, filter: &RunFilter, json: bool) -> CmdResult {
    let runs = store.list_runs(filter).await.map_err(failed)?;
    if json {
        for run in &runs {
            out::line(&serde_json::to_string(run).map_err(failed)?);
        }
        return Ok(());
    }
    out::line(&format!(
        "{:<36}  {:<11}  {:<14}  {:>5}  {:<24}  INPUT",
        "ID", "STATUS", "AGENT", "STEPS", "STARTED"
    ));
    for run in &runs {
        out::line(&format!(
            "{:<36}  {:<11}  {:<14}  {:>5}  {:<24}  {}",
            run.request_id,
            run.status.as_str(),
            run.agent,
            run.steps,
            run.started_at,
            one_line(&run.input, 50)
        ));
    }
    Ok(())
}

async fn show(store: &SqliteStore, id: &RequestId, json: bool) -> CmdResult {
    let run = store
        .get_run(id)
        .await
        .map_err(failed)?
        .ok_or_else(|| failed(format!("no run `{id}`")))?;
    if json {
        out::line(&serde_json::to_string_pretty(&run).map_err(failed)?);
        return Ok(());
    }
    out::line(&format!("id:        {}", run.request_id));
    out::line(&format!("status:    {}", run.status.as_str()));
    out::line(&format!("agent:     {}", run.agent));
    if let Some(session) = &run.session_id {
        out::line(&format!("session:   {session}"));
    }
    out::line(&format!("started:   {}", run.started_at));
    if let Some(ended) = &run.ended_at {
        out::line(&format!("ended:     {ended}"));
    }
    if let Some(reason) = run.finish_reason {
        out::line(&format!(
            "finish:    {}",
            serde_json::to_string(&reason)
                .map_err(failed)?
                .trim_matches('"')
        ));
    }
    out::line(&format!("steps:     {}", run.steps));
    out::line(&format!(
        "tokens:    {} ({} prompt, {} completion)",
        run.usage.total_tokens, run.usage.prompt_tokens, run.usage.completion_tokens
    ));
    out::line(&format!("events:    {}", run.event_count));
    let mirror = match store.verify_mirror(id) {
        Ok(MirrorStatus::InSync { .. }) => "in sync with the store".to_owned(),
        Ok(MirrorStatus::Behind {
            mirrored, stored, ..
        }) => format!("{mirrored} of {stored} events (repaired when Keel next recovers this run)"),
        Err(error) => format!("{error} (left as is; `keel runs export` writes from the store)"),
    };
    out::line(&format!("mirror:    {mirror}"));
    out::line(&format!("input:     {}", run.input));
    if let Some(output) = &run.output {
        out::line(&format!("output:    {output}"));
    }
    if let Some(error) = &run.error {
        out::line(&format!(
            "error:     {} ({})",
            error.message,
            serde_json::to_string(&error.code)
                .map_err(failed)?
                .trim_matches('"')
        ));
    }
    Ok(())
}

async fn events(store: &SqliteStore, id: &RequestId, json: bool) -> CmdResult {
    let events = store.events(id, 0).await.map_err(failed)?;
    for event in &events {
        if json {
            out::line(&serde_json::to_string(event).map_err(failed)?);
        } else {
            out::line(&format!(
                "{:>4}  {}  {:<34}  {}",
                event.seq,
                event.ts,
                event.type_name(),
                summary(event)
            ));
        }
    }
    Ok(())
}

/// A short description of an event for the table view.
fn summary(event: &Event) -> String {
    let text = match &event.payload {
        EventPayload::RequestStarted { input, .. } => format!("input={input:?}"),
        EventPayload::RequestCompleted {
            steps,
            usage,
            duration_ms,
            ..
        } => {
            format!(
                "steps={steps} tokens={} {duration_ms}ms",
                usage.total_tokens
            )
        }
        EventPayload::RequestFailed { error, .. } => error.message.clone(),
        EventPayload::RequestCancelled { reason, .. }
        | EventPayload::RequestInterrupted { reason, .. } => reason.clone(),
        EventPayload::RequestResumed {
            reissued_round,
            rerun_calls,
            abandoned_calls,
        } => format!(
            "reissued_round={reissued_round} rerun={} abandoned={}",
            rerun_calls.join(","),
            abandoned_calls.join(",")
        ),
        EventPayload::RequestForked {
            from_request_id,
            at_seq,
        } => format!("from={from_request_id} at={at_seq}"),
        EventPayload::ContractFailed { missing_tools } => {
            format!("missing={}", missing_tools.join(","))
        }
        EventPayload::ModelStarted {
            step,
            attempt,
            model,
            ..
        } => {
            format!("step={step} attempt={attempt} model={model}")
        }
        EventPayload::ModelCompleted {
            step,
            stop_reason,
            tool_calls,
            usage,
            latency_ms,
            ..
        } => format!(
            "step={step} stop={stop_reason:?} tool_calls={} tokens={} {latency_ms}ms",
            tool_calls.len(),
            usage.total_tokens
        ),
        EventPayload::ModelRetry {
            attempt,
            error,
            delay_ms,
            ..
        } => {
            format!("attempt={attempt} delay={delay_ms}ms {}", error.message)
        }
        EventPayload::ToolGuard {
            tool,
            decision,
            issues,
            ..
        } => {
            format!("{tool} {decision:?} issues={}", issues.len())
        }
        EventPayload::Adapter { event } => match event {
            AdapterEvent::OutputDelta { text, .. } => format!("agent.output.delta {text:?}"),
            AdapterEvent::ToolStart {
                tool, arguments, ..
            } => format!("agent.tool.start {tool} {arguments}"),
            AdapterEvent::ToolResult {
                tool,
                ok,
                duration_ms,
                ..
            } => {
                format!("agent.tool.result {tool} ok={ok} {duration_ms}ms")
            }
        },
        EventPayload::Narration { text, .. } => text.clone(),
        EventPayload::ApprovalRequested { approval } => {
            format!(
                "{} {} {}",
                approval.approval_id, approval.tool, approval.arguments
            )
        }
        EventPayload::ApprovalResolved {
            approval_id,
            status,
            decided_by,
            ..
        } => format!(
            "{approval_id} {} by {}",
            status.as_str(),
            decided_by.as_deref().unwrap_or("-")
        ),
        EventPayload::PolicyDecided {
            tool,
            decision,
            source,
            ..
        } => format!("{decision} {tool} ({source})"),
        EventPayload::HookCompleted {
            hook,
            event,
            outcome,
            ..
        } => format!("{hook} {event} {outcome}"),
        EventPayload::HookFailed {
            hook, event, error, ..
        } => format!("{hook} {event} {error}"),
        EventPayload::DirectStarted {
            tool, arguments, ..
        } => format!("{tool} {arguments}"),
        EventPayload::DirectCompleted {
            tool,
            ok,
            duration_ms,
            ..
        } => format!("{tool} ok={ok} {duration_ms}ms"),
        EventPayload::ArtifactCreated { artifact, .. } => {
            format!(
                "{} {} bytes {}",
                artifact.uri, artifact.bytes, artifact.name
            )
        }
    };
    one_line(&text, 100)
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}
