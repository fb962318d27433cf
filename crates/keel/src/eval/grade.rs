//! Grading one run: what a grader sees of the run ([`RunView`]), and the deterministic
//! graders, each prepared once per eval (a regex or a JSON Schema is compiled once, not once
//! per case).

use keel_types::eval::GraderResult;
use keel_workspace::{GraderKind, GraderSpec};
use serde::Serialize;
use serde_json::Value;

/// What graders (and a `command` grader's program, on stdin) see of a run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub request_id: String,
    /// The case's name.
    pub case: String,
    pub input: Value,
    pub status: String,
    pub output: Option<String>,
    /// The structured value: the run's own, or its answer read as JSON.
    pub value: Option<Value>,
    pub finish_reason: Option<String>,
    pub steps: u32,
    pub duration_ms: u64,
    pub tokens: u64,
    pub cost: Option<f64>,
    pub currency: Option<String>,
    /// Calls that passed the gateway and ran, in order.
    pub tool_calls: Vec<CallView>,
    /// Calls the gateway, a policy, a hook or a person refused.
    pub refused_calls: Vec<CallView>,
    pub error: Option<Value>,
}

/// One tool call of a run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallView {
    pub tool: String,
    pub args: Value,
    /// Whether it succeeded (absent for a refused call, or one without a result).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A grader made ready: its spec with what it compiled.
pub(super) struct Prepared {
    pub(super) spec: GraderSpec,
    regex: Option<regex::Regex>,
    schema: Option<jsonschema::Validator>,
}

