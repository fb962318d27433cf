//! Scoring: each case's verdict against its expectation, and the figures of the report.
//!
//! A case is **correct** when the guard did what it expects: `pass` — accepted, the tool sent,
//! the arguments exactly as sent; `repair` — repaired, the expected tool, exactly the expected
//! arguments (any, when a user's case gives none); `block` — blocked. Every other case is
//! either a **false block** (blocked, though it should have run) or **let through wrongly**
//! (allowed to run, though it should have been blocked, or with other arguments or another
//! tool than expected).
//!
//! - repair precision = repaired correctly / repaired by the guard (of the calls the guard
//!   repaired, those it was expected to repair and repaired exactly right);
//! - repair recall = repaired correctly / expected to be repaired;
//! - block rate = blocked / expected to be blocked.
//!
//! A ratio with nothing to divide is absent, not 0 or 1.

use std::collections::BTreeMap;

use keel_types::{GuardDecision, Issue, Repair};
use keel_workspace::GatewayMode;
use serde::Serialize;
use serde_json::Value;

use super::{Expect, GatewayCase};
use crate::gateway::Guarded;

/// What the guard made of a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    pub decision: GuardDecision,
    /// The tool that would run (the name sent, or the one it was repaired to).
    pub tool: String,
    /// The arguments the tool would receive; absent when blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<Repair>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
}

impl Observed {
    /// The guard's verdict, as the report shows it.
    pub fn of(guarded: &Guarded) -> Self {
        Self {
            decision: guarded.decision(),
            tool: guarded.tool().to_owned(),
            arguments: guarded.arguments().cloned(),
            repairs: guarded.repairs().to_vec(),
            issues: guarded.issues().to_vec(),
        }
    }
}

/// How a case's verdict compares with its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Correct,
    /// Blocked, though expected to pass or be repaired.
    FalseBlock,
    /// Allowed, though expected to be blocked, or with arguments or a tool other than
    /// expected.
    LetThrough,
}

/// One case and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseOutcome {
    pub case: GatewayCase,
    /// The agent that sent it.
    pub agent: String,
    /// The gateway mode of the tool it must run.
    pub mode: GatewayMode,
    pub got: Observed,
    pub verdict: Verdict,
}

impl CaseOutcome {
    /// Judges the guard's verdict on `case`.
    pub fn judge(case: GatewayCase, agent: &str, mode: GatewayMode, guarded: &Guarded) -> Self {
        let got = Observed::of(guarded);
        let verdict = verdict(&case, &got);
        Self {
            case,
            agent: agent.to_owned(),
            mode,
            got,
            verdict,
        }
    }
}

/// The verdict on `got` for `case`.
pub(super) fn verdict(case: &GatewayCase, got: &Observed) -> Verdict {
    if got.decision == GuardDecision::Blocked {
        return match case.expect {
            Expect::Block => Verdict::Correct,
            Expect::Pass | Expect::Repair => Verdict::FalseBlock,
        };
    }
    let right = match case.expect {
        Expect::Block => false,
        Expect::Pass => {
            got.decision == GuardDecision::Accepted
                && got.tool == case.tool
                && got.arguments == Some(as_sent(&case.arguments))
        }
        Expect::Repair => {
            got.decision == GuardDecision::Repaired
                && got.tool == case.expected_tool()
                && case
                    .repaired
                    .as_ref()
                    .is_none_or(|expected| got.arguments.as_ref() == Some(expected))
        }
    };
    match right {
        true => Verdict::Correct,
        false => Verdict::LetThrough,
    }
}

