//! The native agent loop (SPEC §4.1).
//!
//! Prompt order: system instructions → (policy text, skill index, skill bodies, memory and
//! history arrive with later features) → the current input. Then model rounds: stream the
//! answer; if it asks for tools, every call goes through the gateway, allowed calls run
//! concurrently (bounded) and their results are appended in call order; loop until a final
//! answer or a budget ends the run. After the answer the execution contract is checked.
//!
//! Cancellation, a shutdown's interruption and the wall-clock budget wrap the whole loop: the
//! loop future is dropped, which closes the model stream and kills tool processes, and then the
//! terminal event is recorded.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_tools::gateway::{Gateway, Guarded};
use keel_tools::hooks::HookInput;
use keel_types::{
    AdapterEvent, ArtifactStore, ErrorCode, ErrorInfo, EventPayload, FinishReason, GuardDecision,
    Message, ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest, ModelStopReason,
    RequestId, RunRecord, RunStatus, RunStore, StoreError, TaskRecord, TaskStatus, ToolCall,
    ToolContext, Usage,
};
use keel_workspace::{AgentSpec, HookEvent, Workspace};
use tokio_util::sync::CancellationToken;

mod tools;

use crate::emitter::Emitter;
use crate::governance::Governance;
use crate::kernel::RunResponse;
use crate::rebuild::{PendingCall, Rebuilt};
use crate::retry;

/// One run in progress.
pub(crate) struct AgentRun {
    emitter: Emitter,
    provider: Arc<dyn ModelProvider>,
    gateway: Arc<Gateway>,
    store: Arc<dyn RunStore>,
    artifacts: Arc<dyn ArtifactStore>,
    workspace: Arc<Workspace>,
    agent: AgentSpec,
    stream: bool,
    record: RunRecord,
    tool_ctx: ToolContext,
    usage: Usage,
    steps: u32,
    /// Tools that completed successfully at least once (for the execution contract).
    succeeded: HashSet<String>,
    /// The conversation sent to the model: prompt, history, input, then this run's rounds.
    messages: Vec<Message>,
    /// Index of this request's input in `messages`: what follows is new in this run.
    input_at: usize,
    /// Calls of the last answer left without a result by an interrupted process.
    pending: Vec<PendingCall>,
    /// A tool call made directly (a task or `tools call`): the run is that call alone.
    direct: Option<DirectCall>,
    /// Policies and hooks.
    governance: Arc<Governance>,
    /// Set when a hook stops the run; the loop ends with it.
    stop: Option<String>,
    /// The run's permission mode, if the request set one.
    mode: Option<keel_workspace::PermissionMode>,
    /// The earlier conversation the request supplied (recorded in its opening event).
    request_history: Vec<Message>,
    /// The request's own time budget; the smaller of it and `runTimeout` applies.
    timeout: Option<Duration>,
}

/// A tool call a client makes directly, without a model.
pub(crate) struct DirectCall {
    pub call: ToolCall,
    /// The task it runs, updated when the run ends.
    pub task: Option<TaskRecord>,
}

/// How a run begins.
pub(crate) enum Start {
    /// A new request.
    Fresh,
    /// An interrupted run continues from its log.
    Resumed { cut_off_round: bool },
    /// A copy of another run's first events continues.
    Forked { from: RequestId, at_seq: u64 },
}

/// How the loop ended, before the terminal event is written.
enum End {
    Answer {
        output: String,
        finish_reason: FinishReason,
    },
    Failed {
        error: ErrorInfo,
        finish_reason: FinishReason,
    },
    Cancelled,
    /// The runtime shut down; the run can be resumed.
    Interrupted,
}

impl End {
    fn failed(code: ErrorCode, message: impl Into<String>, finish_reason: FinishReason) -> Self {
        Self::Failed {
            error: ErrorInfo::new(code, message),
            finish_reason,
        }
    }

    fn store(error: StoreError) -> Self {
        Self::failed(ErrorCode::Store, error.to_string(), FinishReason::Internal)
    }

