//! The workflow scheduler: which nodes run, which are skipped, when a loop edge sends the
//! run back, when a phase's gate decides; and how the run ends.
//!
//! A node waits until every node with a forward edge into it has completed or been
//! skipped. It runs when it is a start node or at least one edge into it is taken (its source
//! completed and its condition, if any, holds on the source's output); otherwise it is
//! skipped, and so is whatever only it leads to. Ready nodes run concurrently. When a node
//! completes, a loop edge out of it whose condition holds sends the run back: the nodes from
//! the edge's target to it run again (next iteration) until the edge's `maxIterations`; a
//! loop still wanting to go on after its bound fails the run. With phases, a phase's nodes
//! wait until every earlier phase was verified by its gate.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use keel_types::{
    ErrorCode, ErrorInfo, EventPayload, FinishReason, NodeKey, NodeSkipped, PhaseEvent, RunRecord,
    RunStatus, StoreError, Usage, WorkflowCompleted, WorkflowFailed, WorkflowStarted,
};
use keel_workspace::{WorkflowGraph, WorkflowSpec};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Parts, Recorded};
use crate::emitter::Emitter;
use crate::handle::RunResponse;
use crate::kernel::Kernel;

/// Why a workflow run cannot go on.
#[derive(Debug)]
pub(super) struct Failure {
    pub node: Option<String>,
    pub code: ErrorCode,
    pub message: String,
}

impl Failure {
    pub(super) fn failed(message: impl Into<String>) -> Self {
        Self {
            node: None,
            code: ErrorCode::WorkflowFailed,
            message: message.into(),
        }
    }

    pub(super) fn store(error: StoreError) -> Self {
        Self {
            node: None,
            code: ErrorCode::Store,
            message: error.to_string(),
        }
    }

    /// A failure no retry can change (a denial, the store).
    pub(super) fn is_final(&self) -> bool {
        matches!(self.code, ErrorCode::Denied | ErrorCode::Store)
    }

    pub(super) fn at(mut self, node: &str) -> Self {
        self.node.get_or_insert_with(|| node.to_owned());
        self
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Self::store(error)
    }
}

/// Where a node stands in the current iteration.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum State {
    Pending,
    Running,
    Done(Value),
    Skipped,
}

impl State {
    pub(super) fn resolved(&self) -> bool {
        matches!(self, Self::Done(_) | Self::Skipped)
    }
}

/// How the run ended.
enum End {
    Completed(Value),
    Failed(Failure),
    Cancelled,
    Interrupted,
}

