//! Tasks (staged tool calls) under `/api/tasks` and direct tool calls under `/api/tools`.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::{PermissionMode, TaskRecord, TaskRequest};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{internal, parse_body, parse_query};
use crate::error::runtime_error;
use crate::requests::answer_started;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
struct LimitQuery {
    #[serde(default)]
    limit: Option<usize>,
}

/// Tool arguments as sent: a JSON object, or a string holding one (as models send them).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NewTask {
    tool: String,
    #[serde(default = "empty_object")]
    arguments: Value,
    #[serde(default)]
    agent: Option<String>,
    /// Run the `PreToolUse` hooks again when the task runs (their answers at create stand
    /// otherwise).
    #[serde(default)]
    double_check_on_run: bool,
    /// The permission mode the call is checked under, at create and when it runs
    /// (`default`, `acceptEdits`, `dontAsk`, `plan`); default: the agent's.
    #[serde(default)]
    mode: Option<PermissionMode>,
}

fn empty_object() -> Value {
    json!({})
}

/// `GET /api/tasks?limit=` → `{data: [TaskRecord…]}`, newest first.
pub(crate) async fn list_tasks(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: LimitQuery = parse_query(query.as_deref())?;
    let tasks = state
        .runtime
        .tasks()
        .list(query.limit)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "data": tasks })))
}

/// `POST /api/tasks` (`{tool, arguments, agent?, doubleCheckOnRun?, mode?}`) → 201 and the
/// TaskRecord with the whole guard's decision — gateway, policy and `PreToolUse` hooks:
/// `allow | deny | needs_approval`, with `issues`, `reason` and each hook's answer in `hooks`.
pub(crate) async fn create_task(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let task: NewTask = parse_body(body, false)?;
    let record = state
        .runtime
        .tasks()
        .create(TaskRequest {
            agent: task.agent,
            arguments: arguments_text(&task.arguments),
            tool: task.tool,
            double_check_on_run: task.double_check_on_run,
            mode: task.mode,
        })
        .await
        .map_err(runtime_error)?;
    Ok((StatusCode::CREATED, Json(record)).into_response())
}

/// `GET /api/tasks/{id}` → the TaskRecord.
pub(crate) async fn get_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskRecord>, ApiError> {
    let task = state
        .runtime
        .tasks()
        .get(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no task `{id}`")))?;
    Ok(Json(task))
}

/// `PATCH /api/tasks/{id}` with a JSON merge patch of the arguments → the TaskRecord, checked
/// again.
pub(crate) async fn update_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<TaskRecord>, ApiError> {
    let patch: Value = parse_body(body, false)?;
    if !patch.is_object() {
        return Err(ApiError::BadRequest {
            message: "the body must be a JSON merge patch object of the task's arguments".into(),
            param: None,
        });
    }
    let record = state
        .runtime
        .tasks()
        .update(&id, &patch)
        .await
        .map_err(runtime_error)?;
    Ok(Json(record))
}

/// `DELETE /api/tasks/{id}` → `{deleted: true}`; 404 if there is none.
pub(crate) async fn delete_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if state.runtime.tasks().delete(&id).await.map_err(internal)? {
        Ok(Json(json!({ "deleted": true })))
    } else {
        Err(ApiError::ResourceNotFound(format!("no task `{id}`")))
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunBody {
    /// Answer when the run has ended (default) or at once with 202 `{requestId}`.
    #[serde(default)]
    wait: Option<bool>,
}

/// `POST /api/tasks/{id}/run` (`{wait?}`) → the run's `RunResponse` (or 202 `{requestId}`).
/// A task the gateway blocked, or one that already ran, answers 400.
pub(crate) async fn run_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let run: RunBody = parse_body(body, true)?;
    let ticket = state.admission.admit()?;
    let handle = state
        .runtime
        .tasks()
        .run(&id)
        .await
        .map_err(runtime_error)?;
    answer_started(handle, ticket, run.wait.unwrap_or(true)).await
}

#[derive(Debug, Deserialize)]
struct ToolsQuery {
    #[serde(default)]
    agent: Option<String>,
}

/// `GET /api/tools?agent=` → `{data: [ToolSpec…]}`: what the agent (default: the default
/// agent) may call, as the model sees it.
pub(crate) async fn list_tools(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ToolsQuery = parse_query(query.as_deref())?;
    let tools = state
        .runtime
        .tools()
        .specs(query.agent.as_deref())
        .map_err(runtime_error)?;
    Ok(Json(json!({ "data": tools })))
}

/// `GET /api/tools/stats` → `{data: [ToolStats…]}` (calls, errors, repairs, blocks, latency).
pub(crate) async fn tool_stats(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let stats = state.runtime.tools().stats().await.map_err(internal)?;
    Ok(Json(json!({ "data": stats })))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCallBody {
    #[serde(default = "empty_object")]
    arguments: Value,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    wait: Option<bool>,
}

/// `POST /api/tools/{name}/call` (`{arguments, agent?, wait?}`): the call goes through the
/// gateway (validation, repair, policy, hooks, approval) as a run of its own → its
/// `RunResponse` (or 202 `{requestId}` with `wait: false`).
pub(crate) async fn call_tool(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let call: ToolCallBody = parse_body(body, false)?;
    let ticket = state.admission.admit()?;
    let handle = state
        .runtime
        .tools()
        .call(
            call.agent.as_deref(),
            &name,
            &arguments_text(&call.arguments),
        )
        .await
        .map_err(runtime_error)?;
    answer_started(handle, ticket, call.wait.unwrap_or(true)).await
}