    fn model(error: &ModelError) -> Self {
        Self::failed(error.code(), error.to_string(), FinishReason::ModelError)
    }
}

/// A complete model answer.
struct Answer {
    text: String,
    calls: Vec<ToolCall>,
    stop: ModelStopReason,
}

/// Failure of one model round.
enum RoundError {
    Model(ModelError),
    Store(StoreError),
}

impl From<StoreError> for RoundError {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl AgentRun {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        emitter: Emitter,
        provider: Arc<dyn ModelProvider>,
        gateway: Arc<Gateway>,
        store: Arc<dyn RunStore>,
        artifacts: Arc<dyn ArtifactStore>,
        workspace: Arc<Workspace>,
        agent: AgentSpec,
        stream: bool,
        record: RunRecord,
        history: Vec<Message>,
        governance: Arc<Governance>,
    ) -> Self {
        let tool_ctx = ToolContext {
            workspace_root: workspace.root.clone(),
            request_id: record.request_id.clone(),
            session_id: record.session_id.clone(),
            agent: record.agent.clone(),
            max_output_bytes: usize::try_from(workspace.runtime.limits.max_tool_output_bytes)
                .unwrap_or(usize::MAX),
        };
        Self {
            emitter,
            provider,
            gateway,
            store,
            artifacts,
            workspace,
            agent,
            stream,
            record,
            tool_ctx,
            usage: Usage::default(),
            steps: 0,
            succeeded: HashSet::new(),
            messages: Vec::new(),
            input_at: 0,
            pending: Vec::new(),
            direct: None,
            governance,
            stop: None,
            mode: None,
            request_history: Vec::new(),
            timeout: None,
        }
        .with_prompt(history)
    }

    /// Prompt assembly in the documented order: system instructions → (policy text, skill
    /// index, skill bodies, memory context: later features) → trimmed session history → the
    /// current input.
    fn with_prompt(mut self, history: Vec<Message>) -> Self {
        if !self.agent.instructions.trim().is_empty() {
            self.messages
                .push(Message::system(self.agent.instructions.clone()));
        }
        self.messages.extend(history);
        self.input_at = self.messages.len();
        self.messages.push(Message::user(self.record.input.clone()));
        self
    }

    pub(crate) fn governance(&self) -> &Governance {
        &self.governance
    }

    pub(crate) fn record_ref(&self) -> &RunRecord {
        &self.record
    }

