//! `keel eval run|list|show|compare|capture|gateway`: running an `Eval` document's cases as recorded
//! runs and grading them (a table of cases and graders; exit 1 below the eval's threshold, for
//! CI; `--junit` for CI's test reports), the stored results, two results compared, and cases
//! captured from recorded runs (docs/evals.md); `gateway` is in `eval_gateway.rs`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use keel::RunFilter;
use keel::eval::{CaseChange, Comparison, EvalRun, Verdict};
use keel_types::eval::{CaseResult, EvalResult, EvalStatus};

use crate::error::CliError;
use crate::follow::OutputArgs;
use crate::{out, workspace};

#[derive(Debug, Subcommand)]
pub(crate) enum EvalCommand {
    /// Run an eval: each case a recorded run, graded as it ends. Exits 1 when the pass rate
    /// is below the eval's threshold.
    Run {
        /// The `Eval` document.
        name: String,
        /// Cases at once (default: the eval's `concurrency`).
        #[arg(long)]
        concurrency: Option<u32>,
        /// Runs per case: each case's pass rate and score variance are reported.
        #[arg(long)]
        repeat: Option<u32>,
        /// A `Model` document every agent run uses instead of its agent's.
        #[arg(long)]
        model: Option<String>,
        /// Answer each case's model rounds from its recorded run (`recorded:`) instead of
        /// calling a model; where a replay's events diverge from the recording is reported.
        #[arg(long)]
        replay: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Also write the result as a JUnit XML report to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Stored eval results, newest first.
    List {
        /// Only results of this eval.
        #[arg(long)]
        eval: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One stored result: every case with its graders.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
        /// Write the result as a JUnit XML report to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Compare two results case by case: regressions, improvements, deltas, and where a
    /// changed case's runs diverged. Exits 1 when there is a regression.
    Compare {
        /// The result before.
        before: String,
        /// The result after.
        after: String,
        #[arg(long)]
        json: bool,
    },
    /// Turn recorded runs into cases (JSONL) with expectations proposed from what they did,
    /// for a person to edit; each names its run, so `keel eval run --replay` can replay it.
    Capture {
        /// Which runs: `key=value` pairs separated by commas — `agent`, `status`, `since`
        /// (a duration like 24h or an RFC 3339 time), `session`, `limit` (default 20).
        #[arg(long, value_name = "FILTER", default_value = "")]
        runs: String,
        /// The JSONL file to write (`-`: stdout).
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Add to the file instead of replacing it.
        #[arg(long)]
        append: bool,
        /// Also write each run's model answers as a cassette into this folder (relative to
        /// the workspace), named by its case: `--replay` then needs no store (a clean CI clone).
        #[arg(long, value_name = "DIR")]
        cassettes: Option<String>,
    },
    /// Measure the tool-call guard: a built-in dataset of malformed calls against the
    /// workspace's own tool schemas; repair precision and recall, block rate, and the calls
    /// let through wrongly.
    Gateway(crate::eval_gateway::EvalGatewayArgs),
}

pub(crate) async fn eval(root: &Path, command: EvalCommand) -> Result<(), CliError> {
    // Stored results are read from the store alone, so they show even when the workspace's
    // configuration does not load (like `keel runs`).
    match command {
        EvalCommand::List { eval, limit, json } => {
            return list(root, eval.as_deref(), limit, json).await;
        }
        EvalCommand::Show { id, json, junit } => {
            return show(root, &id, json, junit.as_deref()).await;
        }
        _ => {}
    }
    let (runtime, _) = workspace::start(root, &OutputArgs::default()).await?;
    match command {
        EvalCommand::Run {
            name,
            concurrency,
            repeat,
            model,
            replay,
            json,
            junit,
        } => {
            let spec = runtime.eval_spec(&name).map_err(CliError::usage)?;
            let total = spec.cases.len() * repeat.unwrap_or(1).max(1) as usize;
            let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let progress = {
                let done = Arc::clone(&done);
                Arc::new(move |case: &CaseResult| {
                    let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    out::status(&format!(
                        "» {n}/{total} {} {}{}",
                        mark(case),
                        case.case,
                        case.error
                            .as_ref()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    ));
                })
            };
            let options = EvalRun {
                concurrency,
                repeat,
                model,
                replay,
                owner: None,
                progress: Some(progress),
            };
            let result = runtime
                .run_eval(&name, &options)
                .await
                .map_err(CliError::usage)?;
            if let Some(file) = &junit {
                write_file(file, &keel::eval::junit(&result))?;
            }
            report(&result, json)?;
            verdict(&result)
        }
        // Answered above, from the store.
        EvalCommand::List { .. } | EvalCommand::Show { .. } => Ok(()),
        EvalCommand::Compare {
            before,
            after,
            json,
        } => {
            let comparison = keel::eval::compare(&runtime, &before, &after)
                .await
                .map_err(CliError::usage)?;
            if json {
                out::line(&serde_json::to_string_pretty(&comparison)?);
            } else {
                print_comparison(&comparison);
            }
            match comparison.regressions {
                0 => Ok(()),
                n => Err(CliError::failed(format!(
                    "{n} case{} regressed from {before} to {after}",
                    if n == 1 { "" } else { "s" }
                ))),
            }
        }
        EvalCommand::Gateway(args) => crate::eval_gateway::run(&runtime, args).await,
        EvalCommand::Capture {
            runs,
            to,
            append,
            cassettes,
        } => {
            let filter = capture_filter(&runs)?;
            let cases = keel::eval::capture(&runtime, &filter, cassettes.as_deref())
                .await
                .map_err(CliError::failed)?;
            let mut text = String::new();
            for case in &cases {
                text.push_str(&serde_json::to_string(case)?);
                text.push('\n');
            }
            if to.as_os_str() == "-" {
                out::stdout_raw(&text);
            } else {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(&to)
                    .map_err(|e| CliError::failed(format!("cannot write {}: {e}", to.display())))?;
                file.write_all(text.as_bytes())
                    .map_err(|e| CliError::failed(format!("cannot write {}: {e}", to.display())))?;
                out::status(&format!(
                    "» {} case{} written to {}: edit the proposed expectations, then point an eval's casesFile at it",
                    cases.len(),
                    if cases.len() == 1 { "" } else { "s" },
                    to.display()
                ));
            }
            Ok(())
        }
    }
}

/// `--runs agent=support,status=completed,since=24h,limit=10` as a run filter.
fn capture_filter(text: &str) -> Result<RunFilter, CliError> {
    let mut filter = RunFilter {
        limit: Some(20),
        ..RunFilter::default()
    };
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::usage(format!(
                "invalid --runs `{pair}`: write key=value"
            )));
        };
        let value = value.trim();
        match key.trim() {
            "agent" => filter.agent = Some(value.to_owned()),
            "status" => {
                filter.status = Some(
                    value
                        .parse()
                        .map_err(|e| CliError::usage(format!("invalid --runs status: {e}")))?,
                )
            }
            "since" => filter.since = Some(crate::runs::parse_since(value)?),
            "session" => {
                filter.session = Some(
                    keel::SessionId::parse(value)
                        .map_err(|e| CliError::usage(format!("invalid --runs session: {e}")))?,
                )
            }
            "limit" => {
                filter.limit = Some(value.parse().map_err(|_| {
                    CliError::usage(format!("invalid --runs limit `{value}`: a number"))
                })?)
            }
            other => {
                return Err(CliError::usage(format!(
                    "unknown --runs key `{other}`: use agent, status, since, session or limit"
                )));
            }
        }
    }
    Ok(filter)
}

