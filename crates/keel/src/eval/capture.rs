//! Cases from reality: recorded runs turned into eval cases — their input, the run they came
//! from (for `--replay`), and expectations proposed from what they did (the tools they called
//! with their arguments, the structured value, how they finished), for a person to edit.

use keel_types::{AdapterEvent, EventPayload, RunFilter, RunRecord};
use keel_workspace::{EvalCase, GraderKind, GraderSpec};
use serde_json::Value;

use super::invalid;
use crate::{Error, Runtime};

/// The runs `filter` selects (agent runs that ended; workflow runs, child runs and runs
/// still going are left out), oldest first, as cases. With `cassettes` (a folder relative to
/// the workspace), each run's model answers are written there as a cassette the case names
/// (`<folder>/<run id>.cassette.json`), so `--replay` needs no store.
pub async fn capture(
    runtime: &Runtime,
    filter: &RunFilter,
    cassettes: Option<&str>,
) -> Result<Vec<EvalCase>, Error> {
    let root = runtime.workspace().root.clone();
    if let Some(folder) = cassettes {
        std::fs::create_dir_all(root.join(folder))
            .map_err(|e| invalid(format!("cannot create {folder}: {e}")))?;
    }
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
        let cassette = match cassettes {
            Some(folder) => write_cassette(&root, folder, &run, &events)?,
            None => None,
        };
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
            cassette,
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

/// Writes a run's model answers as a cassette in `folder`; its path, relative to the
/// workspace (none for a run that asked no model anything).
fn write_cassette(
    root: &std::path::Path,
    folder: &str,
    run: &RunRecord,
    events: &[keel_types::Event],
) -> Result<Option<String>, Error> {
    let mut cassette = keel_types::cassette::Cassette::from_events(events);
    if cassette.exchanges.is_empty() {
        return Ok(None);
    }
    cassette.agent = Some(run.agent.clone());
    let file = format!(
        "{}/{}.cassette.json",
        folder.trim_end_matches('/'),
        run.request_id
    );
    let text = serde_json::to_string_pretty(&cassette).map_err(|e| invalid(e.to_string()))?;
    std::fs::write(root.join(&file), text + "\n")
        .map_err(|e| invalid(format!("cannot write {file}: {e}")))?;
    Ok(Some(file))
}
