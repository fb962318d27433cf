//! `keel runs`: inspect recorded runs straight from the store (so that works even when the
//! workspace's configuration is broken), export them, resume, replay and fork them, and prune
//! old ones.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use keel::{RequestId, RunStatus, RunStore, SessionId, Workspace};
use keel_store::MirrorStatus;
use keel_types::RunFilter;

use crate::error::{CliError, EXIT_FAILED};
use crate::follow::{self, OutputArgs};
use crate::out;
use crate::workspace::{self, open_store};

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
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
        /// The run and every run it started (subagents, workflow nodes), as a tree.
        #[arg(long)]
        tree: bool,
        /// The run's spans (and those of the runs it started) as a waterfall: model rounds,
        /// tool calls, hooks, approval waits, with durations, tokens and decisions
        /// (`docs/observability.md`); with `--json`, the spans themselves.
        #[arg(long, conflicts_with = "tree")]
        trace: bool,
    },
    /// Print one run's events in order.
    Events {
        id: String,
        /// Raw JSON lines (the export format).
        #[arg(long)]
        json: bool,
        /// Keep printing events as they are stored (by any process) until the run ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Write a run's events as JSON lines (from the store), to stdout or a file; or, with
    /// `--cassette`, its model exchanges as a cassette for `provider: replay`.
    Export {
        id: String,
        #[arg(long, short = 'o', conflicts_with = "cassette")]
        output: Option<PathBuf>,
        /// Write the run's model exchanges (each request's digest and the answer, streamed
        /// chunks as they came) to this file, for a `Model` with `provider: replay`.
        #[arg(long, value_name = "FILE")]
        cassette: Option<PathBuf>,
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

pub(crate) async fn runs(root: &Path, command: RunsCommand) -> Result<(), CliError> {
    match command {
        RunsCommand::Resume { id, output } => resume(root, &id, &output).await,
        RunsCommand::Replay { id, output } => replay(root, &id, &output).await,
        RunsCommand::Fork { id, at, output } => fork(root, &id, at, &output).await,
        RunsCommand::Prune { older_than } => prune(root, older_than).await,
        command => {
            let stores = open_store(root).await?;
            // Keel starting here is Keel starting: runs of dead processes are interrupted
            // (on a shared store, the replicas take over runs of expired leases instead).
            if stores.sqlite.is_some()
                && let Err(error) = stores.runs.recover().await
            {
                out::status(&format!(
                    "warning: could not recover interrupted runs: {error}"
                ));
            }
            inspect(&stores, command).await
        }
    }
}

async fn inspect(stores: &workspace::Stores, command: RunsCommand) -> Result<(), CliError> {
    let store = stores.runs.as_ref();
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
                status: status.as_deref().map(str::parse::<RunStatus>).transpose()?,
                agent,
                session: session.as_deref().map(SessionId::parse).transpose()?,
                since: since.as_deref().map(parse_since).transpose()?,
                limit: Some(limit),
                ..Default::default()
            };
            list(store, &filter, json).await
        }
        RunsCommand::Show {
            id,
            json,
            trace: true,
            ..
        } => crate::trace_view::show(store, &RequestId::from(id), json).await,
        RunsCommand::Show {
            id,
            json,
            tree: true,
            ..
        } => tree(store, &RequestId::from(id), json).await,
        RunsCommand::Show { id, json, .. } => {
            show(store, stores.sqlite.as_ref(), &RequestId::from(id), json).await
        }
        RunsCommand::Events { id, json, follow } => {
            events(store, &RequestId::from(id), json, follow).await
        }
        RunsCommand::Export {
            id,
            output,
            cassette: None,
        } => export(store, &RequestId::from(id), output).await,
        RunsCommand::Export {
            id,
            cassette: Some(file),
            ..
        } => export_cassette(store, &RequestId::from(id), &file).await,
        _ => Ok(()),
    }
}

async fn resume(root: &Path, id: &str, output: &OutputArgs) -> Result<(), CliError> {
    let (runtime, printer) = workspace::start(root, output).await?;
    let handle = runtime
        .resume(&RequestId::from(id))
        .await
        .map_err(CliError::usage)?;
    follow::to_end(handle, printer).await
}

async fn fork(root: &Path, id: &str, at: u64, output: &OutputArgs) -> Result<(), CliError> {
    let (runtime, printer) = workspace::start(root, output).await?;
    let handle = runtime
        .fork(&RequestId::from(id), at)
        .await
        .map_err(CliError::usage)?;
    out::status(&format!(
        "» Fork {} of {id} at event {at}.",
        handle.request_id()
    ));
    follow::to_end(handle, printer).await
}