    pub(crate) fn store_ref(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    pub(crate) fn gateway_ref(&self) -> &Gateway {
        &self.gateway
    }

    pub(crate) fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    pub(crate) fn workspace_root(&self) -> &std::path::Path {
        &self.workspace.root
    }

    /// How long a call waits for a human before it is denied.
    pub(crate) fn approval_timeout(&self) -> Duration {
        self.workspace.runtime.limits.approval_timeout.0
    }

    /// Hooks bound on `tool` to run before it.
    pub(crate) fn pre_call_hooks(&self, tool: &str) -> Vec<String> {
        self.workspace
            .tools
            .get(tool)
            .map(|t| t.hooks.pre_call.clone())
            .unwrap_or_default()
    }

    /// Hooks bound on `tool` to run after it.
    pub(crate) fn post_call_hooks(&self, tool: &str) -> Vec<String> {
        self.workspace
            .tools
            .get(tool)
            .map(|t| t.hooks.post_call.clone())
            .unwrap_or_default()
    }

    /// The gateway's check of a call again (after a hook rewrote it), recorded.
    pub(crate) async fn recheck(&self, call: &ToolCall) -> Result<Guarded, StoreError> {
        let mut verdicts = self.guard_calls(std::slice::from_ref(call)).await?;
        Ok(verdicts.pop().unwrap_or_else(|| Guarded {
            call_id: call.id.clone(),
            requested: call.name.clone(),
            tool: call.name.clone(),
            decision: GuardDecision::Blocked,
            arguments: None,
            issues: Vec::new(),
            repairs: Vec::new(),
        }))
    }

    /// Records a status change of the run (waiting for approval and back) in the store.
    pub(crate) async fn set_status(&mut self, status: RunStatus) -> Result<(), StoreError> {
        self.record.status = status;
        self.record.event_count = self.emitter.count();
        self.store.update_run(&self.record).await
    }

    /// Sets the run's permission mode.
    pub(crate) fn with_mode(mut self, mode: Option<keel_workspace::PermissionMode>) -> Self {
        self.mode = mode;
        self
    }

    /// Records the history the request supplied (already part of the prompt) and sets its
    /// time budget.
    pub(crate) fn with_request(mut self, history: Vec<Message>, timeout: Option<Duration>) -> Self {
        self.request_history = history;
        self.timeout = timeout;
        self
    }

    /// The run's permission mode, if the request set one.
    pub(crate) fn mode(&self) -> Option<keel_workspace::PermissionMode> {
        self.mode
    }

    /// Makes the run a direct tool call.
    pub(crate) fn with_direct(mut self, direct: DirectCall) -> Self {
        self.direct = Some(direct);
        self
    }

    /// Continues from a rebuilt log: its rounds, usage and pending calls.
    pub(crate) fn with_rebuilt(mut self, rebuilt: Rebuilt) -> Self {
        self.messages.extend(rebuilt.messages);
        self.steps = rebuilt.steps;
        self.usage = rebuilt.usage;
        self.succeeded = rebuilt.succeeded;
        self.pending = rebuilt.pending;
        self
    }

    fn max_steps(&self) -> u32 {
        self.agent
            .limits
            .max_steps
            .unwrap_or(self.workspace.runtime.limits.max_steps)
    }

    fn run_timeout(&self) -> Duration {
        let configured = self
            .agent
            .limits
            .run_timeout
            .unwrap_or(self.workspace.runtime.limits.run_timeout)
            .0;
        self.timeout.map_or(configured, |t| t.min(configured))
    }

    /// Model rounds and tool calls until an answer or a failure.
    async fn drive(&mut self) -> End {
        if let Some(direct) = self.direct.as_ref().map(|d| d.call.clone()) {
            return match self.run_direct(direct).await {
                Ok(end) => end,
                Err(error) => End::store(error),
            };
        }
        if self.steps == 0 && self.pending.is_empty() {
            match self.prompt_hooks().await {
                Ok(None) => {}
                Ok(Some(reason)) => {
                    return End::failed(ErrorCode::HookStopped, reason, FinishReason::Stopped);
                }
                Err(error) => return End::store(error),
            }
        }
        if let Err(error) = self.run_pending().await {
            return End::store(error);
        }
        let max_steps = self.max_steps();
        loop {
            if self.steps >= max_steps {
                return End::failed(
                    ErrorCode::MaxSteps,
                    format!("the agent used all {max_steps} steps without a final answer"),
                    FinishReason::MaxSteps,
                );
            }
            self.steps += 1;
            let answer = match self.model_round(self.steps).await {
                Ok(answer) => answer,
                Err(RoundError::Model(error)) => return End::model(&error),
                Err(RoundError::Store(error)) => return End::store(error),
            };
            if answer.calls.is_empty() {
                return self.final_answer(answer).await;
            }
            self.messages
                .push(Message::assistant(answer.text, answer.calls.clone()));
            match self.run_tools(&answer.calls).await {
                Ok(results) => self.messages.extend(results),
                Err(error) => return End::store(error),
            }
            if let Some(reason) = self.stop.take() {
                return End::failed(ErrorCode::HookStopped, reason, FinishReason::Stopped);
            }
        }
    }

    /// `RunStart` and `PromptSubmit` hooks before the first round: context they add goes into
    /// the prompt just before the input; a block or stop ends the run (the reason returned).
    async fn prompt_hooks(&mut self) -> Result<Option<String>, StoreError> {
        let root = self.workspace.root.clone();
        let start = self
            .run_hooks(
                HookEvent::RunStart,
                None,
                &[],
                HookInput::new(HookEvent::RunStart, &root),
            )
            .await?;
        if let Some(reason) = start.fail.or(start.combined.stop).or(start.combined.block) {
            return Ok(Some(reason));
        }
        let mut input = HookInput::new(HookEvent::PromptSubmit, &root);
        input.prompt = Some(self.record.input.clone());
        let round = self
            .run_hooks(HookEvent::PromptSubmit, None, &[], input)
            .await?;
        if let Some(reason) = round.fail.or(round.combined.stop).or(round.combined.block) {
            return Ok(Some(format!("the prompt was blocked by a hook: {reason}")));
        }
        if let Some(context) = round.combined.additional_context {
            self.messages
                .insert(self.input_at, Message::system(context));
            self.input_at += 1;
        }
        Ok(None)
    }

    async fn final_answer(&mut self, answer: Answer) -> End {
        let missing: Vec<String> = self
            .agent
            .contract
            .required_tools
            .iter()
            .filter(|tool| !self.succeeded.contains(*tool))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let message = format!(
                "execution contract violated: required tool(s) not called successfully: {}",
                missing.join(", ")
            );
            if let Err(error) = self.emitter.emit(EventPayload::ContractFailed {
                missing_tools: missing,
            }) {
                return End::store(error);
            }
            return End::failed(
                ErrorCode::ContractFailed,
                message,
                FinishReason::ContractViolation,
            );
        }
        let finish_reason = match answer.stop {
            ModelStopReason::Length => FinishReason::Length,
            _ => FinishReason::Completed,
        };
        self.messages
            .push(Message::assistant(answer.text.clone(), Vec::new()));
        if let Err(error) = self.save_transcript().await {
            return End::store(error);
        }
        End::Answer {
            output: answer.text,
            finish_reason,
        }
    }

