//! `keel validate` and `keel config explain`.

use std::path::Path;

use keel::Workspace;
use keel::workspace::Origin;

use crate::error::CliError;
use crate::out;

pub fn validate(root: &Path) -> Result<(), CliError> {
    let ws = Workspace::load(root)?;
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
