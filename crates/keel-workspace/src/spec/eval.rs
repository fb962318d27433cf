//! `kind: Eval` — an evaluation of an agent or a workflow: cases (inline, or one per line of a
//! JSONL file in the workspace), graders with weights, the score a case needs to pass and the
//! pass rate the eval needs (`docs/evals.md`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Duration;
use keel_types::PermissionMode;

/// An `Eval` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalSpec {
    #[serde(default)]
    pub description: String,
    /// What each case runs: an agent or a workflow.
    pub target: EvalTarget,
    /// Cases written in the document; those of `casesFile` follow them.
    #[serde(default)]
    pub cases: Vec<EvalCase>,
    /// A JSONL file of cases, relative to the workspace folder: one case per line, each an
    /// object with the fields of a case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_file: Option<String>,
    /// Graders applied to every case (a case's own `expect` graders are added to them).
    #[serde(default)]
    pub graders: Vec<GraderSpec>,
    /// The weighted mean score (0–1) a case needs to pass (default 1: every grader passes).
    #[serde(default = "one")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub pass_score: f64,
    /// The share of cases (0–1) that must pass for the eval to pass (default 1);
    /// `keel eval run` exits non-zero below it.
    #[serde(default = "one")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub threshold: f64,
    /// How many cases run at once by default (`--concurrency` overrides; default 4).
    #[serde(default = "default_concurrency")]
    #[schemars(range(min = 1, max = 1024))]
    pub concurrency: u32,
    /// The permission mode of each case's run (default `dontAsk`: an eval never waits for a
    /// person, so a call that would ask is refused; `default` lets cases wait for approvals).
    #[serde(default = "dont_ask")]
    pub mode: PermissionMode,
    /// The time one case's run may take (default: the run's own limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

fn one() -> f64 {
    1.0
}

fn dont_ask() -> PermissionMode {
    PermissionMode::DontAsk
}

fn default_concurrency() -> u32 {
    4
}

/// What an eval's cases run: exactly one of `agent` and `workflow`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
}

impl EvalTarget {
    /// The name a request gives: the agent's, or `workflow/<name>`.
    pub fn request_agent(&self) -> String {
        match (&self.agent, &self.workflow) {
            (_, Some(workflow)) => format!("workflow/{workflow}"),
            (Some(agent), None) => agent.clone(),
            (None, None) => String::new(),
        }
    }
}

/// One case: what to ask, and what to expect of the answer beyond the eval's graders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalCase {
    /// The case's name in reports and comparisons (default: `case-<n>`, by position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The input: text for an agent; for a workflow, text or a JSON value (sent as JSON).
    pub input: Value,
    /// A session the run continues (created on first use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The request's metadata (e.g. `user`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Graders for this case only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<GraderSpec>,
    /// A recorded run of this case (its id): `keel eval run --replay` answers the case's
    /// model rounds from it instead of calling the model. `keel eval capture` sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
    /// A cassette file (relative to the workspace folder) of the case's recorded model
    /// answers: `--replay` answers from it, with no store needed. `keel eval capture
    /// --cassettes DIR` writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<String>,
    /// Where the case is written (`file:line`), filled in when the workspace loads.
    #[serde(skip_deserializing, default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub source: Option<String>,
}

/// What a grader checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GraderKind {
    /// The answer (or the value at `pointer` of its structured value) equals `value`.
    Equals,
    /// The answer contains the text `value` (`ignoreCase` to ignore case).
    Contains,
    /// The answer matches the regular expression `pattern`.
    Regex,
    /// The structured value (the answer read as JSON) satisfies the JSON Schema `schema`.
    JsonSchema,
    /// The structured value has a value at `pointer` (equal to `value`, when given).
    JsonPointer,
    /// The run called `tool`, with arguments containing `args` (a subset), when given.
    ToolCalled,
    /// The run called no tool, or not `tool` when given.
    NoToolCalled,
    /// The run ended with finish reason `value` (`stop`, `length`, `tool_calls`, …).
    FinishReason,
    /// The run took at most `value` model steps.
    MaxSteps,
    /// The run cost at most `value` (in its models' pricing currency).
    MaxCost,
    /// The run took at most `value` (a duration like `2s`).
    MaxLatency,
    /// A judge model scores the answer on `rubric` from 1 to `scale`.
    Judge,
    /// A program reads the run as JSON on stdin and answers a score from 0 to 1.
    Command,
}

impl GraderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "equals",
            Self::Contains => "contains",
            Self::Regex => "regex",
            Self::JsonSchema => "jsonSchema",
            Self::JsonPointer => "jsonPointer",
            Self::ToolCalled => "toolCalled",
            Self::NoToolCalled => "noToolCalled",
            Self::FinishReason => "finishReason",
            Self::MaxSteps => "maxSteps",
            Self::MaxCost => "maxCost",
            Self::MaxLatency => "maxLatency",
            Self::Judge => "judge",
            Self::Command => "command",
        }
    }

    /// The fields this kind requires and those it also accepts (besides `kind`, `name` and
    /// `weight`).
    pub fn fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Self::Equals => (&["value"], &["pointer"]),
            Self::Contains => (&["value"], &["ignoreCase"]),
            Self::Regex => (&["pattern"], &[]),
            Self::JsonSchema => (&["schema"], &[]),
            Self::JsonPointer => (&["pointer"], &["value"]),
            Self::ToolCalled => (&["tool"], &["args"]),
            Self::NoToolCalled => (&[], &["tool"]),
            Self::FinishReason | Self::MaxSteps | Self::MaxCost | Self::MaxLatency => {
                (&["value"], &[])
            }
            Self::Judge => (&["model", "rubric"], &["scale"]),
            Self::Command => (&["command"], &["timeout"]),
        }
    }
}

/// One grader. Which fields apply depends on `kind` ([`GraderKind::fields`]); `keel validate`
/// names a missing one and one that does not apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GraderSpec {
    pub kind: GraderKind,
    /// The grader's name in reports (default: its kind, with its subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its weight in the case's score (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 0.0))]
    pub weight: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_case: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub args: Option<Value>,
    /// The judge's `Model` document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the judge scores, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
    /// The judge's top score (default 5; scores run from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 100))]
    pub scale: Option<u32>,
    /// The grading program and its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The longest the program may take (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

impl GraderSpec {
    /// The grader's name in reports: its own, or its kind with what it looks at.
    pub fn label(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let kind = self.kind.as_str();
        let subject = match self.kind {
            GraderKind::ToolCalled | GraderKind::NoToolCalled => self.tool.clone(),
            GraderKind::JsonPointer => self.pointer.clone(),
            GraderKind::Equals => self.pointer.clone(),
            GraderKind::Judge => self.model.clone(),
            GraderKind::Command => self.command.first().cloned(),
            _ => None,
        };
        match subject {
            Some(subject) => format!("{kind} {subject}"),
            None => kind.to_owned(),
        }
    }

    /// Which of the kind-specific fields are set, by name.
    pub fn fields_set(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        let mut note = |name: &'static str, present: bool| {
            if present {
                set.push(name);
            }
        };
        note("value", self.value.is_some());
        note("ignoreCase", self.ignore_case.is_some());
        note("pattern", self.pattern.is_some());
        note("schema", self.schema.is_some());
        note("pointer", self.pointer.is_some());
        note("tool", self.tool.is_some());
        note("args", self.args.is_some());
        note("model", self.model.is_some());
        note("rubric", self.rubric.is_some());
        note("scale", self.scale.is_some());
        note("command", !self.command.is_empty());
        note("timeout", self.timeout.is_some());
        set
    }
}
