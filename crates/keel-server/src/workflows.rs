//! The workspace's workflows (`GET /api/workflows`, `GET /api/workflows/{name}`): each with
//! its nodes, edges and phases, and its graph as a Mermaid flowchart. Runs of a workflow are
//! requests like any other (`POST /api/requests` with `workflow`, or `/v1` with
//! `model: workflow/<name>`).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::ApiError;
use crate::state::AppState;

/// `GET /api/workflows` → `{object: "list", data: [{name, description, nodes, phases}]}`.
pub(crate) async fn list_workflows(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .runtime
        .workflows()
        .iter()
        .map(|(name, spec)| {
            json!({
                "name": name,
                "description": spec.description,
                "nodes": spec.nodes.len(),
                "phases": spec.phases.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// `GET /api/workflows/{name}` → `{name, spec, mermaid}`; 404 for an unknown name.
pub(crate) async fn get_workflow(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let workflows = state.runtime.workflows();
    let spec = workflows
        .get(&name)
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no workflow `{name}`")))?;
    Ok(Json(json!({
        "name": name,
        "spec": spec,
        "mermaid": keel_workspace::mermaid(spec),
    })))
}
