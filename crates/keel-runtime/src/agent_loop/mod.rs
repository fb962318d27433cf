//! The native agent loop: one home for everything a run does.
//!
//! Prompt order: system instructions → the skill catalogue and the bodies of always-on and
//! `$mentioned` skills (`crate::skills`) → the records recalled from memory (`crate::memory`)
//! → (policy text arrives with a later feature) → the session's history → the history the request
//! supplied → context from `PromptSubmit` hooks → the current input. Then model rounds
//! (`model.rs`): stream the answer; if it asks for tools, every call takes the gateway's path
//! (`tools.rs`: guard → govern → execute → post-call hooks; the hook rounds and approvals it
//! uses are in `govern.rs`), and results are appended in call order; loop until a final answer
//! or a budget ends the run. After the answer the execution contract is checked.
//!
//! Cancellation, a shutdown's interruption and the wall-clock budget wrap the whole loop
//! ([`execute`]): the loop future is dropped, which closes the model stream and kills tool
//! processes, and then the terminal event is recorded.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::gateway::Gateway;
use keel_tools::hooks::HookInput;
use keel_types::{
    ArtifactStore, ErrorCode, ErrorInfo, EventPayload, FinishReason, HookEvent, Message,
    ModelParams, ModelProvider, ModelStopReason, PermissionMode, RequestId, RunRecord, RunStatus,
    RunStore, StoreError, TaskRecord, TaskStatus, ToolCall, ToolContext, Usage,
};
use keel_workspace::{AgentSpec, Workspace};
use tokio_util::sync::CancellationToken;

mod delegation;
mod embedded;
mod end;
mod govern;
mod launch;
mod model;
mod structured;
mod tools;

use crate::emitter::Emitter;
use crate::governance::Governance;
use crate::handle::RunResponse;
use crate::rebuild::PendingCall;
use crate::skills::SkillCache;
mod backend;
mod budgets;
mod context;
mod remote;
pub(crate) use embedded::embedded_call;
use end::End;
pub(crate) use launch::Launch;
use model::{Answer, RoundError};
use structured::Structured;

/// What every run of a kernel shares.
pub(crate) struct Services {
    pub workspace: Arc<Workspace>,
    pub gateway: Arc<Gateway>,
    pub store: Arc<dyn RunStore>,
    /// Where large tool outputs go.
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Policies and hooks.
    pub governance: Governance,
    /// The skills' catalogues and bodies, per scan.
    pub skills: SkillCache,
    /// Long-term memory, when the workspace declares any.
    pub memory: Option<Arc<crate::memory::MemoryService>>,
    /// Starts child runs (the kernel).
    pub delegate: Arc<dyn crate::subagents::Delegate>,
    /// Woken when an approval is decided (here, or on another replica of a shared store), so
    /// a waiting run looks at once instead of at its next poll.
    pub decisions: Arc<tokio::sync::Notify>,
    /// Held while a run of this workspace snapshot lives (the MCP servers its tools call).
    pub _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// What runs agents whose `backend` is not native.
    pub adapters: crate::adapter::Adapters,
    /// Each `Model` document's usable fallbacks, in order (`Model.fallbacks`).
    pub fallbacks: HashMap<String, Fallbacks>,
    /// The rate limits of the `Model` documents that declare them (`Model.limits`).
    pub limiters: HashMap<String, Arc<crate::rate_limit::ModelLimiter>>,
    /// Every usable `Model` document's provider (a `context.summarizer` is one).
    pub providers: HashMap<String, Arc<dyn keel_types::ModelProvider>>,
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
    /// A new request whose opening event was stored with its record.
    Opened(Box<keel_types::Event>),
    /// An interrupted run continues from its log.
    Resumed { cut_off_round: bool },
    /// A copy of another run's first events continues.
    Forked { from: RequestId, at_seq: u64 },
}

/// A model's fallbacks: the usable ones, in order, and whether a run stays on the one that
/// answered.
#[derive(Clone)]
pub(crate) struct Fallbacks {
    pub chain: Vec<(String, Arc<dyn ModelProvider>)>,
    pub sticky: bool,
}

