//! The server's own tools at work: each [`Control`] parses its arguments (the structs its
//! schema is generated from), asks the [`Backend`] and answers through `answer.rs`.

use keel_types::{RequestId, RunFilter, RunStatus, SessionId};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, JsonObject};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::answer::{self, invalid_arguments, record, refused};
use super::backend::{Backend, BackendError, CallContext, NewTask};
use super::catalog::{
    Control, DEFAULT_EVENTS, DEFAULT_RUNS, MAX_EVENTS, MAX_RUNS, NoArgs, RunEventsArgs,
    RunsListArgs, TaskCreateArgs, TaskIdArgs, TaskUpdateArgs,
};

/// Parses a tool's arguments (absent ones read as `{}`).
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<JsonObject>,
) -> Result<T, ErrorData> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| invalid_arguments(tool, e))
}

/// Calls one of the server's own tools.
pub(crate) async fn call(
    backend: &dyn Backend,
    control: Control,
    tool: &str,
    arguments: Option<JsonObject>,
    cx: &CallContext,
) -> Result<CallToolResult, ErrorData> {
    let answered = match control {
        Control::TaskCreate => {
            let args: TaskCreateArgs = parse(tool, arguments)?;
            let task = NewTask {
                tool: args.tool,
                arguments: Value::Object(args.arguments),
                double_check_on_run: args.double_check_on_run,
            };
            backend.create_task(task).await.map(|task| record(&task))
        }
        Control::TaskGet => {
            let args: TaskIdArgs = parse(tool, arguments)?;
            match backend.get_task(&args.task_id).await {
                Ok(Some(task)) => Ok(record(&task)),
                Ok(None) => Err(no_task(&args.task_id)),
                Err(error) => Err(error),
            }
        }
        Control::TaskUpdate => {
            let args: TaskUpdateArgs = parse(tool, arguments)?;
            let patch = Value::Object(args.patch);
            backend
                .update_task(&args.task_id, &patch)
                .await
                .map(|task| record(&task))
        }
        Control::TaskRun => {
            let args: TaskIdArgs = parse(tool, arguments)?;
            backend
                .run_task(&args.task_id, cx)
                .await
                .map(|run| Ok(answer::outcome(run)))
        }
        Control::TaskDelete => {
            let args: TaskIdArgs = parse(tool, arguments)?;
            match backend.delete_task(&args.task_id).await {
                Ok(true) => Ok(record(&json!({ "deleted": true }))),
                Ok(false) => Err(no_task(&args.task_id)),
                Err(error) => Err(error),
            }
        }
        Control::RunsList => {
            let args: RunsListArgs = parse(tool, arguments)?;
            let filter = run_filter(tool, args)?;
            backend
                .list_runs(filter)
                .await
                .map(|runs| record(&json!({ "runs": runs })))
        }
        Control::RunEvents => {
            let args: RunEventsArgs = parse(tool, arguments)?;
            return run_events(backend, tool, args).await;
        }
        Control::ApprovalsPending => {
            let _: NoArgs = parse(tool, arguments)?;
            backend
                .pending_approvals()
                .await
                .map(|approvals| record(&json!({ "approvals": approvals })))
        }
    };
    match answered {
        Ok(result) => result,
        Err(error) => refused(error),
    }
}

fn no_task(id: &str) -> BackendError {
    BackendError::Failed(format!("no task `{id}`"))
}

/// `keel__runs_list`'s arguments as a filter.
fn run_filter(tool: &str, args: RunsListArgs) -> Result<RunFilter, ErrorData> {
    let status = args
        .status
        .map(|s| s.parse::<RunStatus>())
        .transpose()
        .map_err(|e| invalid_arguments(tool, e))?;
    let session = args
        .session
        .map(|s| SessionId::parse(&s))
        .transpose()
        .map_err(|e| invalid_arguments(tool, e))?;
    let limit = bounded(tool, "limit", args.limit, DEFAULT_RUNS, MAX_RUNS)?;
    Ok(RunFilter {
        status,
        agent: args.agent,
        session,
        limit: Some(limit),
        ..RunFilter::default()
    })
}

/// A page of a run's events: `{events, nextAfter}` (`nextAfter` only when more may follow).
async fn run_events(
    backend: &dyn Backend,
    tool: &str,
    args: RunEventsArgs,
) -> Result<CallToolResult, ErrorData> {
    let limit = bounded(tool, "limit", args.limit, DEFAULT_EVENTS, MAX_EVENTS)?;
    let id = RequestId::from(args.request_id.clone());
    let events = match backend.run_events(&id, args.after.unwrap_or(0)).await {
        Ok(Some(events)) => events,
        Ok(None) => return refused(BackendError::Failed(format!("no run `{id}`"))),
        Err(error) => return refused(error),
    };
    let more = events.len() > limit;
    let page: Vec<_> = events.into_iter().take(limit).collect();
    let next_after = page.last().filter(|_| more).map(|last| last.seq);
    let mut answer = json!({ "events": page });
    if let Some(seq) = next_after {
        answer["nextAfter"] = json!(seq);
    }
    record(&answer)
}

/// A page size in `1..=max` (`default` when absent), or invalid params.
fn bounded(
    tool: &str,
    name: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<usize, ErrorData> {
    let value = value.unwrap_or(default);
    if !(1..=max).contains(&value) {
        return Err(invalid_arguments(
            tool,
            format!("`{name}` must be between 1 and {max}, not {value}"),
        ));
    }
    Ok(usize::try_from(value).unwrap_or(usize::MAX))
}
