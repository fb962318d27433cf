//! The results of evaluations (`keel eval run`): each case's run and grades, and what the
//! whole eval came to. Stored as one record per eval run ([`crate::ports::EvalStore`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One run of an eval: which eval, exactly what was evaluated, and every case's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalResult {
    /// `evr_…`.
    pub id: String,
    /// The `Eval` document.
    pub eval: String,
    /// The digest of the eval document with its cases (`sha256:…`): two results with the same
    /// version ran the same cases and graders.
    pub version: String,
    /// The digest of the workspace's compiled documents when it ran (`sha256:…`).
    pub workspace_digest: String,
    /// What the cases ran: an agent's name or `workflow/<name>`.
    pub target: String,
    pub status: EvalStatus,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Who ran it (an API key's name, or the local user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub options: EvalOptions,
    /// The weighted score a case needed to pass.
    pub pass_score: f64,
    /// The share of cases that had to pass.
    pub threshold: f64,
    /// Each case's result, in case order then attempt order.
    #[serde(default)]
    pub cases: Vec<CaseResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<EvalSummary>,
    /// Why the eval could not run to its end (its cases' own failures are in `cases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where an eval run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalStatus {
    Running,
    /// Every case ran and was graded (whether they passed is in the summary).
    Completed,
    /// The eval stopped before its end (`error` says why).
    Failed,
}

impl EvalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// How an eval was run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalOptions {
    pub concurrency: u32,
    /// Runs per case.
    pub repeat: u32,
    /// The `Model` document every run used instead of its agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Model answers were replayed from each case's recorded run.
    #[serde(default)]
    pub replay: bool,
}

/// One run of one case, graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    /// The case's name (`case-<n>` when it has none).
    pub case: String,
    /// The case's position in the eval (0-based).
    pub index: usize,
    /// Which of the `repeat` runs (0-based).
    pub attempt: u32,
    /// The run (absent when it could not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The run's status (`completed`, `failed`, …).
    pub status: String,
    /// The weighted mean of the graders' scores, 0–1.
    pub score: f64,
    /// The score reached the eval's `passScore` and no grader erred.
    pub passed: bool,
    /// Why the case could not be graded (the run did not start, a grader erred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: u64,
    pub cost: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    pub tokens: u64,
    pub steps: u32,
    pub graders: Vec<GraderResult>,
    /// With `--replay`: where the replay's events first differ from the recorded run's
    /// (`{seq, expected, found}`); absent when they agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Value>,
}

/// What one grader found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraderResult {
    pub name: String,
    pub kind: String,
    pub weight: f64,
    /// 0–1; absent when the grader erred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    pub passed: bool,
    /// What it saw, in plain words.
    pub detail: String,
    /// Why it could not grade (a judge's malformed verdicts, a program that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A judge's reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// What an eval run came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalSummary {
    /// Distinct cases.
    pub cases: usize,
    /// Case runs (cases × repeat).
    pub runs: usize,
    pub passed: usize,
    pub failed: usize,
    /// Runs that could not be graded (counted as failed too).
    pub errors: usize,
    /// `passed / runs`.
    pub pass_rate: f64,
    pub mean_score: f64,
    /// The pass rate reached the threshold.
    pub passed_threshold: bool,
    pub cost: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    pub tokens: u64,
    pub latency: Percentiles,
    /// Each grader's pass rate over the runs, in the order graders first appear.
    pub graders: Vec<GraderSummary>,
    /// With `repeat` above 1: each case's pass rate and the variance of its score.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_case: Vec<CaseSummary>,
}

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

/// One grader over all runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraderSummary {
    pub name: String,
    pub kind: String,
    pub runs: usize,
    pub passed: usize,
    pub errors: usize,
    pub mean_score: f64,
}

/// One case over its repeated runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseSummary {
    pub case: String,
    pub runs: usize,
    pub passed: usize,
    pub pass_rate: f64,
    pub mean_score: f64,
    /// The population variance of the case's scores.
    pub variance: f64,
}
