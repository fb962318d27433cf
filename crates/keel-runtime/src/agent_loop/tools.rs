//! Tool calls inside a run, in the order a call takes them:
//!
//! 1. **guard** — the gateway's verdict on each call (inventory, schema, repair, semantic
//!    checks), recorded as `runtime.tool.guard` ([`AgentRun::guard_call`]);
//! 2. **govern** — for each accepted call in call order: policy (allow | ask | deny),
//!    `PreToolUse` hooks (allow, deny, ask, stop, or rewrite — a rewrite is guarded again),
//!    then a human when policy or a hook asked ([`AgentRun::govern`]); a refused call stays in
//!    the answer as a blocked verdict whose result is the refusal. A task's run re-checks
//!    policy but takes its hooks' answer at create, unless it says `doubleCheckOnRun`;
//! 3. **execute** — the allowed calls run concurrently (bounded) with a write-ahead start
//!    event, large outputs become artifacts, results are recorded in call order
//!    ([`AgentRun::execute`]);
//! 4. **after** — `PostToolUse` hooks, whose AI-facing answers are ignored but whose stop ends
//!    the run.
//!
//! Also here: the calls an interrupted process left pending, and direct calls (tasks,
//! `keel tools call`), which take the same path.

use keel_types::governance::refusal_text;
use std::time::Instant;

use futures_util::StreamExt;
use keel_tools::gateway::Guarded;
use keel_tools::hooks::HookInput;
use keel_types::{
    AdapterEvent, ErrorCode, EventPayload, FinishReason, HookEvent, Message, NATIVE_ADAPTER,
    PolicyDecision, ProgressSink, StoreError, ToolCall, ToolContext, ToolError, ToolOutput,
    ToolProgress,
};
use serde_json::Value;

use super::{AgentRun, End};
use crate::governance::{Governance, HookAnswer, HookRound, Ruling};
use crate::millis;

/// More than the truncation note of a large output ever takes: the preview is copied out
/// with this much room left, then cut to fit the note.
const NOTE_ROOM: usize = 256;

