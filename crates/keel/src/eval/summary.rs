//! What an eval run came to: pass rate, scores, cost, latency percentiles, each grader's pass
//! rate and, with repeats, each case's pass rate and score variance.

use keel_types::eval::{CaseResult, CaseSummary, EvalSummary, GraderSummary, Percentiles};

/// Summarises `cases`; the eval passes when the pass rate reaches `threshold`.
pub(super) fn summarise(cases: &[CaseResult], threshold: f64) -> EvalSummary {
    let runs = cases.len();
    let passed = cases.iter().filter(|c| c.passed).count();
    let errors = cases.iter().filter(|c| c.error.is_some()).count();
    let pass_rate = ratio(passed, runs);
    let mut latencies: Vec<u64> = cases.iter().map(|c| c.latency_ms).collect();
    latencies.sort_unstable();
    let mut graders: Vec<GraderSummary> = Vec::new();
    for grader in cases.iter().flat_map(|c| &c.graders) {
        let index = match graders.iter().position(|g| g.name == grader.name) {
            Some(index) => index,
            None => {
                graders.push(GraderSummary {
                    name: grader.name.clone(),
                    kind: grader.kind.clone(),
                    runs: 0,
                    passed: 0,
                    errors: 0,
                    mean_score: 0.0,
                });
                graders.len() - 1
            }
        };
        let summary = &mut graders[index];
        summary.runs += 1;
        summary.passed += usize::from(grader.passed);
        summary.errors += usize::from(grader.error.is_some());
        summary.mean_score += grader.score.unwrap_or(0.0);
    }
    for summary in &mut graders {
        summary.mean_score /= summary.runs.max(1) as f64;
    }
    let distinct = cases.iter().map(|c| c.index).max().map_or(0, |m| m + 1);
    let repeated = cases.iter().any(|c| c.attempt > 0);
    let per_case = if repeated {
        (0..distinct)
            .filter_map(|index| {
                let runs: Vec<&CaseResult> = cases.iter().filter(|c| c.index == index).collect();
                let first = runs.first()?;
                let scores: Vec<f64> = runs.iter().map(|c| c.score).collect();
                let mean = scores.iter().sum::<f64>() / scores.len() as f64;
                let variance =
                    scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / scores.len() as f64;
                let passed = runs.iter().filter(|c| c.passed).count();
                Some(CaseSummary {
                    case: first.case.clone(),
                    runs: runs.len(),
                    passed,
                    pass_rate: ratio(passed, runs.len()),
                    mean_score: mean,
                    variance,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    EvalSummary {
        cases: distinct,
        runs,
        passed,
        failed: runs - passed,
        errors,
        pass_rate,
        mean_score: cases.iter().map(|c| c.score).sum::<f64>() / runs.max(1) as f64,
        passed_threshold: runs > 0 && pass_rate + 1e-9 >= threshold,
        cost: cases.iter().map(|c| c.cost).sum(),
        currency: cases.iter().find_map(|c| c.currency.clone()),
        tokens: cases.iter().map(|c| c.tokens).sum(),
        latency: Percentiles {
            p50_ms: percentile(&latencies, 50),
            p90_ms: percentile(&latencies, 90),
            p99_ms: percentile(&latencies, 99),
            max_ms: latencies.last().copied().unwrap_or(0),
        },
        graders,
        per_case,
    }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The nearest-rank percentile of sorted `values`.
pub(super) fn percentile(values: &[u64], p: usize) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = (p * values.len()).div_ceil(100).max(1);
    values[rank.min(values.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50), 50);
        assert_eq!(percentile(&values, 99), 99);
        assert_eq!(percentile(&[7], 90), 7);
        assert_eq!(percentile(&[], 50), 0);
    }
}
