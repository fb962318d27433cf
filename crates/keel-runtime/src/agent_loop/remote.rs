//! The run's side of a remote agent (`RemoteAgent`, `backend: {kind: a2a}`): the call is
//! governed first (policy, hooks, a human, as a tool call with side effects), then the A2A client
//! (`Adapters::remote`) runs one task of the remote agent; this records what it reports as
//! the run's events — the task's id first (`agent.progress`, kind `event`, so a resumed run
//! re-attaches to it instead of asking again), each state change (kind `progress`), the
//! answer's text as it streams — and ends the run as the task ended. Cancelling the run drops
//! the client's future, which cancels the remote task; a shutdown leaves the task running, and
//! the resumed run re-attaches to it.

use keel_types::{AdapterEvent, ErrorCode, EventPayload, FinishReason, ModelStopReason, Usage};
use keel_workspace::RemoteBackend;
use serde_json::json;
use tokio::sync::mpsc;

use super::model::Answer;
use super::{AgentRun, End};
use crate::adapter::{RemoteEnd, RemoteTask, RemoteUpdate};

/// The adapter name remote runs' `agent.*` events carry.
pub(crate) const REMOTE_ADAPTER: &str = "a2a";

impl AgentRun {
    /// Runs the remote agent's task to its end.
    pub(super) async fn drive_remote(&mut self, backend: RemoteBackend) -> End {
        let Some(client) = self.services.adapters.remote.clone() else {
            return End::failed(
                ErrorCode::RemoteAgentFailed,
                "this runtime has no A2A client (an embedding that left it out)",
                FinishReason::Internal,
            );
        };
        // A resumed run goes on with the task it had started, not a second one.
        let attach = match self.start {
            super::Start::Resumed { .. } => {
                match self.services.store.events(&self.record.request_id, 0).await {
                    Ok(events) => events.iter().rev().find_map(|event| match &event.payload {
                        EventPayload::Adapter {
                            event:
                                AdapterEvent::Progress {
                                    adapter,
                                    kind,
                                    data,
                                },
                        } if adapter == REMOTE_ADAPTER && kind == "event" => data
                            .get("remoteTask")
                            .and_then(|t| t.as_str())
                            .map(str::to_owned),
                        _ => None,
                    }),
                    Err(error) => return End::store(error),
                }
            }
            _ => None,
        };
        let url = backend.url.clone();
        // Calling it is governed like a call of a tool with side effects named after it:
        // policy (`tool: <remote agent>`; `plan` mode refuses it), `PreToolUse` hooks, a
        // human. A resumed run's task was governed when it started.
        if attach.is_none() {
            let call_id = format!("{}-a2a", self.record.request_id);
            let arguments = json!({"input": self.record.input, "url": url});
            let mut verdict =
                keel_tools::gateway::Guarded::delegation(&call_id, &self.record.agent, arguments);
            if let Err(error) = self.govern(&mut verdict).await {
                return End::store(error);
            }
            if !verdict.is_allowed() {
                return End::failed(
                    ErrorCode::ToolBlocked,
                    format!(
                        "the call to the remote agent was refused: {}",
                        verdict.refusal().unwrap_or("by governance")
                    ),
                    FinishReason::ToolDenied,
                );
            }
        }
        let task = RemoteTask {
            request_id: self.record.request_id.clone(),
            agent: self.record.agent.clone(),
            backend,
            input: self.record.input.clone(),
            attach: attach.clone(),
            interrupted: self.interrupt.clone(),
        };
        let (tx, mut rx) = mpsc::channel(64);
        let mut call = client.run(task, tx);
        let mut streamed = String::new();
        let mut open = true;
        let outcome = loop {
            tokio::select! {
                update = rx.recv(), if open => match update {
                    Some(update) => {
                        if let Err(error) = self.remote_update(update, &url, attach.as_deref(), &mut streamed) {
                            return End::store(error);
                        }
                    }
                    None => open = false,
                },
                outcome = &mut call => break outcome,
            }
        };
        while let Ok(update) = rx.try_recv() {
            if let Err(error) = self.remote_update(update, &url, attach.as_deref(), &mut streamed) {
                return End::store(error);
            }
        }
        match outcome {
            Ok(RemoteEnd::Completed { output, value }) => {
                // What was not streamed (a whole answer) is the answer's text now.
                if let Some(rest) = output.strip_prefix(streamed.as_str())
                    && !rest.is_empty()
                    && let Err(error) = self.remote_text(rest.to_owned())
                {
                    return End::store(error);
                }
                let answer = Answer {
                    text: output,
                    calls: Vec::new(),
                    thinking: Vec::new(),
                    stop: ModelStopReason::Stop,
                    usage: Usage::default(),
                };
                Box::pin(self.final_answer(answer, value)).await
            }
            Ok(RemoteEnd::Failed(why)) => End::failed(
                ErrorCode::RemoteAgentFailed,
                format!("the remote agent failed: {why}"),
                FinishReason::ModelError,
            ),
            Ok(RemoteEnd::Cancelled(why)) => End::failed(
                ErrorCode::RemoteAgentFailed,
                format!("the remote agent cancelled its task: {why}"),
                FinishReason::ModelError,
            ),
            Ok(RemoteEnd::InputRequired(why)) => End::failed(
                ErrorCode::RemoteAgentFailed,
                format!("the remote agent asks for input Keel cannot give: {why}"),
                FinishReason::ModelError,
            ),
            Err(why) => End::failed(
                ErrorCode::RemoteAgentFailed,
                format!("calling the remote agent at {url} failed: {why}"),
                FinishReason::ModelError,
            ),
        }
    }

    /// Records one update of the remote task.
    fn remote_update(
        &mut self,
        update: RemoteUpdate,
        url: &str,
        attached: Option<&str>,
        streamed: &mut String,
    ) -> Result<(), keel_types::StoreError> {
        match update {
            // A re-attached task was recorded when it started.
            RemoteUpdate::Task { id, .. } if attached == Some(id.as_str()) => Ok(()),
            RemoteUpdate::Task { id, context_id } => self.remote_progress(
                "event",
                json!({"remoteTask": id, "contextId": context_id, "url": url}),
            ),
            RemoteUpdate::Status { state, message } => {
                self.remote_progress("progress", json!({"state": state, "message": message}))
            }
            RemoteUpdate::Text(text) => {
                streamed.push_str(&text);
                self.remote_text(text)
            }
        }
    }

    fn remote_progress(
        &self,
        kind: &str,
        data: serde_json::Value,
    ) -> Result<(), keel_types::StoreError> {
        self.emitter
            .emit(EventPayload::Adapter {
                event: AdapterEvent::Progress {
                    adapter: REMOTE_ADAPTER.to_owned(),
                    kind: kind.to_owned(),
                    data,
                },
            })
            .map(drop)
    }

    fn remote_text(&self, text: String) -> Result<(), keel_types::StoreError> {
        self.emitter
            .emit(EventPayload::Adapter {
                event: AdapterEvent::OutputDelta {
                    adapter: REMOTE_ADAPTER.to_owned(),
                    step: self.steps,
                    text,
                },
            })
            .map(drop)
    }
}