    /// Appends this request's turn (input, rounds, tool results, answer) to its session.
    async fn save_transcript(&self) -> Result<(), StoreError> {
        let Some(session) = &self.record.session_id else {
            return Ok(());
        };
        let turn = self.messages.get(self.input_at..).unwrap_or_default();
        self.store
            .append_session_messages(session, &self.record.request_id, turn)
            .await
    }

    /// One model round, retried per the retry policy.
    async fn model_round(&mut self, step: u32) -> Result<Answer, RoundError> {
        let policy = self.workspace.runtime.retry.model.clone();
        let mut attempt = 1;
        loop {
            self.emitter.emit(EventPayload::ModelStarted {
                step,
                attempt,
                model: self.provider.model_name().to_owned(),
                provider: self.provider.provider_name().to_owned(),
            })?;
            let started = Instant::now();
            match self.stream_answer(step).await {
                Ok((answer, usage)) => {
                    self.usage.add(&usage);
                    self.emitter.emit(EventPayload::ModelCompleted {
                        step,
                        stop_reason: answer.stop,
                        usage,
                        latency_ms: millis(started.elapsed()),
                        content: answer.text.clone(),
                        tool_calls: answer.calls.clone(),
                    })?;
                    return Ok(answer);
                }
                Err(RoundError::Model(error))
                    if error.is_retryable() && attempt < policy.max_attempts =>
                {
                    let delay = retry::backoff(&policy, attempt, error.retry_after());
                    tracing::debug!(request_id = %self.record.request_id, attempt, ?delay, %error, "Retrying model round.");
                    self.emitter.emit(EventPayload::ModelRetry {
                        step,
                        attempt,
                        error: ErrorInfo::new(error.code(), error.to_string()),
                        delay_ms: millis(delay),
                    })?;
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Streams one answer, emitting text deltas, and assembles it.
    async fn stream_answer(&self, step: u32) -> Result<(Answer, Usage), RoundError> {
        let request = ModelRequest {
            messages: self.messages.clone(),
            tools: self.gateway.specs(&self.agent.tools).cloned().collect(),
            params: self.model_params(),
            stream: self.stream,
        };
        let mut stream = self
            .provider
            .stream(request)
            .await
            .map_err(RoundError::Model)?;
        let mut text = String::new();
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut usage = Usage::default();
        let mut stop = None;
        while let Some(item) = stream.next().await {
            match item.map_err(RoundError::Model)? {
                ModelEvent::TextDelta { text: delta } => {
                    text.push_str(&delta);
                    self.emitter.emit(EventPayload::Adapter {
                        event: AdapterEvent::OutputDelta { step, text: delta },
                    })?;
                }
                ModelEvent::ToolCallStart { index, id, name } => {
                    if index != calls.len() {
                        return Err(RoundError::Model(ModelError::MalformedStream(format!(
                            "tool call {index} started after {} call(s)",
                            calls.len()
                        ))));
                    }
                    calls.push(ToolCall {
                        id,
                        name,
                        arguments: String::new(),
                    });
                }
                ModelEvent::ToolCallArgsDelta { index, delta } => match calls.get_mut(index) {
                    Some(call) => call.arguments.push_str(&delta),
                    None => {
                        return Err(RoundError::Model(ModelError::MalformedStream(format!(
                            "arguments for tool call {index}, which never started"
                        ))));
                    }
                },
                ModelEvent::Usage { usage: u } => usage = u,
                ModelEvent::Stop { reason } => stop = Some(reason),
            }
        }
        let stop = stop.ok_or_else(|| {
            RoundError::Model(ModelError::MalformedStream(
                "the answer ended without a stop reason".into(),
            ))
        })?;
        Ok((Answer { text, calls, stop }, usage))
    }

    fn model_params(&self) -> ModelParams {
        self.workspace
            .models
            .get(&self.agent.model)
            .map(|m| ModelParams {
                temperature: m.params.temperature,
                max_tokens: m.params.max_tokens,
            })
            .unwrap_or_default()
    }

    /// Records how the run ended: the terminal event, then the run record.
    async fn finish(mut self, end: End, started: Instant) -> RunResponse {
        let duration_ms = millis(started.elapsed());
        let (status, output, error, finish_reason, payload) = match end {
            End::Answer {
                output,
                finish_reason,
            } => (
                RunStatus::Completed,
                Some(output.clone()),
                None,
                finish_reason,
                EventPayload::RequestCompleted {
                    output,
                    finish_reason,
                    usage: self.usage,
                    steps: self.steps,
                    duration_ms,
                },
            ),
            End::Failed {
                error,
                finish_reason,
            } => (
                RunStatus::Failed,
                None,
                Some(error.clone()),
                finish_reason,
                EventPayload::RequestFailed {
                    error,
                    finish_reason,
                    usage: self.usage,
                    steps: self.steps,
                    duration_ms,
                },
            ),
            End::Cancelled => (
                RunStatus::Cancelled,
                None,
                Some(ErrorInfo::new(
                    ErrorCode::Cancelled,
                    "the request was cancelled",
                )),
                FinishReason::Cancelled,
                EventPayload::RequestCancelled {
                    reason: "cancelled by the client".into(),
                    usage: self.usage,
                    steps: self.steps,
                    duration_ms,
                },
            ),
            End::Interrupted => (
                RunStatus::Interrupted,
                None,
                Some(ErrorInfo::new(
                    ErrorCode::Shutdown,
                    "the runtime shut down before the run ended; it can be resumed",
                )),
                FinishReason::Interrupted,
                EventPayload::RequestInterrupted {
                    reason: "the runtime shut down".into(),
                    usage: self.usage,
                    steps: self.steps,
                    duration_ms,
                },
            ),
        };
        let mut error = error;
        let root = self.workspace.root.clone();
        // Non-blocking hooks at the end: recorded, their answers ignored. An interrupted run
        // has not ended: its hooks run when it does, after a resume.
        if status != RunStatus::Interrupted {
            let mut ended = HookInput::new(HookEvent::RunEnd, &root);
            ended.prompt = Some(self.record.input.clone());
            if let Err(store_error) = self.run_hooks(HookEvent::RunEnd, None, &[], ended).await {
                tracing::warn!(%store_error, "Could not record RunEnd hooks.");
            }
        }
        if status == RunStatus::Completed {
            let stop = HookInput::new(HookEvent::SessionStop, &root);
            if let Err(store_error) = self
                .run_hooks(HookEvent::SessionStop, None, &[], stop)
                .await
            {
                tracing::warn!(%store_error, "Could not record SessionStop hooks.");
            }
        }
        if let Err(store_error) = self.emitter.emit_durable(payload).await {
            tracing::error!(request_id = %self.record.request_id, %store_error, "Could not record the end of a run.");
            error.get_or_insert(ErrorInfo::new(ErrorCode::Store, store_error.to_string()));
        }
        self.record.status = status;
        self.record.output = output.clone();
        self.record.error = error.clone();
        self.record.finish_reason = Some(finish_reason);
        self.record.usage = self.usage;
        self.record.steps = self.steps;
        self.record.ended_at = Some(keel_types::now_rfc3339());
        self.record.event_count = self.emitter.count();
        if let Some(mut task) = self.direct.take().and_then(|d| d.task) {
            task.status = match status {
                RunStatus::Completed => TaskStatus::Completed,
                _ => TaskStatus::Failed,
            };
            task.request_id = Some(self.record.request_id.clone());
            task.output = output
                .clone()
                .or_else(|| error.as_ref().map(|e| e.message.clone()));
            task.updated_at = keel_types::now_rfc3339();
            if let Err(store_error) = self.store.put_task(&task).await {
                tracing::error!(task_id = %task.task_id, %store_error, "Could not update the task.");
            }
        }
        if let Err(store_error) = self.store.update_run(&self.record).await {
            tracing::error!(request_id = %self.record.request_id, %store_error, "Could not update the run record.");
        }
        RunResponse {
            request_id: self.record.request_id,
            status,
            output,
            error,
            finish_reason,
            usage: self.usage,
            steps: self.steps,
            duration_ms,
        }
    }
}

/// Runs a request to its end: the opening event, the loop under cancellation, interruption
/// (shutdown) and the wall-clock budget, then the terminal event.
pub(crate) async fn execute(
    mut run: AgentRun,
    start: Start,
    cancel: CancellationToken,
    interrupt: CancellationToken,
) -> RunResponse {
    let started = Instant::now();
    let opening = match start {
        Start::Fresh => EventPayload::RequestStarted {
            input: run.record.input.clone(),
            history: std::mem::take(&mut run.request_history),
            mode: run.mode,
        },
        Start::Resumed { cut_off_round } => {
            let (rerun, abandoned): (Vec<&PendingCall>, Vec<&PendingCall>) = run
                .pending
                .iter()
                .filter(|p| p.started)
                .partition(|p| run.gateway.is_idempotent(&p.call.name));
            EventPayload::RequestResumed {
                reissued_round: cut_off_round,
                rerun_calls: rerun.iter().map(|p| p.call.id.clone()).collect(),
                abandoned_calls: abandoned.iter().map(|p| p.call.id.clone()).collect(),
            }
        }
        Start::Forked { from, at_seq } => EventPayload::RequestForked {
            from_request_id: from,
            at_seq,
        },
    };
    let end = if let Err(error) = run.emitter.emit(opening) {
        End::store(error)
    } else {
        let timeout = run.run_timeout();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => End::Cancelled,
            _ = interrupt.cancelled() => End::Interrupted,
            end = tokio::time::timeout(timeout, run.drive()) => end.unwrap_or_else(|_| End::failed(
                ErrorCode::Timeout,
                format!("the run exceeded its time budget of {}", humantime::format_duration(timeout)),
                FinishReason::Timeout,
            )),
        }
    };
    run.finish(end, started).await
}

/// The tool result of a call not run because a hook stopped the run.
fn stopped(reason: &str) -> String {
    serde_json::json!({ "error": "the run was stopped by a hook", "reason": reason }).to_string()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