/// Replays a run and says whether the replay matches it; a divergence fails the command.
async fn replay(root: &Path, id: &str, output: &OutputArgs) -> Result<(), CliError> {
    let (runtime, printer) = workspace::start(root, output).await?;
    let original = RequestId::from(id);
    let handle = runtime.replay(&original).await.map_err(CliError::usage)?;
    let replayed = handle.request_id().clone();
    let ended = follow::to_end(handle, printer).await;
    let divergence = match runtime.runs().divergence(&original, &replayed).await {
        Ok(divergence) => divergence,
        Err(error) => return ended.and(Err(CliError::failed(error))),
    };
    // The run's own failure, if any, is reported after what the comparison found.
    match divergence {
        None => {
            out::status(&format!(
                "» Replay {replayed} matches {original} event for event."
            ));
            ended
        }
        Some(divergence) => {
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
            ended.and(Err(CliError::Silent(EXIT_FAILED)))
        }
    }
}

async fn prune(root: &Path, older_than: Option<String>) -> Result<(), CliError> {
    let age = match older_than {
        Some(text) => humantime::parse_duration(&text)
            .map_err(|e| CliError::usage(format!("invalid --older-than `{text}`: {e}")))?,
        None => {
            Workspace::load(root)
                .map_err(|e| CliError::usage(format!("cannot read store.retention: {e}")))?
                .runtime
                .store
                .retention
                .0
        }
    };
    let stores = open_store(root).await?;
    let store = stores.runs.as_ref();
    let before = keel_types::time_before(age);
    let deleted = store.prune(&before).await?;
    out::line(&format!(
        "deleted {deleted} ended run(s) started before {before}"
    ));
    Ok(())
}

async fn export(
    store: &dyn RunStore,
    id: &RequestId,
    output: Option<PathBuf>,
) -> Result<(), CliError> {
    if store.get_run(id).await?.is_none() {
        return Err(CliError::failed(format!("no run `{id}`")));
    }
    let events = store.events(id, 0).await?;
    let mut text = String::new();
    for event in &events {
        text.push_str(&serde_json::to_string(event)?);
        text.push('\n');
    }
    match output {
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?,
        None => out::stdout_raw(&text),
    }
    Ok(())
}

/// `keel runs export ID --cassette FILE`: the run's model exchanges, for `provider: replay`.
async fn export_cassette(
    store: &dyn RunStore,
    id: &RequestId,
    file: &std::path::Path,
) -> Result<(), CliError> {
    let Some(run) = store.get_run(id).await? else {
        return Err(CliError::failed(format!("no run `{id}`")));
    };
    if !run.status.is_terminal() {
        return Err(CliError::failed(format!(
            "run `{id}` is {}: export its cassette once it has ended",
            run.status.as_str()
        )));
    }
    let events = store.events(id, 0).await?;
    let mut cassette = keel_types::cassette::Cassette::from_events(&events);
    if cassette.exchanges.is_empty() {
        return Err(CliError::failed(format!(
            "run `{id}` asked no model anything: there is nothing to record"
        )));
    }
    cassette.agent = Some(run.agent.clone());
    let mut text = serde_json::to_string_pretty(&cassette)?;
    text.push('\n');
    std::fs::write(file, text)
        .map_err(|e| CliError::failed(format!("cannot write {}: {e}", file.display())))?;
    out::line(&format!(
        "wrote {} model exchange(s) of run `{id}` (agent `{}`) to {}",
        cassette.exchanges.len(),
        run.agent,
        file.display()
    ));
    Ok(())
}

/// `--since`: a duration before now, or an RFC 3339 time as is.
pub(crate) fn parse_since(text: &str) -> Result<String, CliError> {
    if let Ok(age) = humantime::parse_duration(text) {
        return Ok(keel_types::time_before(age));
    }
    if text.len() >= 10 && text.as_bytes().get(4) == Some(&b'-') {
        return Ok(text.to_owned());
    }
    Err(CliError::usage(format!(
        "invalid --since `{text}`: give a duration like 2h or 7d, or an RFC 3339 time"
    )))
}

async fn list(store: &dyn RunStore, filter: &RunFilter, json: bool) -> Result<(), CliError> {
    let runs = store.list_runs(filter).await?;
    if json {
        for run in &runs {
            out::line(&serde_json::to_string(run)?);
        }
        return Ok(());
    }
    let rows = runs.iter().map(|run| {
        vec![
            run.request_id.to_string(),
            run.status.as_str().to_owned(),
            run.agent.clone(),
            run.steps.to_string(),
            run.started_at.clone(),
            keel_types::one_line(&run.input, 50),
        ]
    });
    for line in out::table(
        &["ID", "STATUS", "AGENT", "STEPS", "STARTED", "INPUT"],
        &[3],
        rows,
    ) {
        out::line(&line);
    }
    Ok(())
}