/// One workflow run in progress.
pub(super) struct Engine {
    pub(super) kernel: Kernel,
    pub(super) emitter: Arc<Emitter>,
    /// The run's record, updated as its status changes.
    pub(super) record: Mutex<RunRecord>,
    pub(super) name: String,
    /// The run's id (what templates see as `workflow.requestId`).
    request_id: keel_types::RequestId,
    pub(super) spec: std::sync::Arc<WorkflowSpec>,
    graph: WorkflowGraph,
    pub(super) input: Value,
    pub(super) depth: u32,
    pub(super) metadata: std::collections::BTreeMap<String, String>,
    pub(super) recorded: Recorded,
    timeout: Option<std::time::Duration>,
    /// What the children used.
    pub(super) usage: Mutex<Usage>,
    /// Approvals being waited on (the run is `waiting_approval` while any is).
    pub(super) waiting: AtomicUsize,
    /// An approval node or gate of this process asked a person: the run's end closes what is
    /// still pending (a run that never asked, and was not resumed, skips the look).
    pub(super) asked: AtomicBool,
    /// Set when the runtime shuts down: children are interrupted with the run, not cancelled.
    pub(super) shutdown: CancellationToken,
    /// Nodes completed in this process.
    steps: AtomicUsize,
    /// Phase events written in this process (`(phase, type)`).
    written_phases: Mutex<std::collections::HashSet<(String, &'static str)>>,
}

impl Engine {
    pub(super) fn new(
        kernel: Kernel,
        parts: Parts,
        emitter: Arc<Emitter>,
        recorded: Recorded,
    ) -> Self {
        let graph = WorkflowGraph::of(&parts.spec);
        Self {
            kernel,
            emitter,
            request_id: parts.record.request_id.clone(),
            record: Mutex::new(parts.record),
            name: parts.name,
            spec: parts.spec,
            graph,
            input: parts.input,
            depth: parts.depth,
            metadata: parts.metadata,
            recorded,
            timeout: parts.timeout,
            usage: Mutex::new(Usage::default()),
            waiting: AtomicUsize::new(0),
            asked: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
            steps: AtomicUsize::new(0),
            written_phases: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// A copy of the run's record as it stands.
    pub(super) fn record(&self) -> RunRecord {
        match self.record.lock() {
            Ok(record) => record.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Sets the run's status (and event count) in its record.
    pub(super) async fn set_status(&self, status: RunStatus) -> Result<(), StoreError> {
        let record = {
            let mut record = match self.record.lock() {
                Ok(record) => record,
                Err(poisoned) => poisoned.into_inner(),
            };
            record.status = status;
            record.event_count = self.emitter.count();
            record.clone()
        };
        self.kernel.store().update_run(&record).await
    }

    /// Runs the workflow to its end: the opening event, the nodes under cancellation,
    /// interruption and the time budget, then the terminal events.
    pub(super) async fn run(
        mut self,
        cancel: CancellationToken,
        interrupt: CancellationToken,
    ) -> RunResponse {
        let started = Instant::now();
        self.shutdown = interrupt.clone();
        let resumed = self.recorded.last_seq > 0;
        let record = self.record();
        let opening = match resumed {
            false => EventPayload::RequestStarted {
                input: record.input.clone(),
                history: Vec::new(),
                mode: None,
                metadata: self.metadata.clone(),
                params: Default::default(),
                output_schema: None,
                session_owner_overridden: None,
            },
            true => EventPayload::RequestResumed {
                reissued_round: false,
                rerun_calls: Vec::new(),
                abandoned_calls: Vec::new(),
            },
        };
        let runtime = &self.kernel.workspace().runtime;
        let budget = self.timeout.map_or(runtime.limits.run_timeout.0, |t| {
            t.min(runtime.limits.run_timeout.0)
        });
        let end = match self.open(opening) {
            Err(error) => End::Failed(Failure::store(error)),
            Ok(()) => tokio::select! {
                biased;
                _ = cancel.cancelled() => End::Cancelled,
                _ = interrupt.cancelled() => End::Interrupted,
                end = tokio::time::timeout(budget, self.schedule()) => match end {
                    Ok(Ok(output)) => End::Completed(output),
                    Ok(Err(failure)) => End::Failed(failure),
                    Err(_) => End::Failed(Failure::failed(format!(
                        "the workflow exceeded its time budget of {}",
                        humantime::format_duration(budget)
                    ))),
                },
            },
        };
        self.finish(end, started).await
    }

    fn open(&self, opening: EventPayload) -> Result<(), StoreError> {
        self.emitter.emit(opening)?;
        if !self.recorded.started {
            self.emitter
                .emit(EventPayload::WorkflowStarted(WorkflowStarted {
                    workflow: self.name.clone(),
                    input: self.input.clone(),
                }))?;
        }
        Ok(())
    }

    /// Runs the nodes until every one is resolved; the workflow's output.
    async fn schedule(&self) -> Result<Value, Failure> {
        let count = self.graph.ids.len();
        let mut state = vec![State::Pending; count];
        let mut iteration = vec![1u32; count];
        let mut taken = vec![0u32; self.graph.edges.len()];
        // Each node's latest output: what templates see, also while a loop runs it again (a
        // draft can read the review that sent it back).
        let mut latest: Vec<Option<Value>> = vec![None; count];
        let phase_of: Vec<Option<usize>> = self
            .graph
            .ids
            .iter()
            .map(|id| self.spec.phases.iter().position(|p| p.nodes.contains(id)))
            .collect();
        let mut verified = vec![false; self.spec.phases.len()];
        let mut running: FuturesUnordered<BoxFuture<'_, (usize, Result<Value, Failure>)>> =
            FuturesUnordered::new();
        loop {
            // Start or skip every node that is ready; a skip can make others ready.
            let mut changed = true;
            while changed {
                changed = false;
                for node in 0..count {
                    if state[node] != State::Pending
                        || phase_of[node].is_some_and(|k| !verified[..k].iter().all(|v| *v))
                        || self
                            .graph
                            .incoming(node)
                            .any(|(_, from)| !state[from].resolved())
                    {
                        continue;
                    }
                    changed = true;
                    if let Some(k) = phase_of[node] {
                        self.phase_event(k, "runtime.specDriven.phase.started", None)?;
                    }
                    let key = NodeKey {
                        iteration: iteration[node],
                        item: None,
                    };
                    let active = self.graph.starts.contains(&node)
                        || self
                            .graph
                            .incoming(node)
                            .any(|(edge, from)| match &state[from] {
                                State::Done(output) => self.edge_holds(edge, output),
                                _ => false,
                            });
                    if !active {
                        state[node] = State::Skipped;
                        self.skip(node, key)?;
                        continue;
                    }
                    state[node] = State::Running;
                    let context = self.context(&latest);
                    let upstream: Map<String, Value> = self
                        .graph
                        .incoming(node)
                        .filter_map(|(_, from)| match &state[from] {
                            State::Done(output) => {
                                Some((self.graph.ids[from].clone(), output.clone()))
                            }
                            _ => None,
                        })
                        .collect();
                    running.push(Box::pin(async move {
                        let result = self
                            .run_node(node, key, context, Value::Object(upstream))
                            .await;
                        (node, result)
                    }));
                }
            }
            if running.is_empty() {
                // Phases whose nodes are all resolved pass their gates, in order.
                if let Some(phase) = (0..verified.len()).find(|k| !verified[*k]) {
                    self.gate(phase, &state, &latest, &phase_of).await?;
                    verified[phase] = true;
                    continue;
                }
                break;
            }
            let Some((node, result)) = running.next().await else {
                break;
            };
            let output = result.map_err(|failure| failure.at(&self.graph.ids[node]))?;
            self.steps.fetch_add(1, Ordering::Relaxed);
            state[node] = State::Done(output.clone());
            latest[node] = Some(output.clone());
            self.loop_back(node, &output, &mut state, &mut iteration, &mut taken)?;
        }
        let stuck: Vec<&str> = (0..count)
            .filter(|n| !state[*n].resolved())
            .map(|n| self.graph.ids[n].as_str())
            .collect();
        if !stuck.is_empty() {
            return Err(Failure::failed(format!(
                "nodes never became ready: {}",
                stuck.join(", ")
            )));
        }
        self.output(&state, &latest)
    }

    /// Whether edge `edge`'s condition holds on its source's output.
    fn edge_holds(&self, edge: usize, output: &Value) -> bool {
        let spec = &self.spec.edges[self.graph.declared[edge]];
        spec.when.as_ref().is_none_or(|c| c.holds(output))
    }

    /// After `node` completed: a loop edge out of it whose condition holds sends the run back.
    fn loop_back(
        &self,
        node: usize,
        output: &Value,
        state: &mut [State],
        iteration: &mut [u32],
        taken: &mut [u32],
    ) -> Result<(), Failure> {
        for (index, &(from, to, looped)) in self.graph.edges.iter().enumerate() {
            if from != node || !looped {
                continue;
            }
            let spec = &self.spec.edges[self.graph.declared[index]];
            if !self.edge_holds(index, output) {
                continue;
            }
            let max = spec.max_iterations.unwrap_or(1);
            if taken[index] >= max {
                return Err(Failure::failed(format!(
                    "the loop `{}` → `{}` still holds after its bound of {max} iteration(s)",
                    spec.from, spec.to
                ))
                .at(&spec.from));
            }
            taken[index] += 1;
            for member in self.graph.body(to, from) {
                state[member] = State::Pending;
                iteration[member] += 1;
            }
            return Ok(());
        }
        Ok(())
    }

    fn skip(&self, node: usize, key: NodeKey) -> Result<(), StoreError> {
        let id = &self.graph.ids[node];
        if self.recorded.skipped.contains(&(id.clone(), key)) {
            return Ok(());
        }
        self.emitter
            .emit(EventPayload::NodeSkipped(NodeSkipped {
                node: id.clone(),
                key,
                reason: "no edge into it was taken".into(),
            }))
            .map(drop)
    }

    /// `runtime.specDriven.phase.*` for phase `k`, once (also across a resume).
    pub(super) fn phase_event(
        &self,
        k: usize,
        kind: &'static str,
        reason: Option<String>,
    ) -> Result<(), StoreError> {
        let phase = &self.spec.phases[k];
        let gate = phase.gate.as_ref().map(|g| g.kind.as_str().to_owned());
        let payload = PhaseEvent {
            phase: phase.name.clone(),
            gate,
            reason,
        };
        let payload = match kind {
            "runtime.specDriven.phase.started" => EventPayload::PhaseStarted(payload),
            "runtime.specDriven.phase.completed" => EventPayload::PhaseCompleted(payload),
            "runtime.specDriven.phase.verified" => EventPayload::PhaseVerified(payload),
            _ => EventPayload::PhaseBlocked(payload),
        };
        let once = kind != "runtime.specDriven.phase.blocked";
        let marker = (phase.name.clone(), kind);
        {
            let mut written = match self.written_phases.lock() {
                Ok(written) => written,
                Err(poisoned) => poisoned.into_inner(),
            };
            if once && (self.recorded.phases.contains(&marker) || !written.insert(marker)) {
                return Ok(());
            }
        }
        self.emitter.emit(payload).map(drop)
    }

    /// What templates see: `input`, `outputs` (each node's latest output), `workflow` and,
    /// in a map, `item` and `index`.
    pub(super) fn context(&self, latest: &[Option<Value>]) -> Value {
        let outputs: Map<String, Value> = latest
            .iter()
            .enumerate()
            .filter_map(|(i, output)| Some((self.graph.ids[i].clone(), output.clone()?)))
            .collect();
        json!({
            "input": self.input,
            "outputs": outputs,
            "workflow": {"name": self.name, "requestId": self.request_id},
        })
    }

    /// The workflow's result: `output.value` rendered, else the one completed sink's output,
    /// else an object of the completed sinks' outputs; checked against `output.schema`.
    fn output(&self, state: &[State], latest: &[Option<Value>]) -> Result<Value, Failure> {
        let output = match self.spec.output.as_ref().and_then(|o| o.value.as_ref()) {
            Some(template) => keel_workspace::template::render(template, &self.context(latest))
                .map_err(|e| Failure::failed(format!("`output.value`: {e}")))?,
            None => {
                let mut done: Vec<(String, Value)> = self
                    .graph
                    .sinks()
                    .into_iter()
                    .filter_map(|n| match &state[n] {
                        State::Done(output) => Some((self.graph.ids[n].clone(), output.clone())),
                        _ => None,
                    })
                    .collect();
                match done.len() {
                    1 => done.remove(0).1,
                    _ => Value::Object(done.into_iter().collect()),
                }
            }
        };
        if let Some(mismatch) = self
            .spec
            .output
            .as_ref()
            .and_then(|o| o.schema.as_ref())
            .and_then(|schema| crate::output::mismatch(schema, &output))
        {
            return Err(Failure::failed(format!(
                "the workflow's output does not match `output.schema`{mismatch}"
            )));
        }
        Ok(output)
    }

    /// Records the end: the workflow's event, the terminal event, the run record.
    async fn finish(self, end: End, started: Instant) -> RunResponse {
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let usage = match self.usage.lock() {
            Ok(usage) => *usage,
            Err(poisoned) => *poisoned.into_inner(),
        };
        let steps = u32::try_from(self.steps.load(Ordering::Relaxed)).unwrap_or(u32::MAX);
        let workflow = self.name.clone();
        let (status, output, value, error, finish_reason, events) = match end {
            End::Completed(value) => {
                let text = match &value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (
                    RunStatus::Completed,
                    Some(text.clone()),
                    Some(value.clone()),
                    None,
                    FinishReason::Completed,
                    vec![
                        EventPayload::WorkflowCompleted(WorkflowCompleted {
                            workflow,
                            output: value.clone(),
                        }),
                        EventPayload::RequestCompleted {
                            output: text,
                            value: Some(value),
                            finish_reason: FinishReason::Completed,
                            usage,
                            steps,
                            duration_ms,
                        },
                    ],
                )
            }
            End::Failed(failure) => {
                let message = match &failure.node {
                    Some(node) => format!("node `{node}`: {}", failure.message),
                    None => failure.message.clone(),
                };
                let error = ErrorInfo::new(failure.code, message);
                (
                    RunStatus::Failed,
                    None,
                    None,
                    Some(error.clone()),
                    FinishReason::NodeFailed,
                    vec![
                        EventPayload::WorkflowFailed(WorkflowFailed {
                            workflow,
                            node: failure.node,
                            error: failure.message,
                        }),
                        EventPayload::RequestFailed {
                            error,
                            finish_reason: FinishReason::NodeFailed,
                            usage,
                            steps,
                            duration_ms,
                        },
                    ],
                )
            }
            End::Cancelled => (
                RunStatus::Cancelled,
                None,
                None,
                Some(ErrorInfo::new(
                    ErrorCode::Cancelled,
                    "the request was cancelled",
                )),
                FinishReason::Cancelled,
                vec![EventPayload::RequestCancelled {
                    reason: "cancelled by the client".into(),
                    usage,
                    steps,
                    duration_ms,
                }],
            ),
            End::Interrupted => (
                RunStatus::Interrupted,
                None,
                None,
                Some(ErrorInfo::new(
                    ErrorCode::Shutdown,
                    "the runtime shut down before the run ended; it can be resumed",
                )),
                FinishReason::Interrupted,
                vec![EventPayload::RequestInterrupted {
                    reason: "the runtime shut down".into(),
                    usage,
                    steps,
                    duration_ms,
                }],
            ),
        };
        let mut error = error;
        let mut fenced = false;
        let last = events.len() - 1;
        for (i, event) in events.into_iter().enumerate() {
            let written = match i == last {
                true => self.emitter.emit_durable(event).await,
                false => self.emitter.emit(event),
            };
            if let Err(store_error) = written {
                tracing::error!(%store_error, "Could not record the end of a workflow run.");
                fenced |= matches!(store_error, keel_types::StoreError::Fenced(_));
                error.get_or_insert(ErrorInfo::new(ErrorCode::Store, store_error.to_string()));
            }
        }
        let mut record = self.record();
        record.status = status;
        record.output = output.clone();
        record.value = value.clone();
        record.error = error.clone();
        record.finish_reason = Some(finish_reason);
        record.usage = usage;
        record.steps = steps;
        record.ended_at = Some(keel_types::now_rfc3339());
        record.event_count = self.emitter.count();
        // Not when the run is no longer this process's (see the agent loop's end).
        if !fenced && let Err(store_error) = self.kernel.store().update_run(&record).await {
            tracing::error!(request_id = %record.request_id, %store_error, "Could not update the run record.");
        } else if !fenced && (self.recorded.last_seq > 0 || self.asked.load(Ordering::Relaxed)) {
            // Its approval nodes and gates still waiting are closed with it.
            let store = self.kernel.store();
            crate::approval_wait::close_pending(store.as_ref(), &record.request_id, status).await;
        }
        RunResponse {
            request_id: record.request_id,
            status,
            output,
            value,
            error,
            finish_reason,
            usage,
            steps,
            duration_ms,
        }
    }
}
