//! The native agent loop (SPEC §4.1).
//!
//! Prompt order: system instructions → (policy text, skill index, skill bodies, memory and
//! history arrive with later features) → the current input. Then model rounds: stream the
//! answer; if it asks for tools, every call goes through the gateway, allowed calls run
//! concurrently (bounded) and their results are appended in call order; loop until a final
//! answer or a budget ends the run. After the answer the execution contract is checked.
//!
//! Cancellation and the wall-clock budget wrap the whole loop: the loop future is dropped,
//! which closes the model stream and kills tool processes, and then the terminal event is
//! recorded.

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
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::emitter::Emitter;
use crate::governance::{Gate, Governance};
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
        self.agent
            .limits
            .run_timeout
            .unwrap_or(self.workspace.runtime.limits.run_timeout)
            .0
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

    /// A direct tool call: the gateway's checks, execution, and the direct events around it.
    async fn run_direct(&mut self, call: ToolCall) -> Result<End, StoreError> {
        let task_id = self
            .direct
            .as_ref()
            .and_then(|d| d.task.as_ref())
            .map(|t| t.task_id.clone());
        let arguments =
            serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments.clone()));
        self.emitter.emit(EventPayload::DirectStarted {
            task_id: task_id.clone(),
            tool: call.name.clone(),
            arguments,
        })?;
        let started = Instant::now();
        let guarded = self.guard_calls(std::slice::from_ref(&call)).await?;
        let verdict = guarded.first().cloned();
        let mut results = self.execute_guarded(&guarded).await?;
        let output = results.pop().map(|m| m.content).unwrap_or_default();
        let blocked = verdict.as_ref().is_none_or(|v| !v.is_allowed());
        let ok = !blocked
            && self
                .succeeded
                .contains(&verdict.as_ref().map(|v| v.tool.clone()).unwrap_or_default());
        self.emitter.emit(EventPayload::DirectCompleted {
            task_id,
            tool: verdict.map_or(call.name.clone(), |v| v.tool),
            ok,
            output: output.clone(),
            duration_ms: millis(started.elapsed()),
        })?;
        Ok(match (ok, blocked) {
            (true, _) => End::Answer {
                output,
                finish_reason: FinishReason::Completed,
            },
            (false, true) => End::failed(ErrorCode::ToolBlocked, output, FinishReason::Completed),
            (false, false) => End::failed(ErrorCode::ToolFailed, output, FinishReason::Completed),
        })
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

    /// Settles the calls an interrupted process left without a result: calls that never
    /// started, and started calls of idempotent tools, run (again); the others are reported
    /// to the model as having an unknown outcome.
    async fn run_pending(&mut self) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            return Ok(());
        }
        let mut rerun = Vec::new();
        let mut results: Vec<(String, Message)> = Vec::new();
        for item in &pending {
            if !item.started || self.gateway.is_idempotent(&item.call.name) {
                rerun.push(item.call.clone());
                continue;
            }
            let output = serde_json::json!({
                "error": "this call was interrupted (the process running it stopped); its outcome is unknown and it was not run again because the tool is not marked idempotent"
            })
            .to_string();
            self.emitter.emit(EventPayload::Adapter {
                event: AdapterEvent::ToolResult {
                    call_id: item.call.id.clone(),
                    tool: item.call.name.clone(),
                    ok: false,
                    output: output.clone(),
                    duration_ms: 0,
                },
            })?;
            results.push((
                item.call.id.clone(),
                Message::tool_result(&item.call.id, output),
            ));
        }
        for message in self.run_tools(&rerun).await? {
            let id = message.tool_call_id.clone().unwrap_or_default();
            results.push((id, message));
        }
        // Results go back in the original call order.
        for item in &pending {
            if let Some(at) = results.iter().position(|(id, _)| id == &item.call.id) {
                self.messages.push(results.remove(at).1);
            }
        }
        Ok(())
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

    /// Guards every call, runs the allowed ones concurrently (bounded), and returns the tool
    /// messages in call order.
    async fn run_tools(&mut self, calls: &[ToolCall]) -> Result<Vec<Message>, StoreError> {
        let guarded = self.guard_calls(calls).await?;
        self.execute_guarded(&guarded).await
    }

    /// The gateway's verdict on each call, each recorded as `runtime.tool.guard`.
    async fn guard_calls(&self, calls: &[ToolCall]) -> Result<Vec<Guarded>, StoreError> {
        let mut guarded = Vec::with_capacity(calls.len());
        let workspace = self.workspace.clone();
        let agent = self.record.agent.clone();
        let mode_of = move |tool: &str| workspace.gateway_mode(&agent, tool);
        for call in calls {
            let verdict = self
                .gateway
                .guard(&self.tool_ctx, &self.agent.tools, call, &mode_of)
                .await;
            let repaired = verdict.decision == GuardDecision::Repaired;
            self.emitter.emit(EventPayload::ToolGuard {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                decision: verdict.decision,
                arguments: call.arguments.clone(),
                issues: verdict.issues.clone(),
                repairs: verdict.repairs.clone(),
                resolved_tool: (verdict.tool != call.name).then(|| verdict.tool.clone()),
                repaired_arguments: repaired.then(|| verdict.arguments.clone()).flatten(),
            })?;
            guarded.push(verdict);
        }
        Ok(guarded)
    }

    /// Policy, hooks and approval for each accepted call, in call order. A refused call
    /// becomes a blocked verdict whose result is the refusal.
    async fn govern_calls(
        &mut self,
        guarded: Vec<Guarded>,
    ) -> Result<(Vec<Guarded>, Vec<Option<String>>), StoreError> {
        let mut governed = Vec::with_capacity(guarded.len());
        let mut refusals = Vec::with_capacity(guarded.len());
        for mut verdict in guarded {
            if !verdict.is_allowed() || self.stop.is_some() {
                refusals.push(self.stop.as_ref().map(|reason| stopped(reason)));
                governed.push(verdict);
                continue;
            }
            match self.govern(&mut verdict).await? {
                Gate::Run => refusals.push(None),
                Gate::Refuse(message) => {
                    verdict.decision = GuardDecision::Blocked;
                    refusals.push(Some(message));
                }
                Gate::Stop(reason) => {
                    verdict.decision = GuardDecision::Blocked;
                    refusals.push(Some(stopped(&reason)));
                    self.stop = Some(reason);
                }
            }
            governed.push(verdict);
        }
        Ok((governed, refusals))
    }

    /// Runs the allowed calls concurrently (bounded); the tool messages in call order.
    async fn execute_guarded(&mut self, guarded: &[Guarded]) -> Result<Vec<Message>, StoreError> {
        let (guarded, refusals) = self.govern_calls(guarded.to_vec()).await?;
        let parallel = self.workspace.runtime.limits.max_parallel_tools.max(1) as usize;
        let this = &*self;
        // Futures are built up front (not in a stream closure) so the spawned run stays `Send`.
        let calls: Vec<_> = guarded
            .iter()
            .zip(&refusals)
            .map(|(verdict, refusal)| this.run_tool(verdict, refusal.as_deref()))
            .collect();
        let outcomes: Vec<Result<(Message, Option<String>), StoreError>> =
            futures_util::stream::iter(calls)
                .buffered(parallel)
                .collect()
                .await;
        let mut messages = Vec::with_capacity(outcomes.len());
        for (outcome, verdict) in outcomes.into_iter().zip(&guarded) {
            let (message, succeeded) = outcome?;
            if let Some(tool) = succeeded {
                self.succeeded.insert(tool);
            }
            if verdict.is_allowed() {
                let arguments = verdict.arguments.clone().unwrap_or(Value::Null);
                if let Some(reason) = self
                    .post_tool_hooks(
                        &verdict.call_id,
                        &verdict.tool,
                        &arguments,
                        &message.content,
                    )
                    .await?
                {
                    self.stop.get_or_insert(reason);
                }
            }
            messages.push(message);
        }
        Ok(messages)
    }

    /// Runs one guarded call. Returns the tool message and, on success, the tool's name.
    async fn run_tool(
        &self,
        verdict: &Guarded,
        refusal: Option<&str>,
    ) -> Result<(Message, Option<String>), StoreError> {
        if let Some(refusal) = refusal {
            return Ok((Message::tool_result(&verdict.call_id, refusal), None));
        }
        let Some(arguments) = verdict.arguments.clone().filter(|_| verdict.is_allowed()) else {
            return Ok((
                Message::tool_result(&verdict.call_id, verdict.blocked_message()),
                None,
            ));
        };
        // Write-ahead: the start is durable before the tool can have effects.
        self.emitter
            .emit_durable(EventPayload::Adapter {
                event: AdapterEvent::ToolStart {
                    call_id: verdict.call_id.clone(),
                    tool: verdict.tool.clone(),
                    arguments,
                },
            })
            .await?;
        let started = Instant::now();
        let result = self.gateway.execute(&self.tool_ctx, verdict).await;
        let duration_ms = millis(started.elapsed());
        let (ok, mut output) = match result {
            Ok(output) => (true, self.settle_output(verdict, output.content).await?),
            Err(error) => (
                false,
                serde_json::json!({ "error": error.to_string() }).to_string(),
            ),
        };
        // The model sees what the gateway changed, so it can send it right next time.
        if let Some(note) = verdict.repair_note() {
            output.push_str("\n[");
            output.push_str(&note);
            output.push(']');
        }
        self.emitter.emit(EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                call_id: verdict.call_id.clone(),
                tool: verdict.tool.clone(),
                ok,
                output: output.clone(),
                duration_ms,
            },
        })?;
        let succeeded = ok.then(|| verdict.tool.clone());
        Ok((Message::tool_result(&verdict.call_id, output), succeeded))
    }

    /// What the model receives for a tool's output: the output itself when it fits the
    /// limit; otherwise the whole output is stored as an artifact and the model gets a
    /// preview and the artifact's URI.
    async fn settle_output(
        &self,
        verdict: &Guarded,
        content: String,
    ) -> Result<String, StoreError> {
        let limit = self.tool_ctx.max_output_bytes;
        if content.len() <= limit {
            return Ok(content);
        }
        let artifact = self
            .artifacts
            .put(
                &self.record.request_id,
                &format!("{} output ({})", verdict.tool, verdict.call_id),
                "text/plain",
                content.as_bytes(),
            )
            .await?;
        let note = format!(
            "\n[output truncated: {} bytes in all; the whole output is stored as {}]",
            content.len(),
            artifact.uri
        );
        let mut cut = limit.saturating_sub(note.len());
        while !content.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut preview = content;
        preview.truncate(cut);
        preview.push_str(&note);
        self.emitter.emit(EventPayload::ArtifactCreated {
            artifact,
            call_id: Some(verdict.call_id.clone()),
        })?;
        Ok(preview)
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
        };
        let mut error = error;
        // Non-blocking hooks at the end: recorded, their answers ignored.
        let root = self.workspace.root.clone();
        let mut ended = HookInput::new(HookEvent::RunEnd, &root);
        ended.prompt = Some(self.record.input.clone());
        if let Err(store_error) = self.run_hooks(HookEvent::RunEnd, None, &[], ended).await {
            tracing::warn!(%store_error, "Could not record RunEnd hooks.");
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

/// Runs a request to its end: the opening event, the loop under cancellation and the
/// wall-clock budget, then the terminal event.
pub(crate) async fn execute(
    mut run: AgentRun,
    start: Start,
    cancel: CancellationToken,
) -> RunResponse {
    let started = Instant::now();
    let opening = match start {
        Start::Fresh => EventPayload::RequestStarted {
            input: run.record.input.clone(),
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