/// `runs show --tree`: the run and its descendants, one line each, indented by depth.
async fn tree(store: &dyn RunStore, id: &RequestId, json: bool) -> Result<(), CliError> {
    let tree = keel::run_tree(store, id)
        .await?
        .ok_or_else(|| CliError::failed(format!("no run `{id}`")))?;
    if json {
        out::line(&serde_json::to_string_pretty(&tree)?);
        return Ok(());
    }
    fn print(node: &keel::RunTree, depth: usize) {
        let run = &node.run;
        let call = run
            .links
            .parent_call
            .as_deref()
            .map(|c| format!("  ({c})"))
            .unwrap_or_default();
        out::line(&format!(
            "{}{}  {}  {}  {} tokens{call}",
            "  ".repeat(depth),
            run.request_id,
            run.agent,
            run.status.as_str(),
            run.usage.total_tokens
        ));
        for child in &node.children {
            print(child, depth + 1);
        }
    }
    print(&tree, 0);
    Ok(())
}

async fn show(
    store: &dyn RunStore,
    sqlite: Option<&keel_store::SqliteStore>,
    id: &RequestId,
    json: bool,
) -> Result<(), CliError> {
    let run = store
        .get_run(id)
        .await?
        .ok_or_else(|| CliError::failed(format!("no run `{id}`")))?;
    if json {
        out::line(&serde_json::to_string_pretty(&run)?);
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
            serde_json::to_string(&reason)?.trim_matches('"')
        ));
    }
    out::line(&format!("steps:     {}", run.steps));
    out::line(&format!(
        "tokens:    {} ({} prompt, {} completion)",
        run.usage.total_tokens, run.usage.prompt_tokens, run.usage.completion_tokens
    ));
    out::line(&format!("events:    {}", run.event_count));
    if let Some(trace) = &run.trace {
        out::line(&format!(
            "trace:     {} (`keel runs show {id} --trace`)",
            trace.trace_id
        ));
    }
    if let Some(sqlite) = sqlite {
        let mirror = match sqlite.verify_mirror(id) {
            Ok(MirrorStatus::Shared) => format!(
                "in the shared event log, {} (`keel runs export {id}` for this run alone)",
                sqlite
                    .log_dir()
                    .map_or_else(String::new, |d| d.display().to_string())
            ),
            Ok(MirrorStatus::InSync { .. }) => "in sync with the store".to_owned(),
            Ok(MirrorStatus::Behind {
                mirrored, stored, ..
            }) => {
                format!("{mirrored} of {stored} events (repaired when Keel next recovers this run)")
            }
            Err(error) => format!("{error} (left as is; `keel runs export` writes from the store)"),
        };
        out::line(&format!("mirror:    {mirror}"));
    }
    out::line(&format!("input:     {}", run.input));
    if let Some(output) = &run.output {
        out::line(&format!("output:    {output}"));
    }
    if let Some(parent) = &run.links.parent_id {
        let call = run.links.parent_call.as_deref().unwrap_or("?");
        out::line(&format!("parent:    {parent} ({call})"));
    }
    if let Some(error) = &run.error {
        out::line(&format!(
            "error:     {} ({})",
            error.message,
            serde_json::to_string(&error.code)?.trim_matches('"')
        ));
    }
    Ok(())
}

/// How often `--follow` looks for new events.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(100);

async fn events(
    store: &dyn RunStore,
    id: &RequestId,
    json: bool,
    follow: bool,
) -> Result<(), CliError> {
    let mut last = 0;
    loop {
        let events = store.events(id, last).await?;
        for event in &events {
            if json {
                out::line(&serde_json::to_string(event)?);
            } else {
                out::line(&format!(
                    "{:>4}  {}  {:<34}  {}",
                    event.seq,
                    event.ts,
                    event.type_name(),
                    keel::Narrator::summary(event)
                ));
            }
            last = event.seq;
        }
        if !follow || events.last().is_some_and(|e| e.payload.is_final()) {
            return Ok(());
        }
        if events.is_empty() {
            // Nothing new: stop once the run has ended (a crash leaves no final event).
            let run = store
                .get_run(id)
                .await?
                .ok_or_else(|| CliError::failed(format!("no run `{id}`")))?;
            if run.status.is_terminal() && store.events(id, last).await?.is_empty() {
                return Ok(());
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }
}
