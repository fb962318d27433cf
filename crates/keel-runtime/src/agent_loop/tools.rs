//! Tool calls inside a run: the gateway's verdicts, governance (policy, hooks, approval),
//! bounded concurrent execution with results in call order, large outputs as artifacts, the
//! calls an interrupted process left pending, and direct calls (tasks, `keel tools call`).

use std::time::Instant;

use futures_util::StreamExt;
use keel_tools::gateway::Guarded;
use keel_types::{
    AdapterEvent, ErrorCode, EventPayload, FinishReason, GuardDecision, Message, StoreError,
    ToolCall,
};
use serde_json::Value;

use super::{AgentRun, End, millis, stopped};
use crate::governance::Gate;

impl AgentRun {
    /// A direct tool call: the gateway's checks, execution, and the direct events around it.
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

    /// Guards every call, runs the allowed ones concurrently (bounded), and returns the tool
    /// messages in call order.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
    ) -> Result<Vec<Message>, StoreError> {
        let guarded = self.guard_calls(calls).await?;
        self.execute_guarded(&guarded).await
    }

    /// The gateway's verdict on each call, each recorded as `runtime.tool.guard`.
    pub(super) async fn guard_calls(&self, calls: &[ToolCall]) -> Result<Vec<Guarded>, StoreError> {
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
    pub(super) async fn govern_calls(
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
    pub(super) async fn execute_guarded(
        &mut self,
        guarded: &[Guarded],
    ) -> Result<Vec<Message>, StoreError> {
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
    pub(super) async fn run_tool(
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
        // Write-ahead: the start is durable before the tool can have effects. A read-only
        // tool has none (and is re-run when a resumed run finds it unfinished), so it does
        // not wait for the store.
        let start = EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                call_id: verdict.call_id.clone(),
                tool: verdict.tool.clone(),
                arguments,
            },
        };
        if self.gateway.is_read_only(&verdict.tool) {
            self.emitter.emit(start)?;
        } else {
            self.emitter.emit_durable(start).await?;
        }
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
    pub(super) async fn settle_output(
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
}