impl Prepared {
    /// Compiles what the grader needs; the workspace checked it already, so an error here
    /// is reported for the eval, not per case.
    pub(super) fn new(spec: &GraderSpec) -> Result<Self, String> {
        let regex = match (&spec.kind, &spec.pattern) {
            (GraderKind::Regex, Some(pattern)) => {
                Some(regex::Regex::new(pattern).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
        let schema = match (&spec.kind, &spec.schema) {
            (GraderKind::JsonSchema, Some(schema)) => {
                Some(jsonschema::validator_for(schema).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
        Ok(Self {
            spec: spec.clone(),
            regex,
            schema,
        })
    }

    /// Grades `run` with a deterministic grader; `None` for `judge` and `command`.
    pub(super) fn grade(&self, run: &RunView) -> Option<GraderResult> {
        let spec = &self.spec;
        let output = run.output.as_deref().unwrap_or("");
        let (passed, detail) = match spec.kind {
            GraderKind::Equals => equals(spec, run),
            GraderKind::Contains => {
                let wanted = spec.value.as_ref().and_then(Value::as_str).unwrap_or("");
                let found = if spec.ignore_case == Some(true) {
                    output.to_lowercase().contains(&wanted.to_lowercase())
                } else {
                    output.contains(wanted)
                };
                (
                    found,
                    format!(
                        "{} `{wanted}`",
                        if found {
                            "contains"
                        } else {
                            "does not contain"
                        }
                    ),
                )
            }
            GraderKind::Regex => {
                let matched = self.regex.as_ref().is_some_and(|r| r.is_match(output));
                let pattern = spec.pattern.as_deref().unwrap_or("");
                (
                    matched,
                    format!(
                        "{} /{pattern}/",
                        if matched { "matches" } else { "does not match" }
                    ),
                )
            }
            GraderKind::JsonSchema => match (&run.value, &self.schema) {
                (Some(value), Some(schema)) => match schema.iter_errors(value).next() {
                    None => (true, "valid against the schema".into()),
                    Some(error) => (false, format!("at `{}`: {error}", error.instance_path())),
                },
                (None, _) => (false, "the answer is not JSON".into()),
                (_, None) => (false, "no schema".into()),
            },
            GraderKind::JsonPointer => {
                let pointer = spec.pointer.as_deref().unwrap_or("");
                match run.value.as_ref().and_then(|v| v.pointer(pointer)) {
                    None => (false, format!("nothing at `{pointer}`")),
                    Some(found) => match &spec.value {
                        None => (true, format!("`{pointer}` is {found}")),
                        Some(wanted) => (
                            same(found, wanted),
                            format!("`{pointer}` is {found}, expected {wanted}"),
                        ),
                    },
                }
            }
            GraderKind::ToolCalled => {
                let tool = spec.tool.as_deref().unwrap_or("");
                let calls: Vec<&CallView> =
                    run.tool_calls.iter().filter(|c| c.tool == tool).collect();
                let matching = calls
                    .iter()
                    .any(|c| spec.args.as_ref().is_none_or(|args| subset(args, &c.args)));
                let detail = match (calls.len(), matching) {
                    (0, _) => match run.refused_calls.iter().find(|c| c.tool == tool) {
                        Some(refused) => format!(
                            "`{tool}` was refused: {}",
                            refused.reason.as_deref().unwrap_or("no reason given")
                        ),
                        None => format!("`{tool}` was not called"),
                    },
                    (n, true) => {
                        format!("`{tool}` called {n} time{}", if n == 1 { "" } else { "s" })
                    }
                    (_, false) => format!(
                        "`{tool}` called, but never with {}",
                        spec.args.as_ref().map(Value::to_string).unwrap_or_default()
                    ),
                };
                (matching, detail)
            }
            GraderKind::NoToolCalled => match &spec.tool {
                Some(tool) => {
                    let called = run.tool_calls.iter().any(|c| &c.tool == tool);
                    (
                        !called,
                        format!(
                            "`{tool}` {}",
                            if called {
                                "was called"
                            } else {
                                "was not called"
                            }
                        ),
                    )
                }
                None => {
                    let names: Vec<&str> = run.tool_calls.iter().map(|c| c.tool.as_str()).collect();
                    (
                        names.is_empty(),
                        if names.is_empty() {
                            "no tool called".into()
                        } else {
                            format!("called {}", names.join(", "))
                        },
                    )
                }
            },
            GraderKind::FinishReason => {
                let wanted = spec.value.as_ref().and_then(Value::as_str).unwrap_or("");
                let found = run.finish_reason.as_deref().unwrap_or("none");
                (
                    found == wanted,
                    format!("finished `{found}`, expected `{wanted}`"),
                )
            }
            GraderKind::MaxSteps => {
                let max = spec.value.as_ref().and_then(Value::as_u64).unwrap_or(0);
                (
                    u64::from(run.steps) <= max,
                    format!("{} steps, at most {max}", run.steps),
                )
            }
            GraderKind::MaxCost => {
                let max = spec.value.as_ref().and_then(Value::as_f64).unwrap_or(0.0);
                match run.cost {
                    Some(cost) => (cost <= max, format!("cost {cost}, at most {max}")),
                    None => {
                        return Some(errored(
                            spec,
                            "the run's cost is unknown: its model declares no `pricing`".into(),
                        ));
                    }
                }
            }
            GraderKind::MaxLatency => {
                let max = spec
                    .value
                    .as_ref()
                    .and_then(keel_workspace::eval::latency_ms)
                    .unwrap_or(0);
                (
                    run.duration_ms <= max,
                    format!("took {} ms, at most {max} ms", run.duration_ms),
                )
            }
            GraderKind::Judge | GraderKind::Command => return None,
        };
        Some(scored(spec, if passed { 1.0 } else { 0.0 }, passed, detail))
    }
}

fn equals(spec: &GraderSpec, run: &RunView) -> (bool, String) {
    let wanted = spec.value.clone().unwrap_or(Value::Null);
    if let Some(pointer) = &spec.pointer {
        return match run.value.as_ref().and_then(|v| v.pointer(pointer)) {
            Some(found) => (
                same(found, &wanted),
                format!("`{pointer}` is {found}, expected {wanted}"),
            ),
            None => (false, format!("nothing at `{pointer}`")),
        };
    }
    match &wanted {
        Value::String(text) => {
            let output = run.output.as_deref().unwrap_or("").trim();
            (
                output == text.trim(),
                format!(
                    "answer {}",
                    if output == text.trim() {
                        "equals the expected text".to_owned()
                    } else {
                        format!("is {:?}", clip(output))
                    }
                ),
            )
        }
        _ => match &run.value {
            Some(found) => (
                same(found, &wanted),
                format!("value is {}", clip(&found.to_string())),
            ),
            None => (false, "the answer is not JSON".into()),
        },
    }
}

/// Two JSON values are the same, numbers compared by value (`5` and `5.0` are).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// `expected` is contained in `found`: every key of an object (recursively), arrays element
/// by element, other values equal.
pub(super) fn subset(expected: &Value, found: &Value) -> bool {
    match (expected, found) {
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| subset(v, w))),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| subset(x, y))
        }
        _ => same(expected, found),
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A result with a score.
pub(super) fn scored(spec: &GraderSpec, score: f64, passed: bool, detail: String) -> GraderResult {
    GraderResult {
        name: spec.label(),
        kind: spec.kind.as_str().to_owned(),
        weight: spec.weight,
        score: Some(score),
        passed,
        detail,
        error: None,
        reasoning: None,
    }
}

/// A grader that could not grade: never a pass.
pub(super) fn errored(spec: &GraderSpec, error: String) -> GraderResult {
    GraderResult {
        name: spec.label(),
        kind: spec.kind.as_str().to_owned(),
        weight: spec.weight,
        score: None,
        passed: false,
        detail: "could not grade".into(),
        error: Some(error),
        reasoning: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_of_arguments_matches_and_a_different_value_does_not() {
        assert!(subset(
            &json!({"path": "a"}),
            &json!({"path": "a", "limit": 5})
        ));
        assert!(subset(&json!({"limit": 5}), &json!({"limit": 5.0})));
        assert!(!subset(&json!({"path": "b"}), &json!({"path": "a"})));
        assert!(!subset(&json!({"missing": 1}), &json!({})));
        assert!(!subset(&json!([1]), &json!([1, 2])));
    }
}
