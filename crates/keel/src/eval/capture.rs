//! Cases from reality: recorded runs turned into eval cases — their input, the run they came
//! from (for `--replay`), and expectations proposed from what they did (the tools they called
//! with their arguments, the structured value, how they finished), for a person to edit.

use keel_types::{AdapterEvent, EventPayload, RunFilter, RunRecord};
use keel_workspace::{EvalCase, GraderKind, GraderSpec};
use serde_json::Value;

use crate::{Error, Runtime};

/// The runs `filter` selects (agent runs that ended; workflow runs, child runs and runs
/// still going are left out), oldest first, as cases.
pub async fn capture(runtime: &Runtime, filter: &RunFilter) -> Result<Vec<EvalCase>, Error> {
    let mut runs: Vec<RunRecord> = runtime
        .runs()
        .list(filter)
        .await?
        .into_iter()
        .filter(|r| r.status.is_terminal() && r.workflow().is_none() && r.links.parent_id.is_none())
        .collect();
    runs.reverse();
    let mut cases = Vec::with_capacity(runs.len());
    for run in runs {
        let events = runtime.runs().events(&run.request_id, 0).await?;
        let mut expect = Vec::new();
        for event in &events {
            if let EventPayload::Adapter {
                event:
                    AdapterEvent::ToolStart {
                        tool, arguments, ..
                    },
            } = &event.payload
            {
                expect.push(GraderSpec {
                    tool: Some(tool.clone()),
                    args: Some(arguments.clone()),
                    ..grader(GraderKind::ToolCalled)
                });
            }
        }
        if expect.is_empty() {
            expect.push(grader(GraderKind::NoToolCalled));
        }
        if let Some(value) = &run.value {
            expect.push(GraderSpec {
                value: Some(value.clone()),
                ..grader(GraderKind::Equals)
            });
        }
        if let Some(reason) = run.finish_reason {
            expect.push(GraderSpec {
                value: Some(Value::String(reason.as_str().to_owned())),
                ..grader(GraderKind::FinishReason)
            });
        }
        cases.push(EvalCase {
            name: Some(run.request_id.to_string()),
            input: Value::String(run.input.clone()),
            session: None,
            metadata: Default::default(),
            expect,
            recorded: Some(run.request_id.to_string()),
            source: None,
        });
    }
    Ok(cases)
}

/// A grader of `kind` with every other field unset.
fn grader(kind: GraderKind) -> GraderSpec {
    GraderSpec {
        kind,
        name: None,
        weight: 1.0,
        value: None,
        ignore_case: None,
        pattern: None,
        schema: None,
        pointer: None,
        tool: None,
        args: None,
        model: None,
        rubric: None,
        scale: None,
        command: Vec::new(),
        timeout: None,
    }
}
