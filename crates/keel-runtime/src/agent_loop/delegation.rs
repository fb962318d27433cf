//! A `task` call inside a run: the child run it starts (through the kernel's
//! [`Delegate`](crate::subagents::Delegate)), the `agent.handoff` event that links it, and
//! the child's answer as the call's result. Dropping the call (the parent cancelled, timed
//! out or stopped) cancels the child; a shutdown leaves it to be interrupted with its parent
//! and resumed with it.

use keel_tools::gateway::Guarded;
use keel_types::{
    AdapterEvent, EventPayload, NATIVE_ADAPTER, StoreError, ToolError, ToolOutput, Usage,
};
use serde_json::Value;

use super::AgentRun;
use crate::RuntimeError;
use crate::subagents::{CancelChild, Child, ChildRequest, TaskInput, child_result, layers_of};

impl AgentRun {
    /// Runs a governed `task` call: the child's answer, or why there is none.
    pub(super) async fn run_task(
        &self,
        verdict: &Guarded,
    ) -> Result<Result<ToolOutput, ToolError>, StoreError> {
        let arguments = verdict.arguments().cloned().unwrap_or(Value::Null);
        // The gateway has validated the arguments against this very type's schema.
        let TaskInput { agent, prompt } = match keel_tools::input::parse(arguments) {
            Ok(input) => input,
            Err(error) => return Ok(Err(error)),
        };
        let mut narrowing = self.narrowing.clone();
        narrowing.extend(layers_of(
            &self.services.workspace,
            &self.record.agent,
            self.mode,
        ));
        let request = ChildRequest {
            parent: self.record.clone(),
            call: verdict.call_id().to_owned(),
            agent: agent.clone(),
            prompt,
            narrowing,
            depth: self.depth + 1,
            metadata: (*self.tool_ctx.metadata).clone(),
            resumed: matches!(self.start, super::Start::Resumed { .. }),
        };
        let child = match self.services.delegate.delegate(request).await {
            Ok(child) => child,
            Err(RuntimeError::Store(error)) => return Err(error),
            Err(error) => return Ok(Err(ToolError::Failed(error.to_string()))),
        };
        let handoff = |id| {
            self.emitter.emit(EventPayload::Adapter {
                event: AdapterEvent::Handoff {
                    adapter: NATIVE_ADAPTER.to_owned(),
                    call_id: verdict.call_id().to_owned(),
                    agent: agent.clone(),
                    child_request_id: id,
                },
            })
        };
        let record = match child {
            Child::Ended(record) => *record,
            Child::Live(handle) => {
                let id = handle.request_id().clone();
                handoff(id.clone())?;
                let guard = CancelChild::new(&handle, &self.interrupt);
                let response = handle.wait().await;
                guard.disarm();
                if let Ok(response) = &response {
                    self.add_delegated(&response.usage);
                }
                match self.services.store.get_run(&id).await? {
                    Some(record) => record,
                    None => {
                        return Ok(Err(ToolError::Failed(format!(
                            "subagent run {id} left no record"
                        ))));
                    }
                }
            }
        };
        Ok(match child_result(&agent, &record) {
            Ok(answer) => Ok(ToolOutput::text(answer)),
            Err(error) => Err(ToolError::Failed(error)),
        })
    }

    fn add_delegated(&self, usage: &Usage) {
        if let Ok(mut total) = self.delegated.lock() {
            total.add(usage);
        }
    }

    /// Counts what the children of the last tool round used into this run's usage (and so
    /// into its token budget).
    pub(super) fn count_delegated(&mut self) {
        if let Ok(mut total) = self.delegated.lock() {
            let used = std::mem::take(&mut *total);
            self.usage.add(&used);
        }
    }
}
