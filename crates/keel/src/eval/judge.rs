//! The graders that ask someone else: a judge model, whose verdict is structured output
//! (`{score, reasoning}` checked against a schema, re-asked with the issues, an error after
//! that — never a pass), and a program that reads the run as JSON and answers a score.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use keel_runtime::output;
use keel_types::eval::GraderResult;
use keel_types::{Message, ModelEvent, ModelParams, ModelProvider, ModelRequest};
use keel_workspace::GraderSpec;
use serde_json::{Value, json};

use super::grade::{RunView, errored, scored};

/// How often a judge is asked again after a verdict that does not match its schema.
pub const JUDGE_REASKS: u32 = 2;

/// The default scale of a judge (scores 1 to 5).
const DEFAULT_SCALE: u32 = 5;

/// The longest a grading program may take by default.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The schema of a judge's verdict on a scale of 1 to `scale`.
fn verdict_schema(scale: u32) -> Value {
    json!({
        "type": "object",
        "required": ["score", "reasoning"],
        "additionalProperties": false,
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": scale},
            "reasoning": {"type": "string", "minLength": 1}
        }
    })
}

/// Asks the judge `provider` to score `run` on the grader's rubric; the score is normalised
/// to 0–1 (`(score - 1) / (scale - 1)`) and passes at the top half of the scale.
pub(super) async fn judge(
    spec: &GraderSpec,
    provider: Arc<dyn ModelProvider>,
    run: &RunView,
) -> GraderResult {
    let scale = spec.scale.unwrap_or(DEFAULT_SCALE).max(2);
    let schema = verdict_schema(scale);
    let rubric = spec.rubric.as_deref().unwrap_or("");
    let calls: Vec<String> = run
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.tool, c.args))
        .collect();
    let mut messages = vec![
        Message::system(format!(
            "You grade the answers of an AI agent. Read the rubric, the input and the answer, \
             then give a score from 1 (fails the rubric) to {scale} (meets it fully) and your \
             reasoning in one or two sentences. {}",
            output::instruction(&schema)
        )),
        Message::user(format!(
            "Rubric: {rubric}\n\nInput:\n{}\n\nAnswer:\n{}\n\nTools the agent called: {}",
            match &run.input {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
            run.output.as_deref().unwrap_or("(no answer)"),
            if calls.is_empty() {
                "none".to_owned()
            } else {
                calls.join(", ")
            }
        )),
    ];
    let mut problems = String::new();
    for _ in 0..=JUDGE_REASKS {
        let text = match ask(&provider, &messages).await {
            Ok(text) => text,
            Err(error) => return errored(spec, format!("the judge model failed: {error}")),
        };
        match output::check(&schema, &text) {
            Ok(verdict) => {
                let score = verdict["score"].as_u64().unwrap_or(1) as f64;
                let normalised = (score - 1.0) / f64::from(scale - 1);
                let mut result = scored(
                    spec,
                    normalised,
                    normalised >= 0.5,
                    format!("judged {score}/{scale}"),
                );
                result.reasoning = verdict["reasoning"].as_str().map(str::to_owned);
                return result;
            }
            Err(issues) => {
                problems = issues
                    .iter()
                    .map(|i| i.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ");
                messages.push(Message::assistant(text, Vec::new()));
                messages.push(Message::user(output::reask(&issues)));
            }
        }
    }
    errored(
        spec,
        format!(
            "the judge gave no valid verdict in {} attempts (last: {problems})",
            JUDGE_REASKS + 1
        ),
    )
}

/// One answer of `provider` to `messages`, as text.
async fn ask(provider: &Arc<dyn ModelProvider>, messages: &[Message]) -> Result<String, String> {
    let request = ModelRequest {
        messages: messages.to_vec(),
        tools: Arc::from([]),
        params: ModelParams::default(),
        stream: true,
        sections: Vec::new(),
        traceparent: None,
    };
    let mut stream = provider.stream(request).await.map_err(|e| e.to_string())?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let ModelEvent::TextDelta { text: delta } = event.map_err(|e| e.to_string())? {
            text.push_str(&delta);
        }
    }
    Ok(text)
}

/// Runs the grader's program with the run as JSON on stdin. It answers a score from 0 to 1
/// on stdout: a number, or `{"score": …, "reason": "…"}`; exit code 0. Anything else is an
/// error, never a pass.
pub(super) async fn command(spec: &GraderSpec, root: &Path, run: &RunView) -> GraderResult {
    let timeout = spec.timeout.map_or(COMMAND_TIMEOUT, |t| t.0);
    let stdin = match serde_json::to_vec(run) {
        Ok(bytes) => bytes,
        Err(e) => return errored(spec, e.to_string()),
    };
    let answered = match keel_tools::process::run_program(&spec.command, root, stdin, timeout).await
    {
        Ok(answered) => answered,
        Err(error) => return errored(spec, error.to_string()),
    };
    if answered.code != Some(0) {
        let stderr = answered.stderr.trim();
        return errored(
            spec,
            format!(
                "the program exited with {}{}",
                answered
                    .code
                    .map_or("a signal".to_owned(), |c| format!("code {c}")),
                if stderr.is_empty() {
                    String::new()
                } else {
                    format!(": {stderr}")
                }
            ),
        );
    }
    let text = answered.stdout.trim();
    let (score, reason) = match serde_json::from_str::<Value>(text) {
        Ok(Value::Number(n)) => (n.as_f64(), None),
        Ok(Value::Object(map)) => (
            map.get("score").and_then(Value::as_f64),
            map.get("reason").and_then(Value::as_str).map(str::to_owned),
        ),
        _ => (None, None),
    };
    match score {
        Some(score) if (0.0..=1.0).contains(&score) => scored(
            spec,
            score,
            score >= 1.0,
            reason.unwrap_or_else(|| format!("scored {score}")),
        ),
        _ => errored(
            spec,
            format!(
                "the program answered {:?}; it must print a score from 0 to 1, or {{\"score\": …, \"reason\": …}}",
                text.chars().take(200).collect::<String>()
            ),
        ),
    }
}