impl AgentRun {
    /// Guards every call, governs the accepted ones, runs the allowed ones, and returns the
    /// tool messages in call order.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
    ) -> Result<Vec<Message>, StoreError> {
        let results = self.run_tools_reporting(calls).await?;
        Ok(results.into_iter().map(|(message, _)| message).collect())
    }

    /// [`Self::run_tools`], saying of each call whether it succeeded (a refused, blocked or
    /// failed call did not).
    pub(super) async fn run_tools_reporting(
        &mut self,
        calls: &[ToolCall],
    ) -> Result<Vec<(Message, bool)>, StoreError> {
        let mut verdicts = Vec::with_capacity(calls.len());
        for call in calls {
            verdicts.push(self.guard_call(call).await?);
        }
        for verdict in &mut verdicts {
            self.govern(verdict).await?;
        }
        self.execute_governed(verdicts).await
    }

    /// Steps 3 and 4 for governed calls: each call's message and whether it succeeded.
    async fn execute_governed(
        &mut self,
        verdicts: Vec<Guarded>,
    ) -> Result<Vec<(Message, bool)>, StoreError> {
        let outcomes = self.execute(&verdicts).await;
        self.count_delegated();
        let mut messages = Vec::with_capacity(outcomes.len());
        for (outcome, verdict) in outcomes.into_iter().zip(&verdicts) {
            let (message, succeeded) = outcome?;
            let ok = succeeded.is_some();
            if let Some(tool) = succeeded {
                self.succeeded.insert(tool);
            }
            if verdict.is_allowed()
                && let Some(reason) = self.after_call(verdict, &message.content).await?
            {
                self.stop.get_or_insert(reason);
            }
            messages.push((message, ok));
        }
        Ok(messages)
    }

    /// Step 1: the gateway's verdict on one call, recorded as `runtime.tool.guard`.
    async fn guard_call(&self, call: &ToolCall) -> Result<Guarded, StoreError> {
        let workspace = &self.services.workspace;
        let agent = &self.record.agent;
        let mode_of = |tool: &str| workspace.gateway_mode(agent, tool);
        let verdict = self
            .services
            .gateway
            .guard(&self.tool_ctx, &self.agent.tools, call, &mode_of)
            .await;
        let repaired = verdict.decision() == keel_types::GuardDecision::Repaired;
        self.emitter.emit(EventPayload::ToolGuard {
            call_id: call.id.clone(),
            // A blocked call's text is quoted within bounds (prefix, size, SHA-256).
            tool: match verdict.is_allowed() {
                true => call.name.clone(),
                false => keel_tools::gateway::quote(&call.name).into_owned(),
            },
            decision: verdict.decision(),
            arguments: match verdict.is_allowed() {
                true => call.arguments.clone(),
                false => keel_tools::gateway::quote(&call.arguments).into_owned(),
            },
            issues: verdict.issues().to_vec(),
            repairs: verdict.repairs().to_vec(),
            resolved_tool: (verdict.tool() != call.name).then(|| verdict.tool().to_owned()),
            repaired_arguments: repaired.then(|| verdict.arguments().cloned()).flatten(),
        })?;
        Ok(verdict)
    }

    /// Step 2: policy, `PreToolUse` hooks and a human for one call the gateway accepted, as
    /// [`Governance::rule`](crate::governance::Governance::rule) rules; this records what
    /// was decided and asks the human. Refuses the verdict when any of them says no; a hook's
    /// stop also ends the run.
    pub(super) async fn govern(&mut self, verdict: &mut Guarded) -> Result<(), StoreError> {
        if let Some(reason) = &self.stop {
            verdict.refuse(stopped(reason));
            return Ok(());
        }
        let Some(arguments) = verdict.arguments().cloned() else {
            return Ok(());
        };
        let tool = verdict.tool().to_owned();
        let call_id = verdict.call_id().to_owned();

        let policy = self.services.governance.decide_call(
            &self.services.gateway,
            &self.record.agent,
            &tool,
            &arguments,
            self.mode,
            &self.narrowing.iter().collect::<Vec<_>>(),
        );
        if policy.decision != PolicyDecision::Allow {
            self.emitter.emit(EventPayload::PolicyDecided {
                call_id: call_id.clone(),
                tool: tool.clone(),
                decision: policy.decision,
                source: policy.source.clone(),
                reason: policy.reason.clone(),
            })?;
        }
        let mut ruling = Governance::rule(&policy, HookAnswer::NotAsked);
        if ruling == Ruling::AskHooks {
            // A task's run asks its `PreToolUse` hooks again only with `doubleCheckOnRun`;
            // their decision at create stands otherwise.
            ruling = match self.direct.as_ref().and_then(|d| d.task.as_ref()) {
                Some(task) if !task.double_check_on_run => Governance::rule(
                    &policy,
                    HookAnswer::AtCreate {
                        decision: task.hook_decision,
                        reason: task.reason.as_deref(),
                    },
                ),
                _ => {
                    let round = self.pre_tool_hooks(&tool, &arguments, &call_id).await?;
                    Governance::rule(&policy, HookAnswer::Round(&round))
                }
            };
        }

        let (ask, rewrite) = match ruling {
            // The hooks were asked above, so this cannot be; were it, the call does not run.
            Ruling::AskHooks => {
                verdict.refuse(refusal_text("not governed", None));
                return Ok(());
            }
            Ruling::Refuse { refusal, reason } => {
                verdict.refuse(refusal_text(&refusal.what(), reason.as_deref()));
                return Ok(());
            }
            Ruling::Stop { reason } => {
                verdict.refuse(stopped(&reason));
                self.stop = Some(reason);
                return Ok(());
            }
            Ruling::Ask {
                asked_by,
                reason,
                rewrite,
            } => (Some((asked_by, reason)), rewrite),
            Ruling::Proceed { rewrite } => (None, rewrite),
        };

        if let Some(updated) = rewrite
            && !self.guard_rewrite(verdict, &arguments, updated).await?
        {
            return Ok(());
        }

        // A human.
        if let Some((asked_by, reason)) = ask {
            let arguments = verdict.arguments().cloned().unwrap_or(Value::Null);
            let decision = self
                .ask_human(&call_id, &tool, &arguments, &asked_by, reason)
                .await?;
            if !decision.approved {
                verdict.refuse(refusal_text(
                    keel_types::governance::DENIED_BY_HUMAN,
                    decision.reason.as_deref(),
                ));
            }
        }
        Ok(())
    }

    /// A hook's rewrite passes the gateway again (recorded as another guard event); whether
    /// the rewritten call is still allowed.
    async fn guard_rewrite(
        &self,
        verdict: &mut Guarded,
        arguments: &Value,
        updated: serde_json::Map<String, Value>,
    ) -> Result<bool, StoreError> {
        let mut rewritten = arguments.clone();
        if let Value::Object(map) = &mut rewritten {
            map.extend(updated);
        }
        let call = ToolCall {
            id: verdict.call_id().to_owned(),
            name: verdict.tool().to_owned(),
            arguments: rewritten.to_string(),
        };
        let recheck = self.guard_call(&call).await?;
        verdict.adopt_recheck(recheck);
        Ok(verdict.is_allowed())
    }

    /// The `PreToolUse` hooks of step 2, each recorded; their round for the ruling.
    async fn pre_tool_hooks(
        &self,
        tool: &str,
        arguments: &Value,
        call_id: &str,
    ) -> Result<HookRound, StoreError> {
        self.run_hooks(HookEvent::PreToolUse, Some(tool), || {
            let mut input = HookInput::new(HookEvent::PreToolUse, &self.services.workspace.root);
            input.tool_name = Some(tool.to_owned());
            input.tool_input = Some(arguments.clone());
            input.tool_use_id = Some(call_id.to_owned());
            input
        })
        .await
    }

    /// Step 3: runs the allowed calls concurrently (bounded); the outcomes in call order.
    async fn execute(
        &self,
        verdicts: &[Guarded],
    ) -> Vec<Result<(Message, Option<String>), StoreError>> {
        let parallel = self
            .services
            .workspace
            .runtime
            .limits
            .max_parallel_tools
            .max(1) as usize;
        // Futures are built up front (not in a stream closure) so the spawned run stays `Send`.
        let calls: Vec<_> = verdicts
            .iter()
            .map(|verdict| self.run_tool(verdict))
            .collect();
        futures_util::stream::iter(calls)
            .buffered(parallel)
            .collect()
            .await
    }

    /// Runs one governed call. Returns the tool message and, on success, the tool's name.
    async fn run_tool(&self, verdict: &Guarded) -> Result<(Message, Option<String>), StoreError> {
        let Some(arguments) = verdict
            .arguments()
            .cloned()
            .filter(|_| verdict.is_allowed())
        else {
            return Ok((
                Message::tool_error(verdict.call_id(), verdict.blocked_message()),
                None,
            ));
        };
        let gateway = &self.services.gateway;
        // Write-ahead: the start is durable before the tool can have effects. A read-only
        // tool has none (and is re-run when a resumed run finds it unfinished), so it does
        // not wait for the store.
        let start = EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                adapter: NATIVE_ADAPTER.to_owned(),
                call_id: verdict.call_id().to_owned(),
                tool: verdict.tool().to_owned(),
                arguments,
            },
        };
        let start_seq = match gateway.is_read_only(verdict.tool()) {
            true => self.emitter.emit(start)?,
            false => self.emitter.emit_durable(start).await?,
        };
        let ctx = ToolContext {
            call_id: Some(verdict.call_id().to_owned()),
            call_seq: Some(start_seq),
            traceparent: Some(self.propagation.of_call(verdict.call_id())),
            ..self.tool_ctx.clone()
        };
        // The OS sandbox the call's process starts in, as this machine enforces it.
        if let Some(sandbox) = gateway.tool(verdict.tool()).and_then(|t| t.sandbox(&ctx)) {
            self.emitter.emit(EventPayload::ToolSandbox {
                call_id: verdict.call_id().to_owned(),
                tool: verdict.tool().to_owned(),
                sandbox,
            })?;
        }
        let started = Instant::now();
        let result = if verdict.tool() == keel_workspace::TASK_TOOL {
            self.run_task(verdict).await?
        } else if gateway.reports_progress(verdict.tool()) {
            self.execute_with_progress(verdict, ctx).await?
        } else {
            gateway.execute(&ctx, verdict).await
        };
        let duration_ms = millis(started.elapsed());
        // What happened to the tool's source during the call (an MCP server that crashed and
        // is restarting) belongs to this run, before the call's result.
        self.source_lifecycle(verdict.tool())?;
        let (error, mut output) = match result {
            Ok(output) => (None, self.settle_output(verdict, output).await?),
            Err(error) => {
                let error = error.to_string();
                let output = serde_json::json!({ "error": error }).to_string();
                (Some(error), output)
            }
        };
        let ok = error.is_none();
        // The model sees what the gateway changed, so it can send it right next time (a
        // workflow node reads the output itself; its guard event records the repairs).
        if let Some(note) = verdict.repair_note().filter(|_| !self.embedded) {
            output.push_str("\n[");
            output.push_str(&note);
            output.push(']');
        }
        self.emitter.emit(EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: NATIVE_ADAPTER.to_owned(),
                call_id: verdict.call_id().to_owned(),
                tool: verdict.tool().to_owned(),
                ok,
                output: output.clone(),
                error,
                duration_ms,
            },
        })?;
        let succeeded = ok.then(|| verdict.tool().to_owned());
        let message = match ok {
            true => Message::tool_result(verdict.call_id(), output),
            false => Message::tool_error(verdict.call_id(), output),
        };
        Ok((message, succeeded))
    }

    /// Records what happened to the source of `tool` (an MCP server) since it last reported,
    /// as `runtime.mcp.lifecycle` events of this run.
    fn source_lifecycle(&self, tool: &str) -> Result<(), StoreError> {
        let sources = self.services.gateway.sources();
        for source in sources.iter().filter(|s| tool.starts_with(s.prefix())) {
            for event in source.take_lifecycle() {
                self.emitter.emit(EventPayload::McpLifecycle {
                    server: event.source,
                    lifecycle: event.kind,
                    at: event.at,
                    detail: event.detail,
                })?;
            }
        }
        Ok(())
    }

    /// Runs a call of a tool that reports progress, recording each report as
    /// `agent.tool.progress` while the call runs.
    async fn execute_with_progress(
        &self,
        verdict: &Guarded,
        ctx: ToolContext,
    ) -> Result<Result<ToolOutput, ToolError>, StoreError> {
        let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel::<ToolProgress>();
        let ctx = ToolContext {
            progress: Some(ProgressSink::new(move |report| {
                let _ = sender.send(report);
            })),
            ..ctx
        };
        let call = self.services.gateway.execute(&ctx, verdict);
        tokio::pin!(call);
        let record = |report: ToolProgress| {
            self.emitter.emit(EventPayload::Adapter {
                event: AdapterEvent::ToolProgress {
                    adapter: NATIVE_ADAPTER.to_owned(),
                    call_id: verdict.call_id().to_owned(),
                    tool: verdict.tool().to_owned(),
                    progress: report.progress,
                    total: report.total,
                    message: report.message,
                },
            })
        };
        loop {
            tokio::select! {
                Some(report) = reports.recv() => {
                    record(report)?;
                }
                result = &mut call => {
                    // What the tool reported before its result is recorded before it.
                    while let Ok(report) = reports.try_recv() {
                        record(report)?;
                    }
                    return Ok(result);
                }
            }
        }
    }

    /// What the model receives for a tool's output: the output itself when it fits the
    /// limit; otherwise the whole output is stored as an artifact and the model gets a
    /// preview and the artifact's URI. Binary attachments (an MCP tool's images) are always
    /// stored as artifacts, each named in a line of its own.
    async fn settle_output(
        &self,
        verdict: &Guarded,
        output: ToolOutput,
    ) -> Result<String, StoreError> {
        let ToolOutput {
            mut content,
            attachments,
            events,
        } = output;
        for mut event in events {
            if let EventPayload::SkillCandidateCreated { call_id, .. }
            | EventPayload::MemoryCandidateSubmitted { call_id, .. } = &mut event
            {
                call_id.get_or_insert_with(|| verdict.call_id().to_owned());
            }
            self.emitter.emit(event)?;
        }
        for attachment in attachments {
            let artifact = self
                .services
                .artifacts
                .put(
                    &self.record.request_id,
                    &format!(
                        "{} {} ({})",
                        verdict.tool(),
                        attachment.name,
                        verdict.call_id()
                    ),
                    &attachment.media_type,
                    &attachment.data,
                )
                .await?;
            content.push_str(&format!(
                "\n[{}: {}, {} bytes, stored as {}]",
                attachment.name, attachment.media_type, artifact.bytes, artifact.uri
            ));
            self.emitter.emit(EventPayload::ArtifactCreated {
                artifact,
                call_id: Some(verdict.call_id().to_owned()),
            })?;
        }
        let limit = self.tool_ctx.max_output_bytes;
        if content.len() <= limit {
            return Ok(content);
        }
        // The preview is copied out first; the output itself is handed to the artifact store
        // (no copy of it is made).
        let total = content.len();
        let note_room = NOTE_ROOM.min(limit);
        let mut cut = limit.saturating_sub(note_room);
        while !content.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut preview = content[..cut].to_owned();
        let artifact = self
            .services
            .artifacts
            .put_owned(
                &self.record.request_id,
                &format!("{} output ({})", verdict.tool(), verdict.call_id()),
                "text/plain",
                content.into_bytes(),
            )
            .await?;
        let note = format!(
            "\n[output truncated: {total} bytes in all; the whole output is stored as {}]",
            artifact.uri
        );
        // The note's length is known only now; a preview that would overflow the limit is
        // cut further.
        let mut cut = preview.len().min(limit.saturating_sub(note.len()));
        while !preview.is_char_boundary(cut) {
            cut -= 1;
        }
        preview.truncate(cut);
        preview.push_str(&note);
        self.emitter.emit(EventPayload::ArtifactCreated {
            artifact,
            call_id: Some(verdict.call_id().to_owned()),
        })?;
        Ok(preview)
    }

    /// Step 4: `PostToolUse` hooks after a call. Their AI-facing answers are ignored; a stop
    /// (or a failure with `onError: fail-run`) is returned and ends the run.
    async fn after_call(
        &self,
        verdict: &Guarded,
        output: &str,
    ) -> Result<Option<String>, StoreError> {
        let round = self
            .run_hooks(HookEvent::PostToolUse, Some(verdict.tool()), || {
                let mut input =
                    HookInput::new(HookEvent::PostToolUse, &self.services.workspace.root);
                input.tool_name = Some(verdict.tool().to_owned());
                input.tool_input = Some(verdict.arguments().cloned().unwrap_or(Value::Null));
                input.tool_use_id = Some(verdict.call_id().to_owned());
                input.tool_response = Some(
                    serde_json::from_str(output)
                        .unwrap_or_else(|_| Value::String(output.to_owned())),
                );
                input
            })
            .await?;
        Ok(round.fail.or(round.combined.stop))
    }

    /// A direct tool call: the same path as a model's call, with the direct events around it.
    pub(super) async fn run_direct(&mut self, call: ToolCall) -> Result<End, StoreError> {
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
        let verdict = self.guard_call(&call).await?;
        let tool = verdict.tool().to_owned();
        let guard_blocked = !verdict.is_allowed();
        let mut verdict = verdict;
        self.govern(&mut verdict).await?;
        let denied = !guard_blocked && !verdict.is_allowed();
        let mut results = self.execute_governed(vec![verdict]).await?;
        let output = results.pop().map(|(m, _)| m.content).unwrap_or_default();
        let ok = !guard_blocked && self.succeeded.contains(&tool);
        self.emitter.emit(EventPayload::DirectCompleted {
            task_id,
            tool,
            ok,
            output: output.clone(),
            duration_ms: millis(started.elapsed()),
        })?;
        // A hook that stopped the run (or failed with `onError: fail-run`) ends it as in a
        // model's run.
        if let Some(reason) = self.stop.take() {
            return Ok(End::failed(
                ErrorCode::HookStopped,
                reason,
                FinishReason::Stopped,
            ));
        }
        // Each way a call can fail has its own finish reason (`docs/events.md`).
        Ok(match (ok, guard_blocked, denied) {
            (true, _, _) => End::Answer {
                output,
                value: None,
                finish_reason: FinishReason::Completed,
            },
            (false, true, _) => {
                End::failed(ErrorCode::ToolBlocked, output, FinishReason::ToolBlocked)
            }
            (false, false, true) => {
                End::failed(ErrorCode::ToolBlocked, output, FinishReason::ToolDenied)
            }
            (false, false, false) => {
                End::failed(ErrorCode::ToolFailed, output, FinishReason::ToolFailed)
            }
        })
    }

    /// Settles the calls an interrupted process left without a result: calls that never
    /// started, and started calls of idempotent tools, run (again); the others are reported
    /// to the model as having an unknown outcome.
    pub(super) async fn run_pending(&mut self) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            return Ok(());
        }
        let mut rerun = Vec::new();
        let mut results: Vec<(String, Message)> = Vec::new();
        for item in &pending {
            if !item.started || self.services.gateway.is_idempotent(&item.call.name) {
                rerun.push(item.call.clone());
                continue;
            }
            let error = "this call was interrupted (the process running it stopped); its outcome is unknown and it was not run again because the tool is not marked idempotent";
            let output = serde_json::json!({ "error": error }).to_string();
            self.emitter.emit(EventPayload::Adapter {
                event: AdapterEvent::ToolResult {
                    adapter: NATIVE_ADAPTER.to_owned(),
                    call_id: item.call.id.clone(),
                    tool: item.call.name.clone(),
                    ok: false,
                    output: output.clone(),
                    error: Some(error.to_owned()),
                    duration_ms: 0,
                },
            })?;
            results.push((
                item.call.id.clone(),
                Message::tool_error(&item.call.id, output),
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
}

/// The tool result of a call not run because a hook stopped the run.
fn stopped(reason: &str) -> String {
    serde_json::json!({ "error": "the run was stopped by a hook", "reason": reason }).to_string()
}