/// One run in progress.
pub(crate) struct AgentRun {
    services: Arc<Services>,
    emitter: Arc<Emitter>,
    provider: Arc<dyn ModelProvider>,
    agent: AgentSpec,
    /// Whether model answers are streamed (the model document's `stream`).
    stream: bool,
    record: RunRecord,
    /// How the run begins (its opening event).
    start: Start,
    tool_ctx: ToolContext,
    usage: Usage,
    steps: u32,
    /// Tools that completed successfully at least once (for the execution contract).
    succeeded: HashSet<String>,
    /// The conversation sent to the model: prompt, history, input, then this run's rounds.
    messages: Vec<Message>,
    /// Index of this request's input in `messages`: what follows is new in this run.
    input_at: usize,
    /// Where the skills' messages (catalogue, bodies) start in `messages`: after the
    /// instructions, before the history.
    skills_at: usize,
    /// Where the recalled memory starts (after the skills).
    memory_at: usize,
    /// `runtime.skill.offered|injected`, recorded when the run starts.
    skill_events: Vec<EventPayload>,
    /// Where the history (the session's, then the request's) starts and ends in `messages`;
    /// hook context sits between its end and the input (`runtime.prompt.assembled`).
    history_span: (usize, usize),
    /// The prompt's sections before this run's rounds, with their ends (they do not change
    /// from round to round).
    fixed_sections: Option<([usize; 6], Vec<keel_types::PromptSection>)>,
    /// The `tools` section of the last round, with the definitions it measured (the gateway
    /// hands out the same list until the tools change).
    tools_section: Option<(Arc<[keel_types::ToolSpec]>, keel_types::PromptSection)>,
    /// The last round's prompt as the provider counted it: the messages it held and its
    /// prompt tokens (what was added since is estimated). Cleared by a compaction.
    measured: Option<(usize, u64)>,
    /// Each prompt message's tokens, counted once with the model's tokenizer.
    tokens: crate::context::TokenCounter,
    /// What the results elided and not yet summarized said, by call: a summary reads them.
    elided_texts: HashMap<String, String>,
    /// What the session's other runs used, when the session has a budget.
    session_used: Option<Usage>,
    /// Times a human gave the run as much budget again (`limits.onBudget: ask`).
    budget_grants: u32,

    /// Calls of the last answer left without a result by an interrupted process.
    pending: Vec<PendingCall>,
    /// A tool call made directly (a task or `tools call`): the run is that call alone.
    direct: Option<DirectCall>,
    /// Set when a hook stops the run; the loop ends with it.
    stop: Option<String>,
    /// How often the final answer was rejected for not matching `output.schema`.
    output_rejections: u32,
    /// The run's permission mode, if the request set one.
    mode: Option<PermissionMode>,
    /// The earlier conversation the request supplied (recorded in its opening event).
    request_history: Vec<Message>,
    /// Model parameters the request set, over the Model document's in every round.
    params: ModelParams,
    /// The structured output the request asked for (then also the agent's `output`).
    output_schema: Option<serde_json::Value>,
    /// The request's own time budget; the smaller of it and `runTimeout` applies.
    timeout: Option<Duration>,
    /// Policies that may only narrow this run's decisions (its ancestors').
    narrowing: Vec<keel_workspace::PolicySpec>,
    /// How deep in a tree of runs this one is.
    depth: u32,
    /// Set when the runtime shuts down: children are left to be interrupted, not cancelled.
    interrupt: CancellationToken,
    /// What this run's children used, counted into its own usage after each tool round.
    delegated: std::sync::Mutex<Usage>,
    /// A tool call made inside another run (a workflow's tool node): its events go to that
    /// run's log, and that run keeps its own record and status.
    embedded: bool,
    /// An earlier process of this run may have asked a person about its calls (the run, or
    /// the workflow run hosting this call, was resumed): a call looks for that approval first.
    asked_before: bool,
    /// This process asked a person about one of the run's calls (or waits again on an earlier
    /// approval): the run's end closes what is still pending. A run that never asked, and
    /// was not resumed, has nothing to close and skips the look.
    asked: bool,
    /// The round a process-backed agent's program asks for, while it is made.
    program_ask: Option<crate::adapter::ModelAsk>,
    /// The `Model` document answering the run's rounds: the agent's, or one of its fallbacks.
    model_doc: String,
    /// The agent's own model's provider (a non-sticky fallback goes back to it).
    primary: Arc<dyn ModelProvider>,
    /// The `traceparent`s the run sends: its trace and current attempt.
    propagation: crate::trace::Propagation,
}