/// Exit 1 when the eval did not reach its threshold (or could not run to its end).
fn verdict(result: &EvalResult) -> Result<(), CliError> {
    if result.status == EvalStatus::Failed {
        return Err(CliError::failed(format!(
            "eval `{}` stopped: {}",
            result.eval,
            result.error.as_deref().unwrap_or("unknown error")
        )));
    }
    match &result.summary {
        Some(s) if s.passed_threshold => Ok(()),
        Some(s) => Err(CliError::failed(format!(
            "eval `{}`: pass rate {} is below its threshold {} (result {})",
            result.eval,
            percent(s.pass_rate),
            percent(result.threshold),
            result.id
        ))),
        None => Err(CliError::failed(format!(
            "eval `{}` has no summary",
            result.eval
        ))),
    }
}

fn report(result: &EvalResult, json: bool) -> Result<(), CliError> {
    if json {
        out::line(&serde_json::to_string_pretty(result)?);
        return Ok(());
    }
    let repeated = result.options.repeat > 1;
    let rows = result.cases.iter().map(|case| {
        let graders: Vec<String> = case
            .graders
            .iter()
            .map(|g| {
                format!(
                    "{} {}",
                    if g.error.is_some() {
                        "!"
                    } else if g.passed {
                        "✓"
                    } else {
                        "✗"
                    },
                    g.name
                )
            })
            .collect();
        vec![
            if repeated {
                format!("{} #{}", case.case, case.attempt + 1)
            } else {
                case.case.clone()
            },
            mark(case).to_owned(),
            format!("{:.2}", case.score),
            graders.join("  "),
            format!("{} ms", case.latency_ms),
            money(case.cost, case.currency.as_deref()),
            case.request_id.clone().unwrap_or_else(|| "-".into()),
        ]
    });
    for line in out::table(
        &[
            "CASE", "RESULT", "SCORE", "GRADERS", "LATENCY", "COST", "RUN",
        ],
        &[2, 4, 5],
        rows,
    ) {
        out::line(&line);
    }
    for case in &result.cases {
        for grader in case.graders.iter().filter(|g| !g.passed) {
            out::line(&format!(
                "  {} · {}: {}{}",
                case.case,
                grader.name,
                grader.error.as_deref().unwrap_or(&grader.detail),
                grader
                    .reasoning
                    .as_ref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default()
            ));
        }
        if case.graders.is_empty()
            && let Some(error) = &case.error
        {
            out::line(&format!("  {}: {error}", case.case));
        }
        if let Some(divergence) = &case.divergence {
            out::line(&format!(
                "  {}: replay {} diverged from its recorded run at event {}: expected {}, found {}",
                case.case,
                case.request_id.as_deref().unwrap_or("-"),
                divergence["seq"],
                divergence["expected"],
                divergence["found"]
            ));
        }
    }
    let Some(s) = &result.summary else {
        out::line(&format!("{} {}", result.id, result.status.as_str()));
        return Ok(());
    };
    out::line("");
    out::line(&format!(
        "{}: {}/{} passed ({}; threshold {}), mean score {:.2}, {} errors",
        result.eval,
        s.passed,
        s.runs,
        percent(s.pass_rate),
        percent(result.threshold),
        s.mean_score,
        s.errors
    ));
    out::line(&format!(
        "cost {} · {} tokens · latency p50 {} ms, p90 {} ms, p99 {} ms",
        money(s.cost, s.currency.as_deref()),
        s.tokens,
        s.latency.p50_ms,
        s.latency.p90_ms,
        s.latency.p99_ms
    ));
    let graders: Vec<String> = s
        .graders
        .iter()
        .map(|g| format!("{} {}/{}", g.name, g.passed, g.runs))
        .collect();
    out::line(&format!("graders: {}", graders.join(" · ")));
    if !s.per_case.is_empty() {
        let rows = s.per_case.iter().map(|c| {
            vec![
                c.case.clone(),
                format!("{}/{}", c.passed, c.runs),
                percent(c.pass_rate),
                format!("{:.2}", c.mean_score),
                format!("{:.4}", c.variance),
            ]
        });
        for line in out::table(
            &["CASE", "PASSED", "RATE", "MEAN", "VARIANCE"],
            &[1, 2, 3, 4],
            rows,
        ) {
            out::line(&line);
        }
    }
    out::line(&format!(
        "result {} · eval version {} · workspace {}",
        result.id,
        short(&result.version),
        short(&result.workspace_digest)
    ));
    Ok(())
}

