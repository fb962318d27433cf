//! Workflow runs (`docs/workflows.md`): a `Workflow` document executed as a run of its own
//! (`agent: workflow/<name>`), whose log holds `runtime.workflow.*` events between the usual
//! opening and terminal events. Agent and nested-workflow nodes run as child runs linked to
//! it; a tool node's call is a governed direct call in its own log; approval nodes wait
//! durably like a tool's approval.
//!
//! Durable execution: a node's output is recorded in `runtime.workflow.node.completed`
//! before anything reads it. A resumed workflow run replays its scheduler against the log:
//! a node whose completion is recorded is not run again (its output is taken from the log,
//! so its side effects happen once); a node that was running picks up its child run (the
//! child is found by the node's key, resumed when interrupted, read when it ended) or its
//! tool call's recorded result (a call cut off mid-flight is made again only for an
//! idempotent tool); a pending approval is waited on again.

mod engine;
mod gates;
mod nodes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use keel_types::{
    AdapterEvent, Event, EventPayload, NodeKey, RequestId, RunRecord, WORKFLOW_PREFIX,
};
use keel_workspace::WorkflowSpec;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Kernel, Origin, RequestOptions, Tracked};
use crate::RuntimeError;
use crate::emitter::Emitter;
use crate::handle::RunHandle;
use engine::Engine;

/// What a resumed workflow run takes from its log instead of doing again.
#[derive(Debug, Default)]
struct Recorded {
    /// `runtime.workflow.started` is there.
    started: bool,
    /// Node outputs by node id and key.
    completed: HashMap<(String, NodeKey), Value>,
    /// The last attempt of each node key that started.
    attempts: HashMap<(String, NodeKey), u32>,
    skipped: HashSet<(String, NodeKey)>,
    /// Tool calls of tool nodes that started, and the results recorded, by call id.
    tool_started: HashSet<String>,
    tool_results: HashMap<String, (bool, String)>,
    /// Phase events already written: `(phase, type)`.
    phases: HashSet<(String, &'static str)>,
    /// The `seq` of the last event: the run goes on after it.
    last_seq: u64,
}

impl Recorded {
    fn from_events(events: &[Event]) -> Self {
        let mut recorded = Self::default();
        for event in events {
            recorded.last_seq = event.seq;
            match &event.payload {
                EventPayload::WorkflowStarted(_) => recorded.started = true,
                EventPayload::NodeStarted(started) => {
                    recorded
                        .attempts
                        .insert((started.node.clone(), started.key), started.attempt);
                }
                EventPayload::NodeCompleted(done) => {
                    recorded
                        .completed
                        .insert((done.node.clone(), done.key), done.output.clone());
                }
                EventPayload::NodeSkipped(skipped) => {
                    recorded.skipped.insert((skipped.node.clone(), skipped.key));
                }
                EventPayload::Adapter {
                    event: AdapterEvent::ToolStart { call_id, .. },
                } => {
                    recorded.tool_started.insert(call_id.clone());
                }
                EventPayload::Adapter {
                    event:
                        AdapterEvent::ToolResult {
                            call_id,
                            ok,
                            output,
                            ..
                        },
                } => {
                    recorded
                        .tool_results
                        .insert(call_id.clone(), (*ok, output.clone()));
                }
                payload @ (EventPayload::PhaseStarted(phase)
                | EventPayload::PhaseCompleted(phase)
                | EventPayload::PhaseVerified(phase)) => {
                    recorded
                        .phases
                        .insert((phase.phase.clone(), payload.type_name()));
                }
                _ => {}
            }
        }
        recorded
    }
}

/// Reads a request's input as the workflow's input: text, or JSON when the workflow's input
/// schema asks for something other than a string; checked against that schema.
fn parse_input(name: &str, spec: &WorkflowSpec, input: &str) -> Result<Value, RuntimeError> {
    let Some(schema) = spec.input.as_ref().map(|i| &i.schema) else {
        return Ok(Value::String(input.to_owned()));
    };
    let value = match schema.get("type").and_then(Value::as_str) {
        Some("string") => Value::String(input.to_owned()),
        _ => serde_json::from_str(input).map_err(|e| {
            RuntimeError::InvalidInput(format!("the input of workflow `{name}` must be JSON ({e})"))
        })?,
    };
    if let Some(mismatch) = crate::output::mismatch(schema, &value) {
        return Err(RuntimeError::InvalidInput(format!(
            "the input of workflow `{name}` does not match its schema{mismatch}"
        )));
    }
    Ok(value)
}

impl Kernel {
    /// The workflow named, or an error listing the workflows there are.
    fn workflow(&self, name: &str) -> Result<Arc<WorkflowSpec>, RuntimeError> {
        let workflows = &self.workspace().workflows;
        match workflows.get(name) {
            Some(spec) => Ok(Arc::new(spec.clone())),
            None => Err(RuntimeError::InvalidInput(format!(
                "unknown workflow `{name}`; the workspace has: {}",
                match workflows.is_empty() {
                    true => "none".to_owned(),
                    false => workflows.keys().cloned().collect::<Vec<_>>().join(", "),
                }
            ))),
        }
    }

