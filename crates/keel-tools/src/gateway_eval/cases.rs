//! Cases written by hand: a user's case file (JSON lines) and the dataset's literal cases, in
//! one format.
//!
//! One case per line: `{"tool": "...", "arguments": <JSON value, or a string holding the raw
//! text the model sent>, "expect": "repair"|"block"|"pass", "repaired": {...}, "name": "..."}`;
//! optional `repairedTool` (the tool a misspelled name must be repaired to), `kind` (for the
//! report's per-kind table; default `user`) and `agent` (whose call it is). Blank lines and
//! lines starting with `#` are skipped.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Expect, GatewayCase, GatewayEvalError};

/// One hand-written case as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CaseLine {
    pub tool: String,
    pub arguments: Value,
    pub expect: Expect,
    #[serde(default)]
    pub repaired: Option<Value>,
    #[serde(default)]
    pub repaired_tool: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
}

/// Where a hand-written case comes from.
pub(super) enum Origin<'a> {
    /// The dataset's `cases`, 1-based.
    Dataset(usize),
    /// A line of a case file, 1-based.
    File(&'a Path, usize),
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dataset(index) => write!(f, "evals/gateway.yaml#{index}"),
            Self::File(path, line) => write!(f, "{}:{line}", path.display()),
        }
    }
}

impl CaseLine {
    /// The case, or why it is not one.
    pub(super) fn into_case(self, origin: Origin<'_>) -> Result<GatewayCase, String> {
        if self.tool.trim().is_empty() {
            return Err("`tool` is empty".into());
        }
        if self.expect != Expect::Repair {
            let field = match (&self.repaired, &self.repaired_tool) {
                (Some(_), _) => Some("repaired"),
                (None, Some(_)) => Some("repairedTool"),
                (None, None) => None,
            };
            if let Some(field) = field {
                return Err(format!(
                    "`{field}` is only for `\"expect\": \"repair\"` (this case expects `{}`)",
                    self.expect.as_str()
                ));
            }
        }
        let arguments = match self.arguments {
            Value::String(raw) => raw,
            value => value.to_string(),
        };
        let origin = origin.to_string();
        Ok(GatewayCase {
            name: self.name.unwrap_or_else(|| origin.clone()),
            kind: self.kind.unwrap_or_else(|| "user".into()),
            tool: self.tool,
            arguments,
            expect: self.expect,
            repaired: self.repaired,
            repaired_tool: self.repaired_tool,
            agent: self.agent,
            origin,
        })
    }
}

/// The cases of a case file's text; `path` names the file in cases and errors.
pub fn parse_cases(text: &str, path: &Path) -> Result<Vec<GatewayCase>, GatewayEvalError> {
    let mut cases = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let number = index + 1;
        let bad = |message: String| GatewayEvalError::Case {
            path: path.to_path_buf(),
            line: number,
            message,
        };
        let parsed: CaseLine = serde_json::from_str(trimmed)
            .map_err(|e| bad(format!("not a gateway case: {}", without_position(&e))))?;
        cases.push(parsed.into_case(Origin::File(path, number)).map_err(bad)?);
    }
    Ok(cases)
}

/// The cases of the case file at `path` (JSON lines).
pub fn read_cases(path: &Path) -> Result<Vec<GatewayCase>, GatewayEvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| GatewayEvalError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    parse_cases(&text, path)
}

/// serde's message without its `at line 1 column N` (the line is ours to name), keeping the
/// column.
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => format!("{message} (column {})", error.column()),
        None => text,
    }
}
