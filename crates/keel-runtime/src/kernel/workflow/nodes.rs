//! Running one node: the attempts a node gets (timeout, retries, events), and what each kind
//! does — an agent, a tool call or a nested workflow as a child run, a durable approval, a
//! map over items, a join; and the gates of spec-driven phases.

use std::time::Instant;

use futures_util::StreamExt;
use keel_types::{
    ApprovalRecord, ApprovalStatus, ErrorCode, EventPayload, NodeCompleted, NodeFailed, NodeKey,
    NodeStarted, RequestId, RunLinks, RunRecord, RunStatus, ToolCall,
};
use keel_workspace::{NodeKind, NodeSpec, OnDeny, template};
use serde_json::{Value, json};

use super::engine::{Engine, Failure};
use crate::RuntimeError;
use crate::approval_wait::Earlier;
use crate::kernel::{Kernel, Origin, RequestOptions};
use crate::subagents::{CancelChild, Child, ChildRequest};

/// Which child run of a workflow run a node's attempt is, and whether it may have been
/// started before (the workflow was resumed at that attempt).
pub(super) struct ChildKey<'a> {
    parent: &'a RunRecord,
    call: &'a str,
    depth: u32,
    resumed: bool,
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

impl Engine {
    /// Runs node `index` (its recorded output when a resumed run has one).
    pub(super) async fn run_node(
        &self,
        index: usize,
        key: NodeKey,
        context: Value,
        upstream: Value,
    ) -> Result<Value, Failure> {
        let node = &self.spec.nodes[index];
        if let Some(output) = self.recorded.completed.get(&(node.id.clone(), key)) {
            return Ok(output.clone());
        }
        match node.kind {
            NodeKind::Join => {
                self.started(&node.id, node.kind, key, 1, upstream.clone(), None)?;
                self.completed(&node.id, key, upstream.clone(), Instant::now())?;
                Ok(upstream)
            }
            NodeKind::Map => self.map(node, key, context).await,
            _ => self.attempts(node, &node.id, key, &context).await,
        }
    }

    /// Whether a process before this one started this attempt of node `id`.
    pub(super) fn started_before(&self, id: &str, key: NodeKey, attempt: u32) -> bool {
        self.recorded.attempts.get(&(id.to_owned(), key)) == Some(&attempt)
    }