impl AgentRun {
    /// A run ready to execute, its prompt assembled.
    pub(crate) fn new(services: Arc<Services>, emitter: Arc<Emitter>, launch: Launch) -> Self {
        let Launch {
            record,
            agent,
            provider,
            start,
            history,
            request_history,
            timeout,
            rebuilt,
            direct,
            mode,
            skills,
            memory,
            metadata,
            params,
            output_schema,
            narrowing,
            depth,
            files,
        } = launch;
        let mut agent = agent;
        if let Some(schema) = &output_schema {
            agent.output = Some(keel_workspace::OutputSpec::new(schema.clone()));
        }
        let workspace = &services.workspace;
        let tool_ctx = launch::tool_context(workspace, &record, direct.is_none(), metadata, files);
        let asked_before = matches!(start, Start::Resumed { .. });
        let stream = workspace
            .models
            .get(&agent.model)
            .is_none_or(|model| model.stream);
        let run_primary = provider.clone();
        let model_doc = agent.model.clone();
        let mut run = Self {
            propagation: crate::trace::Propagation::new(&record),
            emitter,
            provider,
            agent,
            stream,
            record,
            start,
            tool_ctx,
            usage: Usage::default(),
            steps: 0,
            succeeded: HashSet::new(),
            messages: Vec::new(),
            history_span: (0, 0),
            fixed_sections: None,
            tools_section: None,
            measured: None,
            tokens: Default::default(),
            elided_texts: HashMap::new(),
            session_used: None,
            budget_grants: 0,
            skills_at: 0,
            memory_at: 0,
            skill_events: skills.events.into_iter().chain(memory.events).collect(),
            input_at: 0,
            pending: Vec::new(),
            direct,
            stop: None,
            output_rejections: 0,
            mode,
            request_history,
            params,
            output_schema,
            timeout,
            narrowing,
            depth,
            interrupt: CancellationToken::new(),
            delegated: std::sync::Mutex::new(Usage::default()),
            embedded: false,
            asked_before,
            asked: false,
            program_ask: None,
            model_doc,
            primary: run_primary,
            services,
        };
        run.assemble_prompt(skills.messages, memory.messages, history);
        if let Some(rebuilt) = rebuilt {
            run.remember_seen(&rebuilt.seen_paths);
            run.messages.extend(rebuilt.messages);
            run.elided_texts = rebuilt.elided_texts;
            run.steps = rebuilt.steps;
            run.usage = rebuilt.usage;
            run.succeeded = rebuilt.succeeded;
            run.pending = rebuilt.pending;
        }
        run
    }

    /// Marks the files a resumed run had read or written before as seen (read before edit).
    fn remember_seen(&self, paths: &[String]) {
        let Some(seen) = &self.tool_ctx.seen_files else {
            return;
        };
        let root = &self.tool_ctx.workspace_root;
        for path in paths {
            if let Ok(real) =
                keel_tools::paths::resolve(root, path, keel_tools::paths::Access::Read)
            {
                seen.insert(&real);
            }
        }
    }

    /// Prompt assembly in the documented order: system instructions → the skill catalogue
    /// and the bodies of always-on and mentioned skills → the recalled memory → (policy text:
    /// a later feature) → the session's trimmed history → the history the request supplied → the
    /// current input.
    fn assemble_prompt(
        &mut self,
        skills: Vec<Message>,
        memory: Vec<Message>,
        session_history: Vec<Message>,
    ) {
        let mut instructions = self.agent.instructions.clone();
        if let Some(output) = &self.agent.output {
            if !instructions.trim().is_empty() {
                instructions.push_str("\n\n");
            }
            instructions.push_str(&crate::output::instruction(&output.schema));
        }
        if !instructions.trim().is_empty() {
            self.messages.push(Message::system(instructions));
        }
        self.skills_at = self.messages.len();
        self.messages.extend(skills);
        self.memory_at = self.messages.len();
        self.messages.extend(memory);
        let history_at = self.messages.len();
        self.messages.extend(session_history);
        self.messages.extend(self.request_history.iter().cloned());
        self.input_at = self.messages.len();
        self.history_span = (history_at, self.input_at);
        self.messages.push(Message::user(self.record.input.clone()));
    }

