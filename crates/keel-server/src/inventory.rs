//! What the workspace offers (`GET /api/inventory`) and stored artifacts
//! (`GET /api/artifacts/{id}`).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{internal, parse_query};
use crate::state::AppState;

/// `GET /api/inventory` → the workspace's agents (model, tools, skills, the policies that
/// apply to them), API keys (name, role, daily budget), models (provider and
/// endpoint; never key values), tools (as models see them, with the agents that may call
/// them and their default policy), policies and hooks by name, MCP servers (state, the
/// tools they offer, restarts, last error, lifecycle history) and skills (in use, left out
/// and why). MCP tools are listed once
/// their servers have answered or failed.
///
/// Only names and settings safe to show are listed: values read from the environment (keys,
/// hook headers) never appear.
pub(crate) async fn inventory(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let runtime = &state.runtime;
    runtime.settle_mcp().await;
    let workspace = runtime.workspace();
    let mut tools: BTreeMap<String, Value> = BTreeMap::new();
    let mut agents = Vec::new();
    for (name, agent) in &workspace.agents {
        for spec in runtime.tools().specs(Some(name)).map_err(internal)? {
            let entry = tools.entry(spec.name.clone()).or_insert_with(|| {
                let doc = workspace.tools.get(&spec.name);
                json!({
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                    "builtin": doc.is_none(),
                    "policy": doc.and_then(|d| d.policy),
                    "agents": [],
                })
            });
            if let Some(list) = entry["agents"].as_array_mut() {
                list.push(Value::from(name.as_str()));
            }
        }
        let policies: Vec<&String> = workspace
            .policies
            .iter()
            .filter(|(_, policy)| policy.agents.is_empty() || policy.agents.contains(name))
            .map(|(policy, _)| policy)
            .collect();
        agents.push(json!({
            "name": name,
            "model": agent.model,
            "tools": agent.tools,
            "skills": agent.skills,
            "policies": policies,
            "default": workspace.default_agent() == Some(name.as_str()),
        }));
    }
    let models: Vec<Value> = workspace
        .models
        .iter()
        .map(|(name, model)| {
            json!({
                "name": name,
                "provider": model.provider,
                "model": model.model,
                "baseUrl": model.base_url,
                "stream": model.stream,
            })
        })
        .collect();
    let hooks: Vec<Value> = workspace
        .hooks
        .iter()
        .map(|(name, hook)| json!({ "name": name, "event": hook.event, "matcher": hook.matcher }))
        .collect();
    Ok(Json(json!({
        "agents": agents,
        "models": models,
        "tools": tools.into_values().collect::<Vec<_>>(),
        "policies": workspace.policies.keys().collect::<Vec<_>>(),
        "apiKeys": api_keys(&workspace),
        "hooks": hooks,
        "mcpServers": runtime.mcp_servers(),
        "skills": skills(&workspace),
    })))
}

/// The API keys by name: role and daily budget (the variable a key is read from is named, its
/// value never).
fn api_keys(workspace: &keel::Workspace) -> Vec<Value> {
    workspace
        .runtime
        .server
        .api_keys
        .iter()
        .map(|key| {
            json!({
                "name": key.principal(),
                "role": key.role,
                "budget": key.budget.as_ref().map(ToString::to_string),
            })
        })
        .collect()
}

/// The skills in use by name, the names left out and their problems (located), so a broken skill is seen where the rest of the workspace is.
fn skills(workspace: &keel::Workspace) -> Value {
    let set = workspace.skills.current();
    json!({
        "names": set.skills.keys().collect::<Vec<_>>(),
        "leftOut": set.broken,
        "problems": set.problems.iter().map(crate::skills::problem).collect::<Vec<_>>(),
    })
}

#[derive(Debug, Deserialize)]
struct ArtifactQuery {
    /// `true`: the artifact's record as JSON instead of its content.
    #[serde(default)]
    meta: Option<String>,
}

/// `GET /api/artifacts/{id}` → the content with its media type (`?meta=true`: the
/// ArtifactRecord). The id may also be given as a whole `keel://artifacts/<id>` URI,
/// percent-encoded.
pub(crate) async fn artifact(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query: ArtifactQuery = parse_query(query.as_deref())?;
    let meta = match query.meta.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::BadRequest {
                message: format!("invalid `meta`: `{other}` (true or false)"),
                param: Some("meta"),
            });
        }
    };
    let Some(id) = keel_types::artifact_id(&id) else {
        return Err(ApiError::BadRequest {
            message: keel_types::artifact_id_problem(&id),
            param: Some("id"),
        });
    };
    let (record, content) = state
        .runtime
        .runs()
        .artifact(id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no artifact `{id}`")))?;
    if meta {
        return Ok(Json(record).into_response());
    }
    let media_type = HeaderValue::from_str(&record.media_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    Ok((
        [
            (header::CONTENT_TYPE, media_type),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        content,
    )
        .into_response())
}