fn print_comparison(c: &Comparison) {
    let rows = c.cases.iter().map(|case: &CaseChange| {
        let rate = |r: Option<f64>| r.map(percent).unwrap_or_else(|| "-".into());
        vec![
            case.case.clone(),
            match case.verdict {
                Verdict::Regression => "regression",
                Verdict::Improvement => "improvement",
                Verdict::Unchanged => "unchanged",
                Verdict::Added => "added",
                Verdict::Removed => "removed",
            }
            .to_owned(),
            format!("{} → {}", rate(case.pass_rate.0), rate(case.pass_rate.1)),
            format!("{:+.2}", case.score_delta),
            format!("{:+} ms", case.latency_delta_ms),
            format!("{:+.6}", case.cost_delta),
        ]
    });
    for line in out::table(
        &["CASE", "CHANGE", "PASS RATE", "SCORE", "LATENCY", "COST"],
        &[3, 4, 5],
        rows,
    ) {
        out::line(&line);
    }
    for case in c.cases.iter().filter(|c| c.divergence.is_some()) {
        let d = case
            .divergence
            .as_ref()
            .map(|d| d.to_owned())
            .unwrap_or_default();
        out::line(&format!(
            "  {}: runs {} and {} diverge at event {}:\n    before: {}\n    after:  {}",
            case.case,
            case.runs.0.as_deref().unwrap_or("-"),
            case.runs.1.as_deref().unwrap_or("-"),
            d["seq"],
            d["expected"],
            d["found"]
        ));
    }
    out::line("");
    out::line(&format!(
        "{} → {}: {} regression(s), {} improvement(s), {} unchanged; pass rate {:+.1} points, cost {:+.6}, p50 {:+} ms{}",
        c.before,
        c.after,
        c.regressions,
        c.improvements,
        c.unchanged,
        c.pass_rate_delta * 100.0,
        c.cost_delta,
        c.latency_p50_delta_ms,
        if c.same_version {
            ""
        } else {
            " (the eval's cases or graders changed between them)"
        }
    ));
}