    fn child_key<'a>(
        &self,
        parent: &'a RunRecord,
        call: &'a str,
        id: &str,
        key: NodeKey,
        attempt: u32,
    ) -> ChildKey<'a> {
        ChildKey {
            parent,
            call,
            depth: self.depth + 1,
            resumed: self.started_before(id, key, attempt),
        }
    }

    fn started(
        &self,
        id: &str,
        kind: NodeKind,
        key: NodeKey,
        attempt: u32,
        input: Value,
        child: Option<RequestId>,
    ) -> Result<(), Failure> {
        // A resumed run that had started this attempt says so once.
        if self.started_before(id, key, attempt) {
            return Ok(());
        }
        self.emitter
            .emit(EventPayload::NodeStarted(NodeStarted {
                node: id.to_owned(),
                kind: kind.as_str().to_owned(),
                key,
                attempt,
                input,
                child_request_id: child,
            }))
            .map(drop)
            .map_err(Failure::store)
    }

    fn completed(
        &self,
        id: &str,
        key: NodeKey,
        output: Value,
        since: Instant,
    ) -> Result<(), Failure> {
        let duration_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.emitter
            .emit(EventPayload::NodeCompleted(NodeCompleted {
                node: id.to_owned(),
                key,
                output,
                duration_ms,
            }))
            .map(drop)
            .map_err(Failure::store)
    }

    /// A node's attempts: each within its timeout; a failure is retried while `retry` allows.
    async fn attempts(
        &self,
        node: &NodeSpec,
        id: &str,
        key: NodeKey,
        context: &Value,
    ) -> Result<Value, Failure> {
        let runtime = &self.kernel.workspace().runtime;
        let max = node.retry.as_ref().map_or(1, |r| r.max_attempts.max(1));
        let backoff = node.retry.as_ref().and_then(|r| r.backoff).map(|d| d.0);
        let timeout = node.timeout.map_or(runtime.limits.run_timeout.0, |t| t.0);
        let first = self
            .recorded
            .attempts
            .get(&(id.to_owned(), key))
            .copied()
            .unwrap_or(1);
        let mut attempt = first;
        loop {
            let since = Instant::now();
            let result =
                match tokio::time::timeout(timeout, self.attempt(node, id, key, attempt, context))
                    .await
                {
                    Ok(result) => result,
                    Err(_) => Err(Failure::failed(format!(
                        "the attempt took longer than its timeout of {}",
                        humantime::format_duration(timeout)
                    ))),
                };
            let failure = match result {
                Ok(output) => {
                    self.completed(id, key, output.clone(), since)?;
                    return Ok(output);
                }
                Err(failure) => failure,
            };
            let will_retry = attempt < max && !failure.is_final();
            self.emitter
                .emit(EventPayload::NodeFailed(NodeFailed {
                    node: id.to_owned(),
                    key,
                    attempt,
                    error: failure.message.clone(),
                    will_retry,
                }))
                .map_err(Failure::store)?;
            if !will_retry {
                return Err(failure);
            }
            if let Some(backoff) = backoff {
                tokio::time::sleep(backoff).await;
            }
            attempt += 1;
        }
    }

    /// One attempt of an agent, tool, workflow or approval node.
    async fn attempt(
        &self,
        node: &NodeSpec,
        id: &str,
        key: NodeKey,
        attempt: u32,
        context: &Value,
    ) -> Result<Value, Failure> {
        let render = |value: &Value| {
            template::render(value, context).map_err(|e| Failure::failed(format!("template: {e}")))
        };
        let call = key.call_key("node", id, attempt);
        let record = self.record();
        let default_input = || self.input.clone();
        match node.kind {
            NodeKind::Agent => {
                let input = node
                    .input
                    .as_ref()
                    .map_or_else(|| Ok(default_input()), render)?;
                let agent = node.agent.clone().unwrap_or_default();
                let child = self
                    .kernel
                    .start_child(ChildRequest {
                        parent: record.clone(),
                        call,
                        agent,
                        prompt: text_of(&input),
                        narrowing: Vec::new(),
                        depth: self.depth + 1,
                        metadata: self.metadata.clone(),
                        resumed: self.started_before(id, key, attempt),
                    })
                    .await
                    .map_err(runtime_failure)?;
                let record = self
                    .follow(id, node.kind, key, attempt, input, child)
                    .await?;
                Ok(answer(record))
            }
            NodeKind::Tool => {
                let arguments = node
                    .arguments
                    .as_ref()
                    .map_or_else(|| Ok(json!({})), render)?;
                if !arguments.is_object() {
                    return Err(Failure::failed(format!(
                        "the arguments must render to an object, not {arguments}"
                    )));
                }
                let tool = node.tool.clone().unwrap_or_default();
                let text = self
                    .tool_call(id, key, attempt, &call, &tool, arguments)
                    .await?;
                let output = serde_json::from_str(&text).unwrap_or(Value::String(text));
                if let Some(mismatch) = node
                    .output
                    .as_ref()
                    .and_then(|o| crate::output::mismatch(&o.schema, &output))
                {
                    return Err(Failure::failed(format!(
                        "the tool's output does not match the node's `output.schema`{mismatch}"
                    )));
                }
                Ok(output)
            }
            NodeKind::Workflow => {
                let input = node
                    .input
                    .as_ref()
                    .map_or_else(|| Ok(default_input()), render)?;
                let workflow = node.workflow.clone().unwrap_or_default();
                let child = self
                    .kernel
                    .nested_workflow(
                        self.child_key(&record, &call, id, key, attempt),
                        &workflow,
                        &input,
                    )
                    .await
                    .map_err(runtime_failure)?;
                let record = self
                    .follow(id, node.kind, key, attempt, input, child)
                    .await?;
                Ok(answer(record))
            }
            NodeKind::Approval => {
                let message = node
                    .message
                    .as_ref()
                    .map(|m| render(&Value::String(m.clone())))
                    .transpose()?
                    .map(|m| text_of(&m))
                    .unwrap_or_default();
                self.started(
                    id,
                    node.kind,
                    key,
                    attempt,
                    Value::String(message.clone()),
                    None,
                )?;
                let asked_by = format!("Workflow/{} node {id}", self.name);
                let decided = self
                    .approval(&key.call_key("approval", id, 1), id, &message, &asked_by)
                    .await?;
                let approved = decided.status == ApprovalStatus::Approved;
                if !approved && node.on_deny == OnDeny::Fail {
                    return Err(Failure {
                        node: None,
                        code: ErrorCode::Denied,
                        message: format!(
                            "{} by {}{}",
                            decided.status.as_str(),
                            decided.decided_by.as_deref().unwrap_or("nobody"),
                            decided
                                .decision_reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default()
                        ),
                    });
                }
                let mut output = json!({"approved": approved});
                if let Some(by) = decided.decided_by {
                    output["decidedBy"] = Value::String(by);
                }
                if let Some(reason) = decided.decision_reason {
                    output["reason"] = Value::String(reason);
                }
                Ok(output)
            }
            NodeKind::Map | NodeKind::Join => Err(Failure::failed(
                "a map's node must be an agent, tool or workflow",
            )),
        }
    }

    /// A tool node's call, in this run's log (the path of every direct call: gateway,
    /// policy, hooks, a human when asked). A resumed run takes a recorded result; a call cut
    /// off before its result is made again only when its tool is idempotent (its outcome is
    /// unknown otherwise, and the attempt fails — `retry` makes a new call).
    async fn tool_call(
        &self,
        id: &str,
        key: NodeKey,
        attempt: u32,
        call: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<String, Failure> {
        let resumed = self.started_before(id, key, attempt);
        if resumed {
            if let Some((ok, output)) = self.recorded.tool_results.get(call) {
                return match ok {
                    true => Ok(output.clone()),
                    false => Err(Failure::failed(output.clone())),
                };
            }
            let gateway = &self.kernel.services().gateway;
            if self.recorded.tool_started.contains(call) && !gateway.is_idempotent(tool) {
                return Err(Failure::failed(format!(
                    "the call of `{tool}` was interrupted; its outcome is unknown and it is not made again (the tool is not idempotent)"
                )));
            }
        }
        self.started(id, NodeKind::Tool, key, attempt, arguments.clone(), None)?;
        let record = self.record();
        let agent = format!("{}/{id}", record.agent);
        let call = ToolCall {
            id: call.to_owned(),
            name: tool.to_owned(),
            arguments: arguments.to_string(),
        };
        let outcome = crate::agent_loop::embedded_call(
            self.kernel.shared_services(),
            self.emitter.clone(),
            record,
            &agent,
            call,
            self.shutdown.clone(),
            resumed,
        )
        .await?;
        outcome.map_err(Failure::failed)
    }

    /// Waits for a child run: records which it is, cancels it if this node is dropped, and
    /// returns its record once it ended (completed, or a failure naming it).
    async fn follow(
        &self,
        id: &str,
        kind: NodeKind,
        key: NodeKey,
        attempt: u32,
        input: Value,
        child: Child,
    ) -> Result<RunRecord, Failure> {
        let record = match child {
            Child::Ended(record) => *record,
            Child::Live(handle) => {
                let child_id = handle.request_id().clone();
                self.started(id, kind, key, attempt, input, Some(child_id.clone()))?;
                let guard = CancelChild::new(&handle, &self.shutdown);
                let response = handle.wait().await;
                guard.disarm();
                if let (Ok(response), Ok(mut usage)) = (&response, self.usage.lock()) {
                    usage.add(&response.usage);
                }
                self.kernel
                    .store()
                    .get_run(&child_id)
                    .await?
                    .ok_or_else(|| {
                        Failure::failed(format!("child run {child_id} left no record"))
                    })?
            }
        };
        if record.status == RunStatus::Completed {
            return Ok(record);
        }
        let why = record
            .error
            .as_ref()
            .map(|e| format!(": {}", e.message))
            .unwrap_or_default();
        Err(Failure::failed(format!(
            "its {} run {} ended {}{why}",
            kind.as_str(),
            record.request_id,
            record.status.as_str()
        )))
    }

    /// A `map` node: its `node` once per item, at most `concurrency` at a time; the outputs
    /// in item order.
    async fn map(&self, node: &NodeSpec, key: NodeKey, context: Value) -> Result<Value, Failure> {
        let since = Instant::now();
        let expression = node.items.as_deref().unwrap_or("[]");
        let items = match template::eval(expression, &context) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                return Err(Failure::failed(format!(
                    "`items` ({expression}) is not a list but {other}"
                )));
            }
            Err(error) => return Err(Failure::failed(format!("`items`: {error}"))),
        };
        self.started(
            &node.id,
            node.kind,
            key,
            1,
            Value::Array(items.clone()),
            None,
        )?;
        let Some(body) = node.node.as_deref() else {
            return Err(Failure::failed("a map needs `node`"));
        };
        let concurrency = node.concurrency.unwrap_or(4).max(1) as usize;
        let runs = items.into_iter().enumerate().map(|(i, item)| {
            let mut context = context.clone();
            context["item"] = item;
            context["index"] = json!(i);
            let key = NodeKey {
                iteration: key.iteration,
                item: Some(u32::try_from(i).unwrap_or(u32::MAX)),
            };
            async move {
                if let Some(output) = self.recorded.completed.get(&(node.id.clone(), key)) {
                    return Ok(output.clone());
                }
                self.attempts(body, &node.id, key, &context).await
            }
        });
        let outputs: Vec<Result<Value, Failure>> = futures_util::stream::iter(runs)
            .buffered(concurrency)
            .collect()
            .await;
        let outputs = outputs.into_iter().collect::<Result<Vec<_>, _>>()?;
        let output = Value::Array(outputs);
        self.completed(&node.id, key, output.clone(), since)?;
        Ok(output)
    }

    /// A durable approval for this run (a node's or a gate's): asked once, waited on again
    /// after a restart; the run is `waiting_approval` meanwhile.
    pub(super) async fn approval(
        &self,
        call_id: &str,
        subject: &str,
        message: &str,
        asked_by: &str,
    ) -> Result<ApprovalRecord, Failure> {
        let store = self.kernel.store();
        let record = self.record();
        // Asked before this process (only a resumed run can have asked): waited on again, or
        // taken as decided while it was down.
        let earlier = match self.recorded.last_seq > 0 {
            true => {
                crate::approval_wait::earlier(store.as_ref(), &record.request_id, call_id).await?
            }
            false => Earlier::Nothing,
        };
        let (approval, fresh) = match earlier {
            Earlier::Decided(decided) => {
                self.emitter
                    .emit(crate::approval_wait::resolved(&decided))?;
                return Ok(decided);
            }
            Earlier::Pending(pending) => (pending, false),
            Earlier::Nothing => (
                ApprovalRecord::pending(
                    &record,
                    call_id,
                    format!("{}:{subject}", record.agent),
                    json!({"workflow": self.name, "node": subject, "message": message}),
                    asked_by,
                    Some(message.to_owned()),
                ),
                true,
            ),
        };
        self.asked.store(true, std::sync::atomic::Ordering::Relaxed);
        if self
            .waiting
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            self.set_status(RunStatus::WaitingApproval).await?;
        }
        // The run is `waiting_approval` before anyone can see the approval.
        if fresh {
            store.create_approval(&approval).await?;
        }
        if fresh {
            self.emitter
                .emit_durable(EventPayload::ApprovalRequested {
                    approval: Box::new(approval.clone()),
                })
                .await?;
        }
        let timeout = self.kernel.workspace().runtime.limits.approval_timeout.0;
        let decided = crate::approval_wait::decision(
            store.as_ref(),
            &self.kernel.services().decisions,
            &approval.approval_id,
            timeout,
        )
        .await;
        if self
            .waiting
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.set_status(RunStatus::Running).await?;
        }
        let decided = decided?;
        self.emitter
            .emit(crate::approval_wait::resolved(&decided))?;
        Ok(decided)
    }
}

