//! `keel eval gateway`: the gateway's evaluation (docs/evals.md#evaluating-the-tool-gateway) — the built-in dataset
//! of malformed calls made from the workspace's own tool schemas, and the user's case files,
//! guarded by the runtime's gateway (no tool runs) and scored: repair precision and recall,
//! block rate with their counts, a table per mutation kind, and the calls let through wrongly.
//! It reports; it does not gate: the exit status is 0 whatever the figures (2 for a bad case
//! file or an unknown agent).
//!
//! Wiring, from `keel eval`'s dispatcher (which has opened the runtime with
//! `workspace::start`):
//!
//! ```ignore
//! // in `enum EvalCommand`:
//! /// Evaluate the tool gateway on malformed calls made from the workspace's tool schemas.
//! Gateway(eval_gateway::EvalGatewayArgs),
//! // in `eval()`'s match:
//! EvalCommand::Gateway(args) => eval_gateway::run(&runtime, args).await,
//! ```
//!
//! with `mod eval_gateway;` in `main.rs`. Signature:
//! `pub(crate) async fn run(runtime: &keel::Runtime, args: EvalGatewayArgs) -> Result<(), CliError>`.
//! It stops the MCP servers it started before returning.

use std::path::PathBuf;

use keel::Runtime;
use keel::gateway_eval::{CaseOutcome, GatewayReport, Scores, read_case_files};

use crate::error::CliError;
use crate::out;

/// Longest argument text or value shown in a line of the report.
const MAX_SHOWN_CHARS: usize = 100;

