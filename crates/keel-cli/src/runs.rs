//! `keel runs list|show|events`: read recorded runs straight from the store, so they work even
//! when the workspace's configuration is currently broken.

use std::path::Path;

use clap::Subcommand;
use keel::types::{AdapterEvent, RunFilter};
use keel::{Event, EventPayload, RequestId, RunStatus, RunStore};
use keel_store::JsonlStore;

use crate::{EXIT_FAILED, EXIT_USAGE, out};

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs with this status (completed, failed, cancelled, running…).
        #[arg(long)]
        status: Option<String>,
        /// Only runs of this agent.
        #[arg(long)]
        agent: Option<String>,
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
}

pub async fn runs(root: &Path, command: RunsCommand) -> u8 {
    if !root.join("config").is_dir() {
        out::error(&format!(
            "{} is not a Keel workspace (no config/ folder)",
            root.display()
        ));
        return EXIT_USAGE;
    }
    let store = match JsonlStore::open(root) {
        Ok(store) => store,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_FAILED;
        }
    };
    let result = match command {
        RunsCommand::List {
            status,
            agent,
            limit,
            json,
        } => list(&store, status, agent, limit, json).await,
        RunsCommand::Show { id, json } => show(&store, &RequestId::from(id), json).await,
        RunsCommand::Events { id, json } => events(&store, &RequestId::from(id), json).await,
    };
    match result {
        Ok(()) => 0,
        Err((code, message)) => {
            out::error(&message);
            code
        }
    }
}

type CmdResult = Result<(), (u8, String)>;

fn failed(error: impl ToString) -> (u8, String) {
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

async fn list(
    store: &JsonlStore,
    status: Option<String>,
    agent: Option<String>,
    limit: usize,
    json: bool,
) -> CmdResult {
    let filter = RunFilter {
        status: status.as_deref().map(parse_status).transpose()?,
        agent,
        session: None,
        since: None,
        limit: Some(limit),
    };
    let runs = store.list_runs(&filter).await.map_err(failed)?;
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

async fn show(store: &JsonlStore, id: &RequestId, json: bool) -> CmdResult {
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

async fn events(store: &JsonlStore, id: &RequestId, json: bool) -> CmdResult {
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
        EventPayload::RequestStarted { input } => format!("input={input:?}"),
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
        EventPayload::RequestCancelled { reason, .. } => reason.clone(),
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