    /// Records and starts a run of workflow `name`.
    /// Checks a workflow request without starting it (a queued request).
    pub(super) fn check_workflow_request(
        &self,
        name: &str,
        options: &RequestOptions,
    ) -> Result<(), RuntimeError> {
        let spec = self.workflow(name)?;
        if options.session_id.is_some() {
            return Err(RuntimeError::InvalidInput(format!(
                "workflow `{name}` cannot run in a session; send it without one"
            )));
        }
        no_model_override(name, options)?;
        parse_input(name, &spec, &options.input).map(|_| ())
    }

    pub(super) async fn start_workflow(
        &self,
        name: &str,
        options: RequestOptions,
        origin: Origin,
    ) -> Result<RunHandle, RuntimeError> {
        let spec = self.workflow(name)?;
        if options.session_id.is_some() {
            return Err(RuntimeError::InvalidInput(format!(
                "workflow `{name}` cannot run in a session; send it without one"
            )));
        }
        no_model_override(name, &options)?;
        let input = parse_input(name, &spec, &options.input)?;
        let record = match origin.claimed {
            // A queued run this process claimed: already recorded, now running and ours.
            Some(record) => record,
            None => {
                let mut record = RunRecord::new(
                    RequestId::generate(),
                    None,
                    format!("{WORKFLOW_PREFIX}{name}"),
                    options.input,
                );
                record.owner = options.owner;
                record.links = origin.links;
                record.trace = Some(self.trace_for(options.trace));
                self.store().create_run(&record).await?;
                record
            }
        };
        let parts = Parts {
            record,
            name: name.to_owned(),
            spec,
            input,
            depth: origin.depth,
            metadata: options.metadata,
            timeout: options.timeout,
        };
        Ok(self.launch_workflow(parts, Recorded::default()))
    }

    /// Continues an interrupted workflow run from its log.
    pub(super) async fn resume_workflow(
        &self,
        before: RunRecord,
    ) -> Result<RunHandle, RuntimeError> {
        let name = before.workflow().unwrap_or_default().to_owned();
        let spec = self.workflow(&name)?;
        let id = before.request_id.clone();
        let events = self.store().events(&id, 0).await?;
        let (_, _, metadata) = crate::rebuild::opening(&events);
        if let Some(last) = events.last().filter(|e| e.payload.is_final()) {
            return Err(RuntimeError::InvalidInput(format!(
                "run `{id}` already ended (event {} is terminal)",
                last.seq
            )));
        }
        let input = parse_input(&name, &spec, &before.input)?;
        let recorded = Recorded::from_events(&events);
        // Everything that can fail comes before the claim: a claimed run that never
        // launched would stay `running` under this process's live lease, and no replica
        // would take it over.
        let (depth, _) = self.lineage(&before).await?;
        let record = self.store().claim(&id).await?;
        let parts = Parts {
            record,
            name,
            spec,
            input,
            depth,
            metadata,
            timeout: None,
        };
        Ok(self.launch_workflow(parts, recorded))
    }

    /// Spawns a workflow run's engine, tracked like any run.
    fn launch_workflow(&self, parts: Parts, recorded: Recorded) -> RunHandle {
        let request_id = parts.record.request_id.clone();
        let (tx, rx) = crate::emitter::subscription();
        let emitter = Emitter::new(&self.pipeline(), &parts.record, recorded.last_seq, Some(tx));
        let depth = parts.depth;
        let engine = Engine::new(self.clone(), parts, Arc::new(emitter), recorded);
        let cancel = CancellationToken::new();
        let interrupt = CancellationToken::new();
        let launch = self.track(&request_id, &cancel, &interrupt);
        let slot = (depth == 0).then(|| self.slots().take());
        let tracked = Tracked {
            kernel: self.clone(),
            id: request_id.clone(),
            launch,
        };
        let token = cancel.clone();
        let task = tokio::spawn(async move {
            let permit = match slot {
                Some(slot) => tokio::select! {
                    permit = slot.ready() => permit,
                    _ = token.cancelled() => None,
                    _ = interrupt.cancelled() => None,
                },
                None => None,
            };
            let response = engine.run(token, interrupt).await;
            drop(permit);
            drop(tracked);
            response
        });
        RunHandle::new(request_id, rx, cancel, task)
    }
}

/// What a workflow run is made of.
struct Parts {
    record: RunRecord,
    name: String,
    spec: Arc<WorkflowSpec>,
    input: Value,
    depth: u32,
    metadata: std::collections::BTreeMap<String, String>,
    timeout: Option<std::time::Duration>,
}

/// A workflow's agent nodes run with their agents' own models: a request cannot swap them.
fn no_model_override(name: &str, options: &RequestOptions) -> Result<(), RuntimeError> {
    match &options.model {
        Some(model) => Err(RuntimeError::InvalidInput(format!(
            "workflow `{name}` runs each agent node with its own agent's model; it cannot run \
             with model `{model}` instead"
        ))),
        None => Ok(()),
    }
}