#[derive(Debug, clap::Args)]
pub(crate) struct EvalGatewayArgs {
    /// Only this agent's tools, with its gateway mode (default: every agent's tools, each
    /// tool once).
    #[arg(long)]
    agent: Option<String>,
    /// A JSON-lines file of your own cases, added to the built-in dataset (repeatable):
    /// `{"tool": …, "arguments": …, "expect": "repair"|"block"|"pass", "repaired": …, "name": …}`.
    #[arg(long = "cases", value_name = "FILE")]
    cases: Vec<PathBuf>,
    /// Print the whole report (every case and what the guard made of it) as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the evaluation on `runtime` and prints its report.
pub(crate) async fn run(runtime: &Runtime, args: EvalGatewayArgs) -> Result<(), CliError> {
    let extra = read_case_files(&args.cases).map_err(CliError::usage)?;
    let report = runtime
        .evaluate_gateway(args.agent.as_deref(), &extra)
        .await;
    // MCP servers the evaluation started end with it (a stdio server's whole process group).
    runtime.stop_mcp().await;
    let report = report.map_err(CliError::usage)?;
    if args.json {
        out::line(&serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_report(&report);
    Ok(())
}

fn print_report(report: &GatewayReport) {
    let t = &report.totals;
    out::line(&format!(
        "Gateway evaluation: {} cases on {} tool{} (agents: {}); repair model: {}",
        t.cases,
        report.tools.len(),
        plural(report.tools.len()),
        report.agents.join(", "),
        report.repair_model.as_deref().unwrap_or("none"),
    ));
    for line in figures(t) {
        out::line(&format!("  {line}"));
    }
    out::line("");
    let tools = report.tools.iter().map(|tool| {
        vec![
            tool.tool.clone(),
            tool.agent.clone(),
            mode(tool.mode).to_owned(),
            tool.cases.to_string(),
        ]
    });
    for line in out::table(&["TOOL", "AGENT", "MODE", "CASES"], &[3], tools) {
        out::line(&line);
    }
    out::line("");
    let kinds = report.kinds.iter().map(|k| {
        let s = &k.scores;
        vec![
            k.kind.clone(),
            s.cases.to_string(),
            s.correct.to_string(),
            format!("{}/{}", s.repaired_correctly, s.expected_repair),
            percent(s.repair_precision),
            percent(s.repair_recall),
            format!("{}/{}", s.blocked, s.expected_block),
            s.false_blocks.to_string(),
            s.let_through.to_string(),
        ]
    });
    let headers = [
        "KIND",
        "CASES",
        "CORRECT",
        "REPAIRED",
        "PRECISION",
        "RECALL",
        "BLOCKED",
        "FALSE BLOCKS",
        "LET THROUGH",
    ];
    for line in out::table(&headers, &[1, 2, 3, 4, 5, 6, 7, 8], kinds) {
        out::line(&line);
    }
    print_list("Let through wrongly", &report.let_through);
    print_list("False blocks", &report.false_blocks);
    if !report.skipped.is_empty() {
        out::line("");
        out::line("Left out:");
        for skipped in &report.skipped {
            let agent = skipped
                .agent
                .as_ref()
                .map(|a| format!(" (agent {a})"))
                .unwrap_or_default();
            out::line(&format!("  {}{agent}: {}", skipped.what, skipped.reason));
        }
    }
}

/// The overall figures, one per line, each with its counts.
fn figures(t: &Scores) -> Vec<String> {
    vec![
        format!(
            "repair precision  {:>6}  ({} of {} repaired calls repaired as expected)",
            percent(t.repair_precision),
            t.repaired_correctly,
            t.repaired
        ),
        format!(
            "repair recall     {:>6}  ({} of {} calls to repair)",
            percent(t.repair_recall),
            t.repaired_correctly,
            t.expected_repair
        ),
        format!(
            "block rate        {:>6}  ({} of {} calls to block)",
            percent(t.block_rate),
            t.blocked,
            t.expected_block
        ),
        format!(
            "passed            {:>6}  ({} of {} valid calls accepted as sent)",
            percent(ratio(t.passed, t.expected_pass)),
            t.passed,
            t.expected_pass
        ),
        format!("false blocks      {:>6}", t.false_blocks),
        format!("let through       {:>6}", t.let_through),
        format!("correct           {:>6}  of {}", t.correct, t.cases),
    ]
}

/// The wrong cases of one sort, each with what was sent, expected and produced.
fn print_list(title: &str, outcomes: &[CaseOutcome]) {
    out::line("");
    if outcomes.is_empty() {
        out::line(&format!("{title}: none."));
        return;
    }
    out::line(&format!("{title} ({}):", outcomes.len()));
    for outcome in outcomes {
        let case = &outcome.case;
        out::line(&format!(
            "  {} [{}] agent {}, {} mode ({})",
            case.name,
            case.kind,
            outcome.agent,
            mode(outcome.mode),
            case.origin
        ));
        out::line(&format!(
            "    sent      {} {}",
            case.tool,
            shown(&case.arguments)
        ));
        let expected = match (&case.repaired, case.expect) {
            (Some(repaired), _) => format!(
                "repair → {} {}",
                case.expected_tool(),
                shown(&repaired.to_string())
            ),
            (None, expect) => expect.as_str().to_owned(),
        };
        out::line(&format!("    expected  {expected}"));
        out::line(&format!("    got       {}", produced(outcome)));
    }
}

/// What the guard made of a call: its decision, the tool and arguments it let through, the
/// repairs it made, or the first issue that blocked it.
fn produced(outcome: &CaseOutcome) -> String {
    let got = &outcome.got;
    let mut text = got.decision.as_str().to_owned();
    if let Some(arguments) = &got.arguments {
        text.push_str(&format!(
            " → {} {}",
            got.tool,
            shown(&arguments.to_string())
        ));
    }
    if !got.repairs.is_empty() {
        let repairs: Vec<String> = got
            .repairs
            .iter()
            .map(|r| match r.path.as_str() {
                "" => r.kind.as_str().to_owned(),
                path => format!("{} {path}", r.kind.as_str()),
            })
            .collect();
        text.push_str(&format!(" (repairs: {})", repairs.join(", ")));
    }
    if let Some(issue) = got.issues.first() {
        text.push_str(&format!(": {}", shown(&issue.message)));
    }
    text
}

fn shown(text: &str) -> String {
    if text.chars().count() <= MAX_SHOWN_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    cut.push('…');
    cut
}

fn percent(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn mode(mode: keel_workspace::GatewayMode) -> &'static str {
    match mode {
        keel_workspace::GatewayMode::Repair => "repair",
        keel_workspace::GatewayMode::Validate => "validate",
        keel_workspace::GatewayMode::Off => "off",
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_and_missing_ratios_shown_as_a_dash() {
        assert_eq!(shown("short"), "short");
        let long = shown(&"x".repeat(300));
        assert_eq!(long.chars().count(), MAX_SHOWN_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(percent(None), "-");
        assert_eq!(percent(Some(2.0 / 3.0)), "66.7%");
        assert_eq!(ratio(0, 0), None);
    }
}