/// What a completed child run gives its node: its structured output, else its answer.
fn answer(record: RunRecord) -> Value {
    record
        .value
        .unwrap_or_else(|| Value::String(record.output.unwrap_or_default()))
}

/// A kernel error starting a child, as a node failure.
fn runtime_failure(error: RuntimeError) -> Failure {
    match error {
        RuntimeError::Store(error) => Failure::store(error),
        other => Failure::failed(other.to_string()),
    }
}

impl Kernel {
    /// The earlier child for `call` when the workflow was resumed (no lookup otherwise).
    async fn earlier_of(
        &self,
        resumed: bool,
        parent: &RunRecord,
        call: &str,
    ) -> Result<Option<RunRecord>, RuntimeError> {
        match resumed {
            true => self.earlier_child(&parent.request_id, call).await,
            false => Ok(None),
        }
    }

    fn child_links(parent: &RunRecord, call: &str) -> RunLinks {
        RunLinks {
            parent_id: Some(parent.request_id.clone()),
            root_id: Some(
                parent
                    .links
                    .root_id
                    .clone()
                    .unwrap_or_else(|| parent.request_id.clone()),
            ),
            parent_call: Some(call.to_owned()),
            ..RunLinks::default()
        }
    }

    /// A nested workflow node's run (or the one an interrupted process had started).
    async fn nested_workflow(
        &self,
        key: ChildKey<'_>,
        workflow: &str,
        input: &Value,
    ) -> Result<Child, RuntimeError> {
        let ChildKey {
            parent,
            call,
            depth,
            resumed,
        } = key;
        if let Some(earlier) = self.earlier_of(resumed, parent, call).await? {
            return match earlier.status {
                RunStatus::Interrupted => Ok(Child::Live(self.resume(&earlier.request_id).await?)),
                status if status.is_terminal() => Ok(Child::Ended(Box::new(earlier))),
                status => Err(RuntimeError::Conflict(format!(
                    "the child run {} for this node is still {}",
                    earlier.request_id,
                    status.as_str()
                ))),
            };
        }
        let max = self.workspace().runtime.limits.max_depth;
        if depth > max {
            return Err(RuntimeError::InvalidInput(format!(
                "cannot run workflow `{workflow}`: runs may nest only {max} deep (limits.maxDepth)"
            )));
        }
        let options = RequestOptions {
            input: text_of(input),
            owner: parent.owner.clone(),
            trace: Some(crate::trace::child_trace(parent, call)),
            ..RequestOptions::default()
        };
        let origin = Origin {
            links: Self::child_links(parent, call),
            depth,
            ..Origin::default()
        };
        Ok(Child::Live(
            self.start_workflow(workflow, options, origin).await?,
        ))
    }
}
