//! The workspace's skills (`GET /api/skills`, `GET /api/skills/{name}`), read from the latest
//! scan each time, so a skill added or edited under a running server shows up once the
//! skill folders have been checked again (`skills.refreshInterval`).

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use keel_workspace::Diagnostic;
use keel_workspace::skills::{Skill, name_problem, skill_body, skill_files, skill_matcher};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::parse_query;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
struct SkillsQuery {
    #[serde(default)]
    agent: Option<String>,
}

/// A skill as listed: name, description, where it is, and the front matter Keel does not read.
fn summary(skill: &Skill) -> Value {
    let mut entry = json!({
        "name": skill.name,
        "description": skill.description,
        "file": skill.file.display().to_string(),
    });
    if !skill.extra.is_empty() {
        entry["extra"] = json!(skill.extra);
    }
    entry
}

pub(crate) fn problem(diagnostic: &Diagnostic) -> Value {
    json!({
        "file": diagnostic.file.display().to_string(),
        "line": diagnostic.line,
        "column": diagnostic.column,
        "message": diagnostic.message,
        "hint": diagnostic.hint,
    })
}

/// `GET /api/skills?agent=` → `{object: "list", data: [{name, description, file, extra?,
/// alwaysOn?}], problems: [...], overridden: [{file, hidden}]}`; with `agent`, only the
/// skills that agent may use (`alwaysOn` marks its always-on ones).
pub(crate) async fn list_skills(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: SkillsQuery = parse_query(query.as_deref())?;
    let workspace = state.runtime.workspace();
    let agent = match &query.agent {
        Some(name) => Some(
            workspace
                .agents
                .get(name)
                .ok_or_else(|| ApiError::ResourceNotFound(format!("no agent `{name}`")))?,
        ),
        None => None,
    };
    let allowed = agent.map(|agent| skill_matcher(&agent.skills));
    let set = state.runtime.skills().current();
    let data: Vec<Value> = set
        .skills
        .values()
        .filter(|skill| allowed.as_ref().is_none_or(|allowed| allowed(&skill.name)))
        .map(|skill| {
            let mut entry = summary(skill);
            if let Some(agent) = agent {
                entry["alwaysOn"] = json!(agent.always_on_skills.contains(&skill.name));
            }
            entry
        })
        .collect();
    let overridden: Vec<Value> = set
        .overridden
        .iter()
        .map(|(file, hidden)| {
            json!({"file": file.display().to_string(), "hidden": hidden.display().to_string()})
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "problems": set.problems.iter().map(problem).collect::<Vec<_>>(),
        "overridden": overridden,
    })))
}

/// `GET /api/skills/{name}` → the skill's fields, the files of its folder (`{path, bytes}`)
/// and its body (instructions); 400 for a name no skill can have, 404 for a skill the scan
/// has not found.
pub(crate) async fn get_skill(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if let Some(problem) = name_problem(&name) {
        return Err(ApiError::BadRequest {
            message: format!("`{name}` is not a skill name: {problem}"),
            param: Some("name"),
        });
    }
    let set = state.runtime.skills().current();
    let skill = set
        .get(&name)
        .cloned()
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no skill `{name}`")))?;
    let (body, files) = tokio::task::spawn_blocking({
        let skill = skill.clone();
        move || (skill_body(&skill), skill_files(&skill))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("reading the skill failed: {e}")))?;
    let mut entry = summary(&skill);
    entry["files"] = files
        .iter()
        .map(|(path, bytes)| json!({"path": path, "bytes": bytes}))
        .collect();
    match body {
        Ok(body) => entry["body"] = json!(body),
        Err(why) => entry["bodyError"] = json!(why.to_string()),
    }
    Ok(Json(entry))
}
