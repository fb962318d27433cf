//! Two eval results side by side: per case, a regression (it passed less often), an
//! improvement (more often) or unchanged; score, cost and latency deltas; and for a case that
//! changed, the first event where its two runs diverged (replay's divergence report).

use keel_types::RequestId;
use keel_types::eval::{CaseResult, EvalResult};
use serde::Serialize;
use serde_json::Value;

use super::invalid;
use crate::{Error, Runtime};

/// What became of a case from the first result to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    Unchanged,
    /// Only in the second result.
    Added,
    /// Only in the first.
    Removed,
}

/// One case in both results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseChange {
    pub case: String,
    pub verdict: Verdict,
    /// The share of the case's runs that passed, before and after.
    pub pass_rate: (Option<f64>, Option<f64>),
    pub score_delta: f64,
    pub cost_delta: f64,
    pub latency_delta_ms: i64,
    /// The runs compared (the first of each result's runs of the case).
    pub runs: (Option<String>, Option<String>),
    /// Where those runs' events first differ (`{seq, expected, found}`), for a case whose
    /// pass rate or score changed; absent when they agree or a run is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Value>,
}

/// Two results compared.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub before: String,
    pub after: String,
    pub eval: String,
    /// Both ran the same cases and graders.
    pub same_version: bool,
    pub same_workspace: bool,
    pub regressions: usize,
    pub improvements: usize,
    pub unchanged: usize,
    pub pass_rate_delta: f64,
    pub cost_delta: f64,
    pub latency_p50_delta_ms: i64,
    pub cases: Vec<CaseChange>,
}

/// Compares results `before` and `after` (ids) case by case, matched by case name.
pub async fn compare(runtime: &Runtime, before: &str, after: &str) -> Result<Comparison, Error> {
    let load = |id: &str| {
        let id = id.to_owned();
        async move {
            runtime
                .eval_result(&id)
                .await?
                .ok_or_else(|| invalid(format!("no eval result `{id}` (see `keel eval list`)")))
        }
    };
    let (a, b) = (load(before).await?, load(after).await?);
    let mut names: Vec<&str> = Vec::new();
    for case in a.cases.iter().chain(&b.cases) {
        if !names.contains(&case.case.as_str()) {
            names.push(&case.case);
        }
    }
    let mut cases = Vec::with_capacity(names.len());
    for name in names {
        let runs_a: Vec<&CaseResult> = a.cases.iter().filter(|c| c.case == name).collect();
        let runs_b: Vec<&CaseResult> = b.cases.iter().filter(|c| c.case == name).collect();
        let (rate_a, rate_b) = (pass_rate(&runs_a), pass_rate(&runs_b));
        let verdict = match (rate_a, rate_b) {
            (None, _) => Verdict::Added,
            (_, None) => Verdict::Removed,
            (Some(x), Some(y)) if y + 1e-9 < x => Verdict::Regression,
            (Some(x), Some(y)) if y > x + 1e-9 => Verdict::Improvement,
            _ => Verdict::Unchanged,
        };
        let first = |runs: &[&CaseResult]| runs.first().and_then(|c| c.request_id.clone());
        let (run_a, run_b) = (first(&runs_a), first(&runs_b));
        let score_delta = mean(&runs_b, |c| c.score) - mean(&runs_a, |c| c.score);
        let changed = verdict != Verdict::Unchanged || score_delta.abs() > 1e-9;
        let divergence = match (&run_a, &run_b) {
            (Some(x), Some(y)) if changed => divergence(runtime, x, y).await?,
            _ => None,
        };
        cases.push(CaseChange {
            case: name.to_owned(),
            verdict,
            pass_rate: (rate_a, rate_b),
            score_delta,
            cost_delta: mean(&runs_b, |c| c.cost) - mean(&runs_a, |c| c.cost),
            latency_delta_ms: mean(&runs_b, |c| c.latency_ms as f64).round() as i64
                - mean(&runs_a, |c| c.latency_ms as f64).round() as i64,
            runs: (run_a, run_b),
            divergence,
        });
    }
    let count = |v: Verdict| cases.iter().filter(|c| c.verdict == v).count();
    let summary = |r: &EvalResult| {
        r.summary
            .clone()
            .unwrap_or_else(|| super::summary::summarise(&r.cases, r.threshold))
    };
    let (sa, sb) = (summary(&a), summary(&b));
    Ok(Comparison {
        before: a.id.clone(),
        after: b.id.clone(),
        eval: b.eval.clone(),
        same_version: a.version == b.version,
        same_workspace: a.workspace_digest == b.workspace_digest,
        regressions: count(Verdict::Regression),
        improvements: count(Verdict::Improvement),
        unchanged: count(Verdict::Unchanged),
        pass_rate_delta: sb.pass_rate - sa.pass_rate,
        cost_delta: sb.cost - sa.cost,
        latency_p50_delta_ms: sb.latency.p50_ms as i64 - sa.latency.p50_ms as i64,
        cases,
    })
}

fn pass_rate(runs: &[&CaseResult]) -> Option<f64> {
    (!runs.is_empty()).then(|| runs.iter().filter(|c| c.passed).count() as f64 / runs.len() as f64)
}

fn mean(runs: &[&CaseResult], of: impl Fn(&CaseResult) -> f64) -> f64 {
    if runs.is_empty() {
        return 0.0;
    }
    runs.iter().map(|c| of(c)).sum::<f64>() / runs.len() as f64
}

/// Where run `b`'s events first differ from run `a`'s, when both are still stored.
async fn divergence(runtime: &Runtime, a: &str, b: &str) -> Result<Option<Value>, Error> {
    let (a, b) = (RequestId::from(a), RequestId::from(b));
    if runtime.runs().get(&a).await?.is_none() || runtime.runs().get(&b).await?.is_none() {
        return Ok(None);
    }
    runtime.case_divergence(&a, &b).await
}
