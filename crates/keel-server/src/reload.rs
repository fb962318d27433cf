//! `POST /api/workspace/reload` (operator): load the workspace again and swap it in
//! (`docs/workspace.md#reloading-the-workspace`). An invalid workspace is refused (409, every
//! error in the message) and the loaded one keeps serving.

use axum::Json;
use axum::extract::{Extension, State};
use serde_json::{Value, json};

use crate::ApiError;
use crate::error::runtime_error;
use crate::state::{AppState, Principal};

/// `POST /api/workspace/reload` → `{digest, changed, changes, run, mcp: {kept, restarted,
/// removed}}`.
pub(crate) async fn reload(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    match reload_runtime(&state.runtime, principal.owner()).await {
        Ok(report) => Ok(Json(report)),
        Err(keel::Error::Workspace(error)) => Err(ApiError::Conflict(format!(
            "the workspace was not reloaded; the loaded one keeps serving:\n{error}"
        ))),
        Err(error) => Err(runtime_error(error)),
    }
}

/// Reloads `runtime`'s workspace, starts the MCP servers of the new one, and says what
/// changed; why not when it could not (logged too).
pub(crate) async fn reload_runtime(
    runtime: &keel::Runtime,
    owner: Option<String>,
) -> Result<Value, keel::Error> {
    let report = match runtime.reload(owner).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "The workspace was not reloaded; the loaded one keeps serving.");
            return Err(error);
        }
    };
    runtime.start_mcp();
    let changed = report.run.is_some();
    if changed {
        tracing::info!(
            digest = %report.digest,
            changes = %report.changes.join(", "),
            "Reloaded the workspace."
        );
    }
    Ok(json!({
        "digest": report.digest,
        "changed": changed,
        "changes": report.changes,
        "run": report.run,
        "mcp": {
            "kept": report.mcp_kept,
            "restarted": report.mcp_restarted,
            "removed": report.mcp_removed,
        },
    }))
}
