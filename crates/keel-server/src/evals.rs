//! Evaluations over HTTP (`docs/evals.md`): the workspace's `Eval` documents with their latest
//! result (`GET /api/evals`), running one (`POST /api/evals/{name}/run`: stored as running at
//! once, its cases run in the background; `wait: true` answers the ended result), and the
//! stored results with each case linked to its run (`GET /api/evals/results…`). The console's
//! eval pages will read these.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use keel::eval::EvalRun;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{parse_body, parse_query};
use crate::error::runtime_error;
use crate::state::{AppState, Principal};

/// `GET /api/evals` → `{object: "list", data: [{name, description, target, cases, graders,
/// threshold, latest?}]}`: each eval with the summary of its newest result.
pub(crate) async fn list_evals(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let workspace = state.runtime.workspace();
    let mut data = Vec::with_capacity(workspace.evals.len());
    for (name, spec) in &workspace.evals {
        let latest = state
            .runtime
            .eval_results(Some(name), 1)
            .await
            .map_err(runtime_error)?
            .into_iter()
            .next()
            .map(|r| json!({"id": r.id, "status": r.status, "startedAt": r.started_at, "summary": r.summary}));
        data.push(json!({
            "name": name,
            "description": spec.description,
            "target": spec.target.request_agent(),
            "cases": spec.cases.len(),
            "graders": spec.graders.len(),
            "passScore": spec.pass_score,
            "threshold": spec.threshold,
            "version": keel::eval::eval_version(spec),
            "latest": latest,
        }));
    }
    Ok(Json(json!({ "object": "list", "data": data })))
}

/// `POST /api/evals/{name}/run` body.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RunEval {
    /// Cases at once (default: the eval's `concurrency`).
    #[schemars(range(min = 1, max = 1024))]
    #[serde(default, deserialize_with = "whole_count")]
    concurrency: Option<u32>,
    /// Runs per case.
    #[schemars(range(min = 1, max = 100))]
    #[serde(default, deserialize_with = "whole_count")]
    repeat: Option<u32>,
    /// A `Model` document every agent run uses instead of its agent's.
    model: Option<String>,
    /// Answer each case's model rounds from its recorded run.
    #[serde(default)]
    replay: bool,
    /// Answer when the eval has ended, with its result (default: 202 at once).
    #[serde(default)]
    wait: bool,
}

/// A count from 1 to 1024 written as a JSON integer, also with a zero fraction (`4.0`), as
/// JSON Schema's `integer` allows.
fn whole_count<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0)
            .map(|f| f as u64)
    });
    match whole
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..=1024).contains(n))
    {
        Some(n) => Ok(Some(n)),
        None => Err(serde::de::Error::custom(format!(
            "a count is a whole number from 1 to 1024, not {number}"
        ))),
    }
}

/// `POST /api/evals/{name}/run` → 202 `{id, status: running}` (the result, stored; read it at
/// `/api/evals/results/{id}`), or with `wait: true` 200 and the ended result. 404 for an
/// unknown eval, 400 for options that cannot apply.
pub(crate) async fn run_eval(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if !state.runtime.workspace().evals.contains_key(&name) {
        return Err(ApiError::ResourceNotFound(format!("no eval `{name}`")));
    }
    let run: RunEval = parse_body(body, true)?;
    if run.repeat.is_some_and(|r| r > 100) {
        return Err(ApiError::BadRequest {
            message: "`repeat` is at most 100".into(),
            param: Some("repeat"),
        });
    }
    let options = EvalRun {
        concurrency: run.concurrency,
        repeat: run.repeat,
        model: run.model,
        replay: run.replay,
        owner: principal.owner(),
        progress: None,
    };
    let started = state
        .runtime
        .begin_eval(&name, &options)
        .await
        .map_err(runtime_error)?;
    let id = started.id.clone();
    let runtime = state.runtime.clone();
    let finishing = tokio::spawn(async move { runtime.finish_eval(started, None).await });
    if run.wait {
        let ended = finishing
            .await
            .map_err(|e| ApiError::Internal(format!("the eval stopped: {e}")))?
            .map_err(runtime_error)?;
        return Ok(Json(ended).into_response());
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"id": id, "status": "running"})),
    )
        .into_response())
}

/// Query of `GET /api/evals/results`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResultsQuery {
    eval: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/evals/results?eval=&limit=` → `{object: "list", data: [results without their
/// cases]}`, newest first.
pub(crate) async fn list_results(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ResultsQuery = parse_query(query.as_deref())?;
    let limit = query.limit.unwrap_or(20).clamp(1, 1000);
    let results = state
        .runtime
        .eval_results(query.eval.as_deref(), limit)
        .await
        .map_err(runtime_error)?;
    let data: Vec<Value> = results
        .into_iter()
        .map(|mut r| {
            r.cases.clear();
            let mut value = serde_json::to_value(&r).unwrap_or_default();
            if let Value::Object(map) = &mut value {
                map.remove("cases");
            }
            value
        })
        .collect();
    Ok(Json(json!({ "object": "list", "data": data })))
}

/// `GET /api/evals/results/{id}` → the EvalResult, each case with its run's id (its events at
/// `/api/requests/{requestId}/events`); 404 for an unknown id.
pub(crate) async fn get_result(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    match state
        .runtime
        .eval_result(&id)
        .await
        .map_err(runtime_error)?
    {
        Some(result) => Ok(Json(result).into_response()),
        None => Err(ApiError::ResourceNotFound(format!("no eval result `{id}`"))),
    }
}
