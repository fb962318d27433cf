//! `keel validate` and `keel config explain`.

use std::path::Path;

use keel::Workspace;
use keel::workspace::Origin;

use crate::error::CliError;
use crate::out;

pub fn validate(root: &Path) -> Result<(), CliError> {
    let ws = Workspace::load(root)?;
    // A broken skill does not stop a runtime (it is left out), but it is an error here.
    let skill_problems = ws.skills.current().problems.clone();
    if !skill_problems.is_empty() {
        return Err(keel::LoadError::Invalid(skill_problems).into());
    }
    let workflows = match ws.workflows.len() {
        0 => String::new(),
        n => format!(", {n} workflow(s)"),
    };
    out::line(&format!(
        "ok: {} agent(s), {} model(s), {} tool(s){workflows} in {}",
        ws.agents.len(),
        ws.models.len(),
        ws.tools.len(),
        root.display()
    ));
    Ok(())
}

pub fn explain(root: &Path) -> Result<(), CliError> {
    let ws = Workspace::load(root)?;
    for entry in ws.explain() {
        // A value interpolated from a secret-looking variable is never printed.
        let value = match &entry.origin {
            Origin::Env { var, .. } if keel::workspace::looks_secret(var) => {
                "\"[REDACTED]\"".to_owned()
            }
            _ => entry.value.to_string(),
        };
        out::line(&format!("{} = {value}  ({})", entry.path, entry.origin));
    }
    Ok(())
}
