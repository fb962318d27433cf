//! Long-term memory for operators (`/api/memory…`): list, search, show, history, add,
//! update, delete, maintenance, export and import. Candidates are approvals: decide them
//! with `/api/approvals/{id}/approve|deny` (`GET /api/memory/candidates` lists them).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use keel::{MaintenanceRequest, MemoryDraft, MemoryService};
use keel_types::{MemoryFilter, MemoryKind, MemoryUpdate};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{parse_body, parse_query};
use crate::error::runtime_error;
use crate::state::AppState;

/// Who the API records as the author of operator writes.
const OPERATOR: &str = "api";

fn memory(state: &AppState) -> Result<std::sync::Arc<MemoryService>, ApiError> {
    state.runtime.memory().service().map_err(runtime_error)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    #[serde(default)]
    namespace: Option<String>,
    /// `true` or `false` (the route table checked it).
    #[serde(default)]
    all: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/memory?namespace=&all=&limit=` → `{object: "list", data: [MemoryRecord]}`.
pub(crate) async fn list(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ListQuery = parse_query(query.as_deref())?;
    let memory = memory(&state)?;
    let filter = MemoryFilter {
        namespace: query.namespace,
        all_versions: query.all.as_deref() == Some("true"),
        limit: Some(query.limit.unwrap_or(100)),
        ..MemoryFilter::default()
    };
    let records = memory.list(&filter).await.map_err(runtime_error)?;
    Ok(Json(json!({"object": "list", "data": records})))
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/memory/search?q=&namespace=&limit=` → `{data: [MemoryHit]}`.
pub(crate) async fn search(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let memory = memory(&state)?;
    let query: SearchQuery = parse_query(query.as_deref())?;
    let limit = query.limit.unwrap_or(10);
    let hits = memory
        .search(query.namespace.as_deref(), &query.q, limit)
        .await
        .map_err(runtime_error)?;
    Ok(Json(json!({"object": "list", "data": hits})))
}

/// `GET /api/memory/candidates` → the pending approvals that carry a memory candidate.
pub(crate) async fn candidates(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    memory(&state)?;
    let pending = state
        .runtime
        .approvals()
        .memory_candidates()
        .await
        .map_err(runtime_error)?;
    Ok(Json(json!({"object": "list", "data": pending})))
}

/// `GET /api/memory/{id}` → the latest version.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = memory(&state)?.get(&id).await.map_err(runtime_error)?;
    Ok(Json(json!(record)))
}

/// `GET /api/memory/{id}/history` → every version, oldest first.
pub(crate) async fn history(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let versions = memory(&state)?.history(&id).await.map_err(runtime_error)?;
    Ok(Json(json!({"object": "list", "data": versions})))
}

/// A record to store.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewRecord {
    /// A namespace of a `Memory` document, e.g. `users/alice`.
    #[schemars(length(min = 1))]
    namespace: String,
    #[schemars(length(min = 1))]
    text: String,
    /// `fact` (default), `preference`, `instruction` or `episode`.
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

fn kind(text: Option<&str>) -> Result<Option<MemoryKind>, ApiError> {
    text.map(|k| {
        k.parse::<MemoryKind>().map_err(|e| ApiError::BadRequest {
            message: e.to_string(),
            param: Some("kind"),
        })
    })
    .transpose()
}

/// `POST /api/memory` `{namespace, text, kind?, tags?}` → 201 and the record.
pub(crate) async fn add(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let memory = memory(&state)?;
    let new: NewRecord = parse_body(body, false)?;
    let draft = MemoryDraft {
        kind: kind(new.kind.as_deref())?.unwrap_or_default(),
        text: new.text,
        tags: new.tags,
    };
    let record = memory
        .add(&new.namespace, draft, OPERATOR)
        .await
        .map_err(runtime_error)?;
    Ok((StatusCode::CREATED, Json(json!(record))).into_response())
}

/// A change: a new version with what is given.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Change {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// `PATCH /api/memory/{id}` `{text?, kind?, tags?}` → the new version.
pub(crate) async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let memory = memory(&state)?;
    let change: Change = parse_body(body, false)?;
    let update = MemoryUpdate {
        text: change.text,
        kind: kind(change.kind.as_deref())?,
        tags: change.tags,
    };
    let record = memory
        .update(&id, update, OPERATOR)
        .await
        .map_err(runtime_error)?;
    Ok(Json(json!(record)))
}

/// `DELETE /api/memory/{id}` → the closed version (the history stays).
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = memory(&state)?
        .delete(&id, OPERATOR, None)
        .await
        .map_err(runtime_error)?;
    Ok(Json(json!(record)))
}

/// What maintenance should do.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Maintain {
    /// Compact only this namespace.
    #[serde(default)]
    namespace: Option<String>,
    /// Expire records past their TTL (default true).
    #[serde(default)]
    expire: Option<bool>,
    /// Merge duplicates (default true).
    #[serde(default)]
    compact: Option<bool>,
    /// The least word overlap of near duplicates, 0–1 (default 0.8).
    #[serde(default)]
    similarity: Option<f64>,
}

/// `POST /api/memory/maintain` → `{requestId, merged, expired}` (the maintenance run).
pub(crate) async fn maintain(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    memory(&state)?;
    let body: Maintain = parse_body(body, true)?;
    let defaults = MaintenanceRequest::default();
    let request = MaintenanceRequest {
        namespace: body.namespace,
        expire: body.expire.unwrap_or(defaults.expire),
        compact: body.compact.unwrap_or(defaults.compact),
        similarity: body.similarity.unwrap_or(defaults.similarity),
    };
    let (run, report) = state
        .runtime
        .memory()
        .maintain(&request, Some(OPERATOR.to_owned()))
        .await
        .map_err(runtime_error)?;
    Ok(Json(json!({
        "requestId": run,
        "merged": report.merged.len(),
        "expired": report.expired.len(),
    })))
}

#[derive(Debug, Deserialize)]
struct ExportQuery {
    #[serde(default)]
    namespace: Option<String>,
}

/// `GET /api/memory/export?namespace=` → every version as JSONL.
pub(crate) async fn export(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let memory = memory(&state)?;
    let query: ExportQuery = parse_query(query.as_deref())?;
    let jsonl = memory
        .export(query.namespace.as_deref())
        .await
        .map_err(runtime_error)?;
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], jsonl).into_response())
}

/// `POST /api/memory/import` (JSONL, as exported) → `{imported}`; all or nothing.
pub(crate) async fn import(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let memory = memory(&state)?;
    let bytes = body.map_err(|e| ApiError::BadRequest {
        message: e.body_text(),
        param: None,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|_| ApiError::BadRequest {
        message: "the body is not UTF-8 JSONL".into(),
        param: None,
    })?;
    let imported = memory.import(text).await.map_err(runtime_error)?;
    Ok(Json(json!({ "imported": imported })))
}
