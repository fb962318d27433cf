//! `GET /api/health`: a health check that checks. It asks the store whether it is usable (a
//! read, and a write that changes nothing), and reports the workspace and each model's
//! provider as configured:
//!
//! ```json
//! {"status": "ok",
//!  "store": {"status": "ok", "kind": "sqlite", "schemaVersion": 4, "writable": true},
//!  "workspace": {"loadedAt": "…", "documents": {"agents": 1, "models": 1, "tools": 0, "policies": 0, "hooks": 0}},
//!  "models": [{"name": "m", "provider": "openai", "status": "ready"}]}
//! ```
//!
//! Each MCP server is listed with its state (`not_started`, `starting`, `ready`,
//! `unavailable`, `stopped`, `disabled`), its tool count and restarts.
//!
//! On a shared store (PostgreSQL), `store.cluster` has this replica's `lease` (`replica`,
//! fencing `token`, `expiresAt`), its `ownedRuns`, the live `replicas`, the `queueDepth` and
//! the runs it `takenOver`.
//!
//! `workspace.digest` is the loaded workspace's (`sha256:…` of its compiled documents; a
//! reload changes it). `workspace.skills` counts the skills in use and the `problems` of those left out (the
//! inventory, behind an operator key, lists them).
//!
//! `status` is `ok`, `degraded` (200: a model's provider is not configured, so its agents'
//! requests fail, an MCP server is unavailable, so its tools are, or a skill is left out for
//! a problem in its `SKILL.md`) or `unavailable` (503:
//! the store is not usable). The route needs no key, so
//! the body carries no internals: a store failure is named by its kind, its detail goes to the
//! log; a model's reason names no secret value.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keel_types::StoreError;
use serde_json::{Value, json};

use crate::state::AppState;

/// `GET /api/health`: 200 when the store is usable, 503 when it is not.
pub(crate) async fn health(State(state): State<AppState>) -> Response {
    let runtime = &state.runtime;
    let workspace = runtime.workspace();
    let store = match runtime.runs().store_health().await {
        Ok(health) => {
            let mut store = serde_json::to_value(&health).unwrap_or_else(|_| json!({}));
            store["status"] = json!("ok");
            store
        }
        Err(error) => {
            tracing::error!(%error, "Health check: the store is not usable.");
            json!({ "status": "unavailable", "error": store_problem(&error) })
        }
    };
    let models: Vec<Value> = workspace
        .models
        .iter()
        .map(|(name, spec)| {
            let provider = serde_json::to_value(spec.provider).unwrap_or(Value::Null);
            match runtime.unavailable_models().get(name) {
                Some(why) => json!({
                    "name": name, "provider": provider, "status": "unconfigured", "error": why,
                }),
                None => json!({ "name": name, "provider": provider, "status": "ready" }),
            }
        })
        .collect();
    // A server's state and tool count only: its errors may name paths (the inventory, behind
    // an operator key, has them).
    let mcp = runtime.mcp_servers();
    let mcp_down = mcp
        .iter()
        .any(|s| matches!(s.state, keel::ServerState::Unavailable));
    let mcp_servers: Vec<Value> = mcp
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "state": s.state,
                "tools": s.tools.len(),
                "restarts": s.restarts,
            })
        })
        .collect();
    let mut store = store;
    // On a shared store: this replica's lease and the cluster as the store sees it.
    if store["status"] == "ok" {
        match runtime.cluster_status().await {
            Ok(Some(cluster)) => {
                store["cluster"] = serde_json::to_value(&cluster).unwrap_or(Value::Null);
            }
            Ok(None) => {}
            Err(error) => {
                tracing::error!(%error, "Health check: the store's cluster state is unreadable.");
                store = json!({ "status": "unavailable", "error": sdk_store_problem(&error) });
            }
        }
    }
    let store_ok = store["status"] == "ok";
    let skills = workspace.skills.current();
    let status = match (
        store_ok,
        runtime.unavailable_models().is_empty() && !mcp_down && skills.problems.is_empty(),
    ) {
        (false, _) => "unavailable",
        (true, false) => "degraded",
        (true, true) => "ok",
    };
    let body = json!({
        "status": status,
        "store": store,
        "workspace": {
            "loadedAt": runtime.loaded_at(),
            "digest": runtime.workspace_digest(),
            "documents": {
                "agents": workspace.agents.len(),
                "models": workspace.models.len(),
                "tools": workspace.tools.len(),
                "policies": workspace.policies.len(),
                "hooks": workspace.hooks.len(),
                "mcpServers": workspace.mcp_servers.len(),
            },
            "skills": { "count": skills.skills.len(), "problems": skills.problems.len() },
        },
        "models": models,
        "mcpServers": mcp_servers,
    });
    let code = if store_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// What is wrong with the store, without paths or other internals.
fn store_problem(error: &keel::RuntimeError) -> &'static str {
    match error {
        keel::RuntimeError::Store(error) => store_error_problem(error),
        _ => "the store failed its check; see the server log",
    }
}

/// [`store_problem`] for an SDK error.
fn sdk_store_problem(error: &keel::Error) -> &'static str {
    match error {
        keel::Error::Store(error) | keel::Error::Runtime(keel::RuntimeError::Store(error)) => {
            store_error_problem(error)
        }
        _ => "the store failed its check; see the server log",
    }
}

fn store_error_problem(error: &StoreError) -> &'static str {
    match error {
        StoreError::Io { .. } => "the store cannot be read or written; see the server log",
        StoreError::Corrupt { .. } => "the store's data is corrupt; see the server log",
        StoreError::Version { .. } => "the store was written by a newer keel",
        StoreError::Fenced(_) => "this replica lost its lease on the store; see the server log",
        StoreError::NotFound(_) | StoreError::Invalid(_) | StoreError::Unsupported(_) => {
            "the store failed its check; see the server log"
        }
    }
}
