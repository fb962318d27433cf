//! `keel validate` and `keel config explain`.

use std::path::Path;

use keel::workspace::Origin;
use keel::{LoadError, Workspace};

use crate::{EXIT_USAGE, out};

/// Loads the workspace, reporting every problem; `Err` carries the exit code.
pub fn load(root: &Path) -> Result<Workspace, u8> {
    Workspace::load(root).map_err(|error| {
        match &error {
            LoadError::Invalid(_) => out::status(&error.to_string()),
            LoadError::NotAWorkspace { .. } => out::error(&error.to_string()),
        }
        EXIT_USAGE
    })
}

pub fn validate(root: &Path) -> u8 {
    match load(root) {
        Ok(ws) => {
            out::line(&format!(
                "ok: {} agent(s), {} model(s), {} tool(s) in {}",
                ws.agents.len(),
                ws.models.len(),
                ws.tools.len(),
                root.display()
            ));
            0
        }
        Err(code) => code,
    }
}

pub fn explain(root: &Path) -> u8 {
    match load(root) {
        Ok(ws) => {
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
            0
        }
        Err(code) => code,
    }
}