/// A stored result in a list: without its cases.
fn listed(r: &EvalResult) -> serde_json::Value {
    serde_json::json!({
        "id": r.id,
        "eval": r.eval,
        "status": r.status.as_str(),
        "startedAt": r.started_at,
        "endedAt": r.ended_at,
        "version": r.version,
        "workspaceDigest": r.workspace_digest,
        "summary": r.summary,
    })
}

fn mark(case: &CaseResult) -> &'static str {
    match (case.passed, case.error.is_some()) {
        (true, _) => "pass",
        (false, true) => "error",
        (false, false) => "fail",
    }
}

fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

fn money(amount: f64, currency: Option<&str>) -> String {
    match currency {
        Some(currency) => format!("{amount:.6} {currency}"),
        None => "-".into(),
    }
}

fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

fn write_file(file: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(file, text)
        .map_err(|e| CliError::failed(format!("cannot write {}: {e}", file.display())))
}

/// `keel eval list`: stored results, newest first.
async fn list(root: &Path, eval: Option<&str>, limit: usize, json: bool) -> Result<(), CliError> {
    let stores = workspace::open_store(root).await?;
    let results = stores.runs.list_eval_results(eval, limit).await?;
    if json {
        for result in &results {
            out::line(&listed(result).to_string());
        }
        return Ok(());
    }
    if results.is_empty() {
        let defined: Vec<String> = keel::Workspace::load(root)
            .map(|w| w.evals.keys().cloned().collect())
            .unwrap_or_default();
        out::status(&match defined.is_empty() {
            true => "» No eval results, and the workspace declares no `Eval` document.".to_owned(),
            false => format!(
                "» No eval results yet; run one: keel eval run {}",
                defined[0]
            ),
        });
        return Ok(());
    }
    let rows = results.iter().map(|r| {
        let s = r.summary.as_ref();
        vec![
            r.id.clone(),
            r.eval.clone(),
            r.started_at.clone(),
            r.status.as_str().to_owned(),
            s.map(|s| format!("{}/{}", s.passed, s.runs))
                .unwrap_or_default(),
            s.map(|s| percent(s.pass_rate)).unwrap_or_default(),
            s.map(|s| money(s.cost, s.currency.as_deref()))
                .unwrap_or_default(),
            s.map(|s| format!("{} ms", s.latency.p50_ms))
                .unwrap_or_default(),
        ]
    });
    for line in out::table(
        &[
            "ID", "EVAL", "STARTED", "STATUS", "PASSED", "RATE", "COST", "P50",
        ],
        &[4, 5, 6, 7],
        rows,
    ) {
        out::line(&line);
    }
    Ok(())
}

/// `keel eval show ID`: one stored result.
async fn show(root: &Path, id: &str, json: bool, junit: Option<&Path>) -> Result<(), CliError> {
    let stores = workspace::open_store(root).await?;
    let result =
        stores.runs.get_eval_result(id).await?.ok_or_else(|| {
            CliError::usage(format!("no eval result `{id}` (see `keel eval list`)"))
        })?;
    if let Some(file) = junit {
        write_file(file, &keel::eval::junit(&result))?;
    }
    report(&result, json)
}
