//! `keel validate` and `keel config explain`.

use std::path::Path;

use keel::Workspace;
use keel_workspace::Origin;

use crate::error::CliError;
use crate::out;

pub(crate) fn validate(root: &Path) -> Result<(), CliError> {
    let ws = Workspace::load(root)?;
    // A broken skill does not stop a runtime (it is left out), but it is an error here.
    let skill_problems = ws.skills.current().problems.clone();
    if !skill_problems.is_empty() {
        return Err(keel::LoadError::Invalid(skill_problems).into());
    }
    out::line(&format!("ok: {} in {}", summary(&ws), root.display()));
    Ok(())
}

/// What a workspace defines, counted: agents, models and tools always; workflows, MCP
/// servers, memories, skills, hooks (and how many are disabled), policies and evals (with
/// their cases) when it has any.
fn summary(ws: &Workspace) -> String {
    let count = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let mut parts = vec![
        count(ws.agents.len(), "agent", "agents"),
        count(ws.models.len(), "model", "models"),
        count(ws.tools.len(), "tool", "tools"),
    ];
    let disabled = ws.hooks.iter().filter(|(_, hook)| !hook.enabled).count();
    let hooks = match disabled {
        0 => count(ws.hooks.len(), "hook", "hooks"),
        n => format!("{} ({n} disabled)", count(ws.hooks.len(), "hook", "hooks")),
    };
    let optional = [
        (
            ws.workflows.len(),
            count(ws.workflows.len(), "workflow", "workflows"),
        ),
        (
            ws.mcp_servers.len(),
            count(ws.mcp_servers.len(), "MCP server", "MCP servers"),
        ),
        (
            ws.memories.len(),
            count(ws.memories.len(), "memory", "memories"),
        ),
        {
            let skills = ws.skills.current().skills.len();
            (skills, count(skills, "skill", "skills"))
        },
        (ws.hooks.len(), hooks),
        (
            ws.policies.len(),
            count(ws.policies.len(), "policy", "policies"),
        ),
        {
            let cases: usize = ws.evals.values().map(|e| e.cases.len()).sum();
            (
                ws.evals.len(),
                format!(
                    "{} ({})",
                    count(ws.evals.len(), "eval", "evals"),
                    count(cases, "case", "cases")
                ),
            )
        },
    ];
    parts.extend(
        optional
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(_, part)| part),
    );
    parts.join(", ")
}

pub(crate) fn explain(root: &Path) -> Result<(), CliError> {
    let ws = Workspace::load(root)?;
    for entry in ws.explain() {
        // A value interpolated from a secret-looking variable is never printed.
        let value = match &entry.origin {
            Origin::Env { var, .. } if keel_workspace::looks_secret(var) => {
                "\"[REDACTED]\"".to_owned()
            }
            _ => entry.value.to_string(),
        };
        out::line(&format!("{} = {value}  ({})", entry.path, entry.origin));
    }
    Ok(())
}
