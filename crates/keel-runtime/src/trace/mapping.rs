//! Which span each event opens, ends or adds to.

use keel_types::trace::{call_key, seq_key};
use keel_types::{AdapterEvent, Event, EventPayload};
use serde_json::Value;

use super::builder::TraceBuilder;
use super::{SpanKind, SpanStatus, attrs, code_name};

impl TraceBuilder {
    pub(super) fn map(&mut self, event: &Event, at: u64) {
        let seq = event.seq;
        match &event.payload {
            EventPayload::RequestStarted { input, .. } => {
                if self.capture_content
                    && let Some(root) = &mut self.root
                {
                    root.attributes.insert(
                        "gen_ai.input.messages",
                        Value::from(attrs::user_message(input)),
                    );
                }
            }
            EventPayload::RequestForked { .. } => {
                // What precedes is a copy of another run's log: this run's own attempt
                // begins here.
                self.end_attempt(at, SpanStatus::UNSET);
                self.open_root(seq, at, None);
            }
            EventPayload::RequestResumed { .. } => {
                self.end_attempt(at, SpanStatus::error("the process running the run stopped"));
                self.open_root(seq, at, Some(self.first_root));
            }
            EventPayload::WorkflowStarted(started) => {
                if let Some(root) = &mut self.root {
                    root.name = format!("invoke_workflow {}", started.workflow);
                    root.attributes
                        .insert("gen_ai.operation.name", Value::from("invoke_workflow"));
                    root.attributes.insert(
                        "gen_ai.workflow.name",
                        Value::from(started.workflow.as_str()),
                    );
                }
            }
            // A run that is one direct call is that call; a workflow's tool nodes are direct
            // calls in its own log, which their node spans cover.
            EventPayload::DirectStarted {
                tool, arguments, ..
            } if !self.is_workflow() => {
                if let Some(root) = &mut self.root {
                    root.name = format!("execute_tool {tool}");
                    root.attributes = attrs::tool_attributes(tool, "");
                    root.attributes.remove("gen_ai.tool.call.id");
                    if self.capture_content {
                        root.attributes.insert(
                            "gen_ai.tool.call.arguments",
                            Value::from(arguments.to_string()),
                        );
                    }
                }
            }
            EventPayload::DirectCompleted { ok, output, .. } if !self.is_workflow() => {
                if let Some(root) = &mut self.root {
                    if !ok {
                        root.status = SpanStatus::error(attrs::first_line(output));
                    }
                    if self.capture_content {
                        root.attributes
                            .insert("gen_ai.tool.call.result", Value::from(output.as_str()));
                    }
                }
            }
            EventPayload::ModelStarted {
                step,
                attempt,
                model,
                provider,
                params,
            } => {
                self.end_refused_calls();
                let span = self.open(
                    "chat".into(),
                    Some(seq_key("chat", seq)),
                    format!("chat {model}"),
                    SpanKind::Client,
                    None,
                );
                span.attributes = attrs::chat_attributes(*step, *attempt, model, provider, params);
            }
            EventPayload::ModelQueued { wait_ms, .. } => {
                if let Some(span) = self.open.get_mut("chat") {
                    span.attributes
                        .insert("keel.model.queued_ms", Value::from(*wait_ms));
                }
            }
            EventPayload::ModelCompleted {
                stop_reason,
                usage,
                content,
                tool_calls,
                ..
            } => {
                let capture = self.capture_content;
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    attrs::chat_completed(span, *stop_reason, usage);
                    if capture {
                        span.attributes.insert(
                            "gen_ai.output.messages",
                            Value::from(attrs::assistant_message(
                                content,
                                tool_calls,
                                *stop_reason,
                            )),
                        );
                    }
                }
            }
            EventPayload::ModelRetry { error, .. } => {
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    span.attributes
                        .insert("error.type", Value::from(code_name(error.code)));
                    span.status = SpanStatus::error(error.message.clone());
                }
            }
            EventPayload::ModelFallback {
                from, to, reason, ..
            } => {
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    span.attributes
                        .insert("error.type", Value::from(code_name(reason.code)));
                    span.status = SpanStatus::error(reason.message.clone());
                }
                if let Some(root) = &mut self.root {
                    root.attributes.insert(
                        "keel.model.fallback",
                        Value::from(format!("{from} -> {to}")),
                    );
                }
            }
            EventPayload::ContextCompacted {
                step,
                reason,
                tokens_before,
                tokens_after,
                elided,
                summarized,
                summarizer_usage,
                error,
                ..
            } => {
                let attributes = attrs::compaction(
                    *step,
                    reason,
                    *tokens_before,
                    *tokens_after,
                    elided.len(),
                    summarized.is_some(),
                    summarizer_usage.as_ref(),
                );
                let status = error.as_ref().map_or(SpanStatus::UNSET, SpanStatus::error);
                self.whole(
                    "keel.context.compaction".into(),
                    self.last_nanos,
                    None,
                    attributes,
                    status,
                );
            }
            EventPayload::MemoryRecallCompleted {
                namespaces,
                record_ids,
                mode,
                omitted,
                chars,
                ..
            } => {
                let attributes =
                    attrs::recall(namespaces, record_ids.len(), mode, *omitted, *chars);
                self.whole(
                    "keel.memory.recall".into(),
                    self.last_nanos,
                    None,
                    attributes,
                    SpanStatus::UNSET,
                );
            }
            EventPayload::ToolGuard {
                call_id,
                tool,
                decision,
                issues,
                repairs,
                resolved_tool,
                arguments,
                ..
            } => {
                let capture = self.capture_content;
                let Some(span) = self.call(call_id, resolved_tool.as_deref().unwrap_or(tool))
                else {
                    return;
                };
                attrs::guard(span, decision.as_str(), issues.len(), repairs);
                if capture {
                    span.attributes.insert(
                        "gen_ai.tool.call.arguments",
                        Value::from(arguments.as_str()),
                    );
                }
                if decision.as_str() == "blocked" {
                    span.status = SpanStatus::error("the gateway blocked the call");
                    span.attributes.insert("error.type", Value::from("blocked"));
                }
            }
            EventPayload::PolicyDecided {
                call_id,
                tool,
                decision,
                source,
                reason,
            } => {
                let Some(span) = self.call(call_id, tool) else {
                    return;
                };
                span.attributes
                    .insert("keel.policy.decision", Value::from(decision.as_str()));
                span.attributes
                    .insert("keel.policy.rule", Value::from(source.as_str()));
                if let Some(reason) = reason {
                    span.attributes
                        .insert("keel.policy.reason", Value::from(reason.as_str()));
                }
            }
            EventPayload::ToolSandbox {
                call_id,
                tool,
                sandbox,
            } => {
                if let Some(span) = self.call(call_id, tool) {
                    attrs::sandbox(span, sandbox);
                }
            }
            EventPayload::ApprovalRequested { approval } => {
                let parent = self.parent_of_call(approval.call_id.as_deref());
                let key = format!("approval:{}", approval.approval_id);
                let span = self.open(
                    key,
                    None,
                    "keel.approval".into(),
                    SpanKind::Internal,
                    parent,
                );
                span.attributes = attrs::approval_requested(approval);
            }
            EventPayload::ApprovalResolved {
                approval_id,
                status,
                decided_by,
                reason,
            } => {
                let key = format!("approval:{approval_id}");
                let call = self.open.get(&key).and_then(|span| {
                    span.attributes
                        .get("gen_ai.tool.call.id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                // A call waits for its approval: a refused one ends with the decision.
                self.touch_call(call.as_deref());
                if let Some(span) = self.close(&key, at) {
                    span.seqs.push(seq);
                    attrs::approval_resolved(
                        span,
                        status.as_str(),
                        decided_by.as_deref(),
                        reason.as_deref(),
                    );
                }
            }
            EventPayload::HookCompleted {
                hook,
                event: when,
                call_id,
                outcome,
                reason,
                duration_ms,
                ..
            } => {
                let call = call_id.as_deref();
                let attributes = attrs::hook(
                    hook,
                    when.as_str(),
                    Some(outcome),
                    reason.as_deref(),
                    None,
                    call,
                );
                self.hook_span(hook, call, *duration_ms, attributes, SpanStatus::UNSET);
            }
            EventPayload::HookFailed {
                hook,
                event: when,
                call_id,
                error,
                on_error,
                duration_ms,
                ..
            } => {
                let call = call_id.as_deref();
                let attributes = attrs::hook(
                    hook,
                    when.as_str(),
                    None,
                    None,
                    Some(on_error.as_str()),
                    call,
                );
                let status = SpanStatus::error(error.clone());
                self.hook_span(hook, call, *duration_ms, attributes, status);
            }
            EventPayload::Adapter { event: adapter } => self.adapter(adapter, at),
            EventPayload::NodeStarted(node) => {
                let key = node.key.call_key("node", &node.node, node.attempt);
                let span = self.open(
                    call_key(&key),
                    None,
                    format!("keel.workflow.node {}", node.node),
                    SpanKind::Internal,
                    None,
                );
                span.attributes = attrs::node(
                    &node.node,
                    &node.kind,
                    node.key,
                    node.attempt,
                    node.child_request_id.as_ref(),
                );
            }
            EventPayload::NodeCompleted(node) => {
                if let Some(key) = self.open_node(&node.node, node.key)
                    && let Some(span) = self.close(&key, at)
                {
                    span.seqs.push(seq);
                    span.attributes
                        .insert("keel.workflow.node.state", Value::from("completed"));
                }
            }
            EventPayload::NodeFailed(node) => {
                if let Some(key) = self.open_node(&node.node, node.key)
                    && let Some(span) = self.close(&key, at)
                {
                    span.seqs.push(seq);
                    span.attributes
                        .insert("keel.workflow.node.state", Value::from("failed"));
                    span.attributes.insert(
                        "keel.workflow.node.will_retry",
                        Value::from(node.will_retry),
                    );
                    span.status = SpanStatus::error(node.error.clone());
                }
            }
            EventPayload::NodeSkipped(node) => {
                let mut attributes = attrs::node(&node.node, "", node.key, 0, None);
                attributes.remove("keel.workflow.node.kind");
                attributes.remove("keel.workflow.node.attempt");
                attributes.insert("keel.workflow.node.state", Value::from("skipped"));
                attributes.insert(
                    "keel.workflow.node.skip_reason",
                    Value::from(node.reason.as_str()),
                );
                self.whole(
                    format!("keel.workflow.node {}", node.node),
                    at,
                    None,
                    attributes,
                    SpanStatus::UNSET,
                );
            }
            EventPayload::RequestCompleted {
                output,
                usage,
                steps,
                finish_reason,
                ..
            } => {
                let capture = self.capture_content;
                self.end_run(
                    usage,
                    *steps,
                    finish_reason.as_str(),
                    SpanStatus::UNSET,
                    capture.then_some(output.as_str()),
                );
            }
            EventPayload::RequestFailed {
                error,
                usage,
                steps,
                finish_reason,
                ..
            } => {
                let mut status = SpanStatus::error(error.message.clone());
                if status.message.as_deref() == Some("") {
                    status.message = Some(code_name(error.code));
                }
                if let Some(root) = &mut self.root {
                    root.attributes
                        .insert("error.type", Value::from(code_name(error.code)));
                }
                self.end_run(usage, *steps, finish_reason.as_str(), status, None);
            }
            EventPayload::RequestCancelled {
                reason,
                usage,
                steps,
                ..
            } => self.end_stopped("cancelled", reason, usage, *steps),
            EventPayload::RequestInterrupted {
                reason,
                usage,
                steps,
                ..
            } => self.end_stopped("interrupted", reason, usage, *steps),
            _ => {}
        }
    }

    fn adapter(&mut self, adapter: &AdapterEvent, at: u64) {
        match adapter {
            AdapterEvent::ToolStart { call_id, tool, .. } => {
                if let Some(span) = self.call(call_id, tool) {
                    span.attributes
                        .insert("keel.tool.started", Value::from(true));
                }
            }
            AdapterEvent::ToolResult {
                call_id,
                tool,
                ok,
                output,
                error,
                ..
            } => {
                let capture = self.capture_content;
                let _ = self.call(call_id, tool);
                if let Some(span) = self.close(&call_key(call_id), at) {
                    if !ok {
                        span.status = SpanStatus::error(attrs::first_line(
                            error.as_deref().unwrap_or(output),
                        ));
                        span.attributes.insert_absent("error.type", "tool_error");
                    }
                    if capture {
                        span.attributes
                            .insert("gen_ai.tool.call.result", Value::from(output.as_str()));
                    }
                }
            }
            AdapterEvent::Handoff {
                call_id,
                agent,
                child_request_id,
                ..
            } => {
                if let Some(span) = self.call(call_id, "task") {
                    span.attributes
                        .insert("keel.child.agent", Value::from(agent.as_str()));
                    span.attributes.insert(
                        "keel.child.request_id",
                        Value::from(child_request_id.0.as_str()),
                    );
                }
            }
            AdapterEvent::ToolProgress { call_id, tool, .. } => {
                let _ = self.call(call_id, tool);
            }
            _ => {}
        }
    }

    /// The key of the open span of a node's current attempt.
    fn open_node(&self, node: &str, key: keel_types::NodeKey) -> Option<String> {
        let prefix = call_key(&key.call_key("node", node, 0));
        let stem = prefix.trim_end_matches("@0");
        self.open
            .keys()
            .filter(|k| {
                k.strip_prefix(stem)
                    .is_some_and(|rest| rest.starts_with('@'))
            })
            .max()
            .cloned()
    }

    /// Whether the run is a workflow's (its root span says so).
    fn is_workflow(&self) -> bool {
        self.root.as_ref().is_some_and(|root| {
            root.attributes.get("gen_ai.operation.name") == Some(&Value::from("invoke_workflow"))
        })
    }

    /// The run was cancelled or interrupted (`how`), for `reason`.
    fn end_stopped(
        &mut self,
        how: &'static str,
        reason: &str,
        usage: &keel_types::Usage,
        steps: u32,
    ) {
        if let Some(root) = &mut self.root {
            root.attributes.insert("error.type", Value::from(how));
        }
        let status = SpanStatus::error(format!("{how}: {reason}"));
        self.end_run(usage, steps, how, status, None);
    }

    /// A hook's span: it ran for `duration_ms` up to now, under its call (or the run).
    fn hook_span(
        &mut self,
        hook: &str,
        call: Option<&str>,
        duration_ms: u64,
        attributes: super::Attributes,
        status: SpanStatus,
    ) {
        self.touch_call(call);
        let parent = self.parent_of_call(call);
        let start = self.now.0.saturating_sub(duration_ms * 1_000_000);
        self.whole(
            format!("keel.hook {hook}"),
            start,
            parent,
            attributes,
            status,
        );
    }
}
