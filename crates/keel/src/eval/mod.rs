//! Evaluations (`docs/evals.md`): an `Eval` document's cases run as ordinary recorded runs,
//! tagged with the eval, graded as each ends; the result stored with the eval's version and
//! the workspace's digest, so it names exactly what was evaluated. Comparisons of two results,
//! cases captured from recorded runs, and JUnit reports for CI.

mod capture;
mod compare;
mod grade;
mod judge;
mod junit;
mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt;
use keel_types::{
    AdapterEvent, Event, EventPayload, GuardDecision, PolicyDecision, RequestId, RunRecord,
    SessionId,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{Error, RequestOptions, Runtime};
pub use capture::capture;
pub use compare::{CaseChange, Comparison, Verdict, compare};
pub use grade::{CallView, RunView};
pub use judge::JUDGE_REASKS;
pub use junit::junit;
/// The records of eval results, and the `Eval` document's parts.
pub use keel_types::eval::{
    CaseResult, CaseSummary, EvalOptions, EvalResult, EvalStatus, EvalSummary, GraderResult,
    GraderSummary, Percentiles,
};
pub use keel_workspace::{EvalCase, EvalSpec, EvalTarget, GraderKind, GraderSpec};

/// The metadata keys each case's run is tagged with.
pub const EVAL_TAG: &str = "keel.eval";
pub const EVAL_VERSION_TAG: &str = "keel.eval.version";
pub const EVAL_RESULT_TAG: &str = "keel.eval.result";
pub const EVAL_CASE_TAG: &str = "keel.eval.case";

/// Told of each case run as it is graded (a command's progress line).
pub type CaseProgress = Arc<dyn Fn(&CaseResult) + Send + Sync>;

/// How to run an eval; unset fields take the eval document's values.
#[derive(Clone, Default)]
pub struct EvalRun {
    /// Cases at once (default: the eval's `concurrency`).
    pub concurrency: Option<u32>,
    /// Runs per case (default 1).
    pub repeat: Option<u32>,
    /// A `Model` document each agent run uses instead of its agent's.
    pub model: Option<String>,
    /// Answer each case's model rounds from its `recorded` run instead of calling a model.
    pub replay: bool,
    /// Who runs it (recorded on the result and each run).
    pub owner: Option<String>,
    /// Told of each case run as it is graded.
    pub progress: Option<CaseProgress>,
}

/// The digest of an eval document with its cases: its version.
pub fn eval_version(spec: &EvalSpec) -> String {
    let mut cases = spec.clone();
    for case in &mut cases.cases {
        case.source = None;
    }
    let json = serde_json::to_vec(&cases).unwrap_or_default();
    format!("sha256:{:x}", Sha256::digest(&json))
}

/// What the caller asked that cannot be done: a runtime's invalid request.
pub(crate) fn invalid(message: String) -> Error {
    Error::Runtime(keel_runtime::RuntimeError::InvalidInput(message))
}

/// The name a case is reported by.
pub fn case_name(case: &EvalCase, index: usize) -> String {
    case.name
        .clone()
        .unwrap_or_else(|| format!("case-{}", index + 1))
}

impl Runtime {
    /// The eval `name` as the loaded workspace declares it.
    pub fn eval_spec(&self, name: &str) -> Result<EvalSpec, Error> {
        let workspace = self.workspace();
        workspace.evals.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = workspace.evals.keys().map(String::as_str).collect();
            invalid(format!(
                "no `Eval` document is named `{name}`{}",
                match known.is_empty() {
                    true => " (the workspace declares none)".to_owned(),
                    false => format!(" (evals: {})", known.join(", ")),
                }
            ))
        })
    }

    /// A new eval result, stored as running: what [`Runtime::finish_eval`] fills in.
    pub async fn begin_eval(&self, name: &str, options: &EvalRun) -> Result<EvalResult, Error> {
        let spec = self.eval_spec(name)?;
        if options.model.is_some() && spec.target.workflow.is_some() {
            return Err(invalid(format!(
                "eval `{name}` evaluates a workflow, whose agent nodes use their own models: \
                 --model cannot apply"
            )));
        }
        if let Some(model) = &options.model
            && !self.workspace().models.contains_key(model)
        {
            return Err(invalid(format!(
                "no `Model` document is named `{model}` (models: {})",
                self.workspace()
                    .models
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if options.replay
            && let Some((i, case)) = spec
                .cases
                .iter()
                .enumerate()
                .find(|(_, c)| c.recorded.is_none() && c.cassette.is_none())
        {
            return Err(invalid(format!(
                "case `{}` of eval `{name}` has nothing to replay: give it `cassette: FILE` or \
                 `recorded: <run id>` (`keel eval capture` writes them)",
                case_name(case, i)
            )));
        }
        let result = EvalResult {
            id: keel_types::new_id("evr"),
            eval: name.to_owned(),
            version: eval_version(&spec),
            workspace_digest: self.workspace_digest(),
            target: spec.target.request_agent(),
            status: EvalStatus::Running,
            started_at: keel_types::now_rfc3339(),
            ended_at: None,
            owner: options.owner.clone(),
            options: EvalOptions {
                concurrency: options.concurrency.unwrap_or(spec.concurrency).max(1),
                repeat: options.repeat.unwrap_or(1).max(1),
                model: options.model.clone(),
                replay: options.replay,
            },
            pass_score: spec.pass_score,
            threshold: spec.threshold,
            cases: Vec::new(),
            summary: None,
            error: None,
        };
        self.runs().save_eval_result(&result).await?;
        Ok(result)
    }

    /// Runs eval `name` to its end and stores the result: each case (× repeat) a recorded
    /// run, graded as it ends.
    pub async fn run_eval(&self, name: &str, options: &EvalRun) -> Result<EvalResult, Error> {
        let result = self.begin_eval(name, options).await?;
        self.finish_eval(result, options.progress.clone()).await
    }

    /// Runs the cases of a result [`Runtime::begin_eval`] started, and stores it ended.
    pub async fn finish_eval(
        &self,
        mut result: EvalResult,
        progress: Option<CaseProgress>,
    ) -> Result<EvalResult, Error> {
        let spec = self.eval_spec(&result.eval)?;
        match self.run_cases(&spec, &result, progress).await {
            Ok(cases) => {
                result.summary = Some(summary::summarise(&cases, result.threshold));
                result.cases = cases;
                result.status = EvalStatus::Completed;
            }
            Err(error) => {
                result.status = EvalStatus::Failed;
                result.error = Some(error.to_string());
            }
        }
        result.ended_at = Some(keel_types::now_rfc3339());
        self.runs().save_eval_result(&result).await?;
        Ok(result)
    }

    async fn run_cases(
        &self,
        spec: &EvalSpec,
        result: &EvalResult,
        progress: Option<CaseProgress>,
    ) -> Result<Vec<CaseResult>, Error> {
        let graders: Vec<grade::Prepared> = spec
            .graders
            .iter()
            .map(grade::Prepared::new)
            .collect::<Result<_, _>>()
            .map_err(invalid)?;
        let graders = Arc::new(graders);
        let repeat = result.options.repeat;
        let jobs: Vec<(usize, u32)> = (0..spec.cases.len())
            .flat_map(|i| (0..repeat).map(move |a| (i, a)))
            .collect();
        let concurrency = result.options.concurrency as usize;
        let mut cases: Vec<CaseResult> = futures_util::stream::iter(jobs)
            .map(|(index, attempt)| {
                let graders = Arc::clone(&graders);
                async move { self.run_case(spec, result, &graders, index, attempt).await }
            })
            .buffer_unordered(concurrency)
            .inspect(|case| {
                if let Some(progress) = &progress {
                    progress(case);
                }
            })
            .collect()
            .await;
        cases.sort_by_key(|c| (c.index, c.attempt));
        Ok(cases)
    }

    /// One run of one case, graded; a run that cannot start is a case with an error.
    async fn run_case(
        &self,
        spec: &EvalSpec,
        result: &EvalResult,
        graders: &[grade::Prepared],
        index: usize,
        attempt: u32,
    ) -> CaseResult {
        let case = &spec.cases[index];
        let name = case_name(case, index);
        let mut outcome = CaseResult {
            case: name.clone(),
            index,
            attempt,
            request_id: None,
            status: "not_started".into(),
            score: 0.0,
            passed: false,
            error: None,
            latency_ms: 0,
            cost: 0.0,
            currency: None,
            tokens: 0,
            steps: 0,
            graders: Vec::new(),
            divergence: None,
        };
        let view = match self.case_run(spec, result, case, &name, attempt).await {
            Ok((view, divergence)) => {
                outcome.divergence = divergence;
                view
            }
            Err(error) => {
                outcome.error = Some(error.to_string());
                return outcome;
            }
        };
        outcome.request_id = Some(view.request_id.clone());
        outcome.status = view.status.clone();
        outcome.latency_ms = view.duration_ms;
        outcome.cost = view.cost.unwrap_or(0.0);
        outcome.currency = view.currency.clone();
        outcome.tokens = view.tokens;
        outcome.steps = view.steps;
        let own: Vec<grade::Prepared> = match case.expect.iter().map(grade::Prepared::new).collect()
        {
            Ok(own) => own,
            Err(error) => {
                outcome.error = Some(error);
                return outcome;
            }
        };
        for grader in graders.iter().chain(own.iter()) {
            let graded = match grader.grade(&view) {
                Some(graded) => graded,
                None => self.grade_outside(&grader.spec, &view).await,
            };
            outcome.graders.push(graded);
        }
        let weight: f64 = outcome.graders.iter().map(|g| g.weight).sum();
        let points: f64 = outcome
            .graders
            .iter()
            .map(|g| g.weight * g.score.unwrap_or(0.0))
            .sum();
        outcome.score = if weight > 0.0 { points / weight } else { 0.0 };
        let erred: Vec<String> = outcome
            .graders
            .iter()
            .filter_map(|g| g.error.as_ref().map(|e| format!("{}: {e}", g.name)))
            .collect();
        if !erred.is_empty() {
            outcome.error = Some(erred.join("; "));
        }
        outcome.passed = erred.is_empty() && outcome.score + 1e-9 >= result.pass_score;
        outcome
    }

    async fn grade_outside(
        &self,
        spec: &GraderSpec,
        view: &RunView,
    ) -> keel_types::eval::GraderResult {
        match spec.kind {
            GraderKind::Judge => {
                let model = spec.model.as_deref().unwrap_or("");
                match self.kernel.provider_of(model) {
                    Ok(provider) => judge::judge(spec, provider, view).await,
                    Err(error) => grade::errored(spec, error.to_string()),
                }
            }
            _ => judge::command(spec, &self.workspace().root, view).await,
        }
    }

    /// Starts the case's run (or its replay), waits for it and reads what graders see.
    async fn case_run(
        &self,
        spec: &EvalSpec,
        result: &EvalResult,
        case: &EvalCase,
        name: &str,
        attempt: u32,
    ) -> Result<(RunView, Option<Value>), Error> {
        let mut metadata = case.metadata.clone();
        metadata.insert(EVAL_TAG.into(), result.eval.clone());
        metadata.insert(EVAL_VERSION_TAG.into(), result.version.clone());
        metadata.insert(EVAL_RESULT_TAG.into(), result.id.clone());
        metadata.insert(EVAL_CASE_TAG.into(), format!("{name}#{attempt}"));
        let input = match &case.input {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let recorded = case.recorded.as_deref().map(RequestId::from);
        let (handle, recorded) = if result.options.replay
            && let Some(file) = &case.cassette
        {
            // The recorded answers from the file: no store, no model.
            let path = self.workspace().root.join(file);
            let cassette = keel_models::read_cassette(&path).map_err(|e| invalid(e.to_string()))?;
            let provider = Arc::new(keel_types::cassette::CassetteProvider::new(
                cassette,
                keel_types::cassette::CassetteMatch::Order,
            ));
            let options = RequestOptions {
                input,
                agent: Some(spec.target.request_agent()),
                owner: result.owner.clone(),
                metadata,
                mode: Some(spec.mode),
                timeout: spec.timeout.map(|t| t.0),
                ..RequestOptions::default()
            };
            let handle = self.kernel.request_answered_by(options, provider).await?;
            // Compared with the recording when it is still in the store.
            let stored = match &recorded {
                Some(id) => self.runs().get(id).await?.is_some(),
                None => false,
            };
            (handle, recorded.filter(|_| stored))
        } else if result.options.replay {
            let id = recorded.unwrap_or_else(|| RequestId::from(""));
            (self.kernel.replay_with(&id, metadata).await?, Some(id))
        } else {
            let session = match &case.session {
                Some(session) => {
                    Some(SessionId::parse(session).map_err(|e| invalid(e.to_string()))?)
                }
                None => None,
            };
            let options = RequestOptions {
                input,
                agent: Some(spec.target.request_agent()),
                session_id: session,
                owner: result.owner.clone(),
                metadata,
                model: result.options.model.clone(),
                mode: Some(spec.mode),
                timeout: spec.timeout.map(|t| t.0),
                ..RequestOptions::default()
            };
            (self.request(options).await?, None)
        };
        let id = handle.request_id().clone();
        let response = handle.wait().await?;
        let events = self.runs().events(&id, 0).await?;
        let divergence = match recorded {
            Some(original) => self.case_divergence(&original, &id).await?,
            None => None,
        };
        let record = self.runs().get(&id).await?;
        Ok((
            view_of(name, &case.input, &id, record, &response, &events),
            divergence,
        ))
    }

    /// Where run `b`'s events first differ from run `a`'s (`{seq, expected, found}`), the
    /// eval tags of their requests aside (each eval run tags its runs with its own ids).
    pub async fn case_divergence(
        &self,
        a: &RequestId,
        b: &RequestId,
    ) -> Result<Option<Value>, Error> {
        let untagged = |mut events: Vec<Event>| {
            for event in &mut events {
                if let EventPayload::RequestStarted { metadata, .. } = &mut event.payload {
                    metadata.retain(|key, _| !key.starts_with(EVAL_TAG));
                }
            }
            events
        };
        let a = untagged(self.runs().events(a, 0).await?);
        let b = untagged(self.runs().events(b, 0).await?);
        Ok(keel_runtime::replay::diverge(&a, &b)
            .map(|d| serde_json::to_value(d).unwrap_or_default()))
    }

    /// A stored eval result.
    pub async fn eval_result(&self, id: &str) -> Result<Option<EvalResult>, Error> {
        Ok(self.runs().eval_result(id).await?)
    }

    /// Stored eval results, newest first.
    pub async fn eval_results(
        &self,
        eval: Option<&str>,
        limit: usize,
    ) -> Result<Vec<EvalResult>, Error> {
        Ok(self.runs().eval_results(eval, limit).await?)
    }
}

/// What graders see of a run that ended.
fn view_of(
    case: &str,
    input: &Value,
    id: &RequestId,
    record: Option<RunRecord>,
    response: &keel_runtime::RunResponse,
    events: &[Event],
) -> RunView {
    let mut tool_calls = Vec::new();
    let mut results: BTreeMap<String, bool> = BTreeMap::new();
    let mut refused_calls = Vec::new();
    for event in events {
        match &event.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolStart {
                        call_id,
                        tool,
                        arguments,
                        ..
                    },
            } => tool_calls.push((
                call_id.clone(),
                CallView {
                    tool: tool.clone(),
                    args: arguments.clone(),
                    ok: None,
                    reason: None,
                },
            )),
            EventPayload::Adapter {
                event: AdapterEvent::ToolResult { call_id, ok, .. },
            } => {
                results.insert(call_id.clone(), *ok);
            }
            EventPayload::ToolGuard {
                tool,
                decision: GuardDecision::Blocked,
                arguments,
                issues,
                ..
            } => refused_calls.push(CallView {
                tool: tool.clone(),
                args: serde_json::from_str(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.clone())),
                ok: None,
                reason: Some(format!(
                    "blocked by the gateway: {}",
                    issues
                        .iter()
                        .map(|i| i.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
            }),
            EventPayload::PolicyDecided {
                tool,
                decision: PolicyDecision::Deny,
                source,
                reason,
                ..
            } => refused_calls.push(CallView {
                tool: tool.clone(),
                args: Value::Null,
                ok: None,
                reason: Some(format!(
                    "denied by {source}{}",
                    reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )),
            }),
            _ => {}
        }
    }
    let tool_calls = tool_calls
        .into_iter()
        .map(|(call_id, mut call)| {
            call.ok = results.get(&call_id).copied();
            call
        })
        .collect();
    let value = response.value.clone().or_else(|| {
        response
            .output
            .as_deref()
            .and_then(|text| keel_runtime::output::parse(text).ok())
    });
    let cost = response.usage.cost.as_ref();
    RunView {
        request_id: id.to_string(),
        case: case.to_owned(),
        input: input.clone(),
        status: record
            .as_ref()
            .map_or(response.status.as_str(), |r| r.status.as_str())
            .to_owned(),
        output: response.output.clone(),
        value,
        finish_reason: Some(response.finish_reason.as_str().to_owned()),
        steps: response.steps,
        duration_ms: response.duration_ms,
        tokens: response.usage.total_tokens,
        cost: cost.and_then(|c| c.amount.to_string().parse().ok()),
        currency: cost.map(|c| c.currency.to_string()),
        tool_calls,
        refused_calls,
        error: response
            .error
            .as_ref()
            .and_then(|e| serde_json::to_value(e).ok()),
    }
}