    fn max_steps(&self) -> u32 {
        self.agent
            .limits
            .max_steps
            .unwrap_or(self.services.workspace.runtime.limits.max_steps)
    }

    /// The end of a run whose usage has passed its token budget (`limits.maxTokens`, the
    /// agent's own first), if it has.
    fn run_timeout(&self) -> Duration {
        let configured = self
            .agent
            .limits
            .run_timeout
            .unwrap_or(self.services.workspace.runtime.limits.run_timeout)
            .0;
        self.timeout.map_or(configured, |t| t.min(configured))
    }

    /// Model rounds and tool calls until an answer or a failure.
    ///
    /// Every phase but the model round is awaited boxed. A future is as large as its largest
    /// state, so with tools, hooks and the final answer inline every run's task was about
    /// 14 KiB while it waited for its model; boxed, a phase costs an allocation while it runs.
    async fn drive(&mut self) -> End {
        // Tools of sources that start with the runtime (MCP servers) are listed once their
        // servers have answered or failed, before the model or a direct call sees them.
        let lifecycle = self.services.gateway.settle(&self.agent.tools).await;
        for event in lifecycle {
            if let Err(error) = self.emitter.emit(EventPayload::McpLifecycle {
                server: event.source,
                lifecycle: event.kind,
                at: event.at,
                detail: event.detail,
            }) {
                return End::store(error);
            }
        }
        for event in std::mem::take(&mut self.skill_events) {
            if let Err(error) = self.emitter.emit(event) {
                return End::store(error);
            }
        }
        if let Some(direct) = self.direct.as_ref().map(|d| d.call.clone()) {
            return match Box::pin(self.run_direct(direct)).await {
                Ok(end) => end,
                Err(error) => End::store(error),
            };
        }
        if self.steps == 0 && self.pending.is_empty() {
            match Box::pin(self.prompt_hooks()).await {
                Ok(None) => {}
                Ok(Some(reason)) => {
                    return End::failed(ErrorCode::HookStopped, reason, FinishReason::Stopped);
                }
                Err(error) => return End::store(error),
            }
        }
        if let Some(backend) = self.agent.backend.process() {
            return Box::pin(self.drive_program(backend)).await;
        }
        if let Some(backend) = self.agent.backend.remote() {
            return Box::pin(self.drive_remote(backend)).await;
        }
        if let Err(error) = Box::pin(self.run_pending()).await {
            return End::store(error);
        }
        if let Err(error) = self.load_session_spend().await {
            return End::store(error);
        }
        let max_steps = self.max_steps();
        loop {
            match self.over_budget().await {
                Ok(Some(end)) => return end,
                Ok(None) => {}
                Err(error) => return End::store(error),
            }
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
            if answer.calls.is_empty() && answer.stop == ModelStopReason::Paused {
                // The provider paused a long turn: sending it back continues it.
                self.messages.push(
                    Message::assistant(answer.text, Vec::new()).with_thinking(answer.thinking),
                );
                continue;
            }
            if answer.calls.is_empty() {
                let value = match self.structured(&answer.text) {
                    Structured::Valid(value) => value,
                    Structured::Reask => continue,
                    Structured::End(end) => return end,
                };
                return Box::pin(self.final_answer(answer, value)).await;
            }
            // Calls the run could no longer follow up on are not made.
            match self.over_budget().await {
                Ok(Some(end)) => return end,
                Ok(None) => {}
                Err(error) => return End::store(error),
            }
            self.messages.push(
                Message::assistant(answer.text, answer.calls.clone())
                    .with_thinking(answer.thinking),
            );
            match Box::pin(self.run_tools(&answer.calls)).await {
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
        let root = &self.services.workspace.root;
        let start = self
            .run_hooks(HookEvent::RunStart, None, || {
                HookInput::new(HookEvent::RunStart, root)
            })
            .await?;
        if let Some(reason) = start.stops() {
            return Ok(Some(reason));
        }
        let round = self
            .run_hooks(HookEvent::PromptSubmit, None, || {
                let mut input = HookInput::new(HookEvent::PromptSubmit, root);
                input.prompt = Some(self.record.input.clone());
                input
            })
            .await?;
        let context = round.combined.additional_context.clone();
        if let Some(reason) = round.stops() {
            return Ok(Some(format!("the prompt was blocked by a hook: {reason}")));
        }
        if let Some(context) = context {
            self.messages
                .insert(self.input_at, Message::system(context));
            self.input_at += 1;
        }
        Ok(None)
    }

    async fn final_answer(&mut self, answer: Answer, value: Option<serde_json::Value>) -> End {
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
                reason: message.clone(),
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
            ModelStopReason::ContentFilter => FinishReason::ContentFilter,
            _ => FinishReason::Completed,
        };
        self.messages.push(
            Message::assistant(answer.text.clone(), Vec::new()).with_thinking(answer.thinking),
        );
        if let Err(error) = self.save_transcript().await {
            return End::store(error);
        }
        End::Answer {
            output: answer.text,
            value,
            finish_reason,
        }
    }

    /// Appends this request's turn (input, rounds, tool results, answer) to its session.
    async fn save_transcript(&self) -> Result<(), StoreError> {
        let Some(session) = &self.record.session_id else {
            return Ok(());
        };
        let turn = self.messages.get(self.input_at..).unwrap_or_default();
        self.services
            .store
            .append_session_messages(session, &self.record.request_id, turn)
            .await
    }

    /// `RunEnd` hooks, then `SessionStop` (Claude Code's `Stop`) hooks: after every turn
    /// that ended — completed, failed or cancelled.
    async fn end_hooks(&self) {
        let root = &self.services.workspace.root;
        let ended = self
            .run_hooks(HookEvent::RunEnd, None, || {
                let mut input = HookInput::new(HookEvent::RunEnd, root);
                input.prompt = Some(self.record.input.clone());
                input
            })
            .await;
        if let Err(store_error) = ended {
            tracing::warn!(%store_error, "Could not record RunEnd hooks.");
        }
        let stopped = self
            .run_hooks(HookEvent::SessionStop, None, || {
                HookInput::new(HookEvent::SessionStop, root)
            })
            .await;
        if let Err(store_error) = stopped {
            tracing::warn!(%store_error, "Could not record SessionStop hooks.");
        }
    }

    /// Records how the run ended: the terminal event with the run record, then its task.
    async fn finish(mut self, end: End, started: Instant) -> RunResponse {
        let duration_ms = crate::millis(started.elapsed());
        // The run's sandboxed processes have ended with their calls: their temporary folder
        // goes with the run.
        // Its exec sessions end with it (a resumed run never gets them back).
        let run_id = self.tool_ctx.request_id.to_string();
        keel_tools::exec::end_run(&run_id);
        keel_tools::sandbox::remove_run_temp_dir(&run_id, self.asked_before);
        let (status, output, error, finish_reason, payload) = match end {
            End::Answer {
                output,
                value,
                finish_reason,
            } => (
                RunStatus::Completed,
                Some(output.clone()),
                None,
                finish_reason,
                EventPayload::RequestCompleted {
                    output,
                    value: value.inspect(|v| self.record.value = Some(v.clone())),
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
            End::Unsettled(failure) => (
                RunStatus::Interrupted,
                None,
                Some(ErrorInfo::new(ErrorCode::Store, failure.clone())),
                FinishReason::Interrupted,
                EventPayload::RequestInterrupted {
                    reason: format!("a write to the store failed: {failure}"),
                    usage: self.usage,
                    steps: self.steps,
                    duration_ms,
                },
            ),
        };
        let mut error = error;
        // Non-blocking hooks at the end: recorded, their answers ignored. An interrupted run
        // has not ended: its hooks run when it does, after a resume.
        if status != RunStatus::Interrupted {
            self.end_hooks().await;
        }
        self.record.status = status;
        self.record.output = output.clone();
        self.record.error = error.clone();
        self.record.finish_reason = Some(finish_reason);
        self.record.usage = self.usage;
        self.record.steps = self.steps;
        self.record.ended_at = Some(keel_types::now_rfc3339());
        // The terminal event and the final record, in one write.
        match self.emitter.finish(payload, self.record.clone()).await {
            Ok(seq) => {
                self.record.event_count = seq;
                if !self.embedded && (self.asked || self.asked_before) {
                    let store = self.services.store.as_ref();
                    crate::approval_wait::close_pending(store, &self.record.request_id, status)
                        .await;
                }
            }
            Err(store_error) => {
                tracing::error!(request_id = %self.record.request_id, %store_error, "Could not record the end of a run.");
                error.get_or_insert(ErrorInfo::new(ErrorCode::Store, store_error.to_string()));
                self.record.error = error.clone();
                // Its outcome is unknown: settled from what was stored (`end.rs`); nothing when
                // the run is no longer this process's (taken over, or back in the queue).
                if !matches!(store_error, keel_types::StoreError::Fenced(_)) {
                    let failure = store_error.to_string();
                    let store = self.services.store.as_ref();
                    if end::settle(store, &mut self.record, &failure).await {
                        error.clone_from(&self.record.error);
                    }
                }
            }
        }
        let status = self.record.status;
        let output = output.filter(|_| status != RunStatus::Interrupted);
        let finish_reason = self.record.finish_reason.unwrap_or(finish_reason);
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
            if let Err(store_error) = self.services.store.put_task(&task).await {
                tracing::error!(task_id = %task.task_id, %store_error, "Could not update the task.");
            }
        }
        RunResponse {
            request_id: self.record.request_id,
            status,
            output,
            value: self.record.value,
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
    mut run: Box<AgentRun>,
    cancel: CancellationToken,
    interrupt: CancellationToken,
) -> RunResponse {
    let started = Instant::now();
    run.interrupt = interrupt.clone();
    let opening = match &run.start {
        Start::Opened(_) => None,
        Start::Fresh => Some(EventPayload::RequestStarted {
            input: run.record.input.clone(),
            history: std::mem::take(&mut run.request_history),
            mode: run.mode,
            metadata: (*run.tool_ctx.metadata).clone(),
            params: run.params.clone(),
            output_schema: run.output_schema.clone(),
            session_owner_overridden: None,
        }),
        &Start::Resumed { cut_off_round } => {
            let (rerun, abandoned): (Vec<&PendingCall>, Vec<&PendingCall>) = run
                .pending
                .iter()
                .filter(|p| p.started)
                .partition(|p| run.services.gateway.is_idempotent(&p.call.name));
            Some(EventPayload::RequestResumed {
                reissued_round: cut_off_round,
                rerun_calls: rerun.iter().map(|p| p.call.id.clone()).collect(),
                abandoned_calls: abandoned.iter().map(|p| p.call.id.clone()).collect(),
            })
        }
        Start::Forked { from, at_seq } => Some(EventPayload::RequestForked {
            from_request_id: from.clone(),
            at_seq: *at_seq,
        }),
    };
    let opened = opening.map_or(Ok(0), |opening| run.emitter.emit(opening));
    let end = if let Err(error) = opened {
        End::store(error)
    } else {
        run.propagation.begin_attempt(opened.unwrap_or(0));
        let timeout = run.run_timeout();
        let span = run.propagation.tracing_span();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => End::Cancelled,
            _ = interrupt.cancelled() => End::Interrupted,
            end = tokio::time::timeout(timeout, tracing::Instrument::instrument(run.drive(), span)) => end.unwrap_or_else(|_| End::failed(
                ErrorCode::Timeout,
                format!("the run exceeded its time budget of {}", humantime::format_duration(timeout)),
                FinishReason::Timeout,
            )),
        }
    };
    Box::pin((*run).finish(end, started)).await
}