/// The arguments a call carries as sent: its text parsed (empty text is no arguments).
fn as_sent(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The figures of a set of cases.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scores {
    pub cases: usize,
    pub correct: usize,
    pub expected_pass: usize,
    /// Expected to pass, and accepted as sent.
    pub passed: usize,
    pub expected_repair: usize,
    /// Repaired by the guard, rightly or not.
    pub repaired: usize,
    /// Expected to be repaired and repaired to exactly the expected call.
    pub repaired_correctly: usize,
    pub expected_block: usize,
    /// Expected to be blocked, and blocked.
    pub blocked: usize,
    pub false_blocks: usize,
    pub let_through: usize,
    /// `repairedCorrectly / repaired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair_precision: Option<f64>,
    /// `repairedCorrectly / expectedRepair`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair_recall: Option<f64>,
    /// `blocked / expectedBlock`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_rate: Option<f64>,
}

impl Scores {
    /// The figures of `outcomes`.
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a CaseOutcome>) -> Self {
        let mut s = Self::default();
        for outcome in outcomes {
            let correct = outcome.verdict == Verdict::Correct;
            s.cases += 1;
            s.correct += usize::from(correct);
            s.false_blocks += usize::from(outcome.verdict == Verdict::FalseBlock);
            s.let_through += usize::from(outcome.verdict == Verdict::LetThrough);
            s.repaired += usize::from(outcome.got.decision == GuardDecision::Repaired);
            match outcome.case.expect {
                Expect::Pass => {
                    s.expected_pass += 1;
                    s.passed += usize::from(correct);
                }
                Expect::Repair => {
                    s.expected_repair += 1;
                    s.repaired_correctly += usize::from(correct);
                }
                Expect::Block => {
                    s.expected_block += 1;
                    s.blocked += usize::from(correct);
                }
            }
        }
        s.repair_precision = ratio(s.repaired_correctly, s.repaired);
        s.repair_recall = ratio(s.repaired_correctly, s.expected_repair);
        s.block_rate = ratio(s.blocked, s.expected_block);
        s
    }
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The figures of one kind of case.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindScores {
    pub kind: String,
    #[serde(flatten)]
    pub scores: Scores,
}

/// A tool the evaluation covered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEvaluated {
    pub tool: String,
    /// The agent whose inventory and gateway mode it was evaluated with.
    pub agent: String,
    pub mode: GatewayMode,
    /// Its cases: generated and the dataset's literal ones.
    pub cases: usize,
}

/// A tool or a case the evaluation left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// The tool, or the case's name.
    pub what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub reason: String,
}

impl Skipped {
    pub(super) fn tool(tool: &str, agent: &str, reason: &str) -> Self {
        Self {
            what: tool.to_owned(),
            agent: Some(agent.to_owned()),
            reason: reason.to_owned(),
        }
    }

    pub(super) fn case(case: &GatewayCase, reason: String) -> Self {
        Self {
            what: format!("case {} ({})", case.name, case.origin),
            agent: case.agent.clone(),
            reason,
        }
    }
}

/// The evaluation's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayReport {
    /// The agents whose tools were evaluated.
    pub agents: Vec<String>,
    pub tools: Vec<ToolEvaluated>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// The model the gateway asks when deterministic repairs fall short, if any (its answers
    /// are part of what was measured). Set by whoever knows the gateway's configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair_model: Option<String>,
    pub totals: Scores,
    /// Per kind, in the dataset's order, then the literal cases' own kinds by name.
    pub kinds: Vec<KindScores>,
    /// The cases allowed to run wrongly.
    pub let_through: Vec<CaseOutcome>,
    /// The cases blocked though they should have run.
    pub false_blocks: Vec<CaseOutcome>,
    /// Every case, in the order guarded.
    pub cases: Vec<CaseOutcome>,
}

/// The report of `outcomes`.
pub(super) fn report(
    agents: Vec<String>,
    tools: Vec<ToolEvaluated>,
    skipped: Vec<Skipped>,
    outcomes: Vec<CaseOutcome>,
) -> GatewayReport {
    let mut by_kind: BTreeMap<(usize, &str), Vec<&CaseOutcome>> = BTreeMap::new();
    for outcome in &outcomes {
        let kind = outcome.case.kind.as_str();
        let known = super::Mutation::ALL.iter().position(|m| m.as_str() == kind);
        let rank = known.unwrap_or(super::Mutation::ALL.len());
        by_kind.entry((rank, kind)).or_default().push(outcome);
    }
    let kinds = by_kind
        .into_iter()
        .map(|((_, kind), outcomes)| KindScores {
            kind: kind.to_owned(),
            scores: Scores::of(outcomes),
        })
        .collect();
    let pick = |verdict: Verdict| -> Vec<CaseOutcome> {
        outcomes
            .iter()
            .filter(|o| o.verdict == verdict)
            .cloned()
            .collect()
    };
    GatewayReport {
        agents,
        tools,
        skipped,
        repair_model: None,
        totals: Scores::of(&outcomes),
        kinds,
        let_through: pick(Verdict::LetThrough),
        false_blocks: pick(Verdict::FalseBlock),
        cases: outcomes,
    }
}
