//! A started run as its caller holds it: [`RunHandle`] (live events, cancel, the final
//! result) and [`RunResponse`], what a run ended with.

use keel_types::{ErrorInfo, Event, FinishReason, RequestId, RunStatus, Usage};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::RuntimeError;

/// The final result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResponse {
    pub request_id: RequestId,
    pub status: RunStatus,
    pub output: Option<String>,
    /// The structured output, when the agent declares `output.schema` (or the run is a
    /// workflow's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    pub error: Option<ErrorInfo>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub steps: u32,
    pub duration_ms: u64,
}

/// A started run: its live events, a way to cancel it, and its final response.
pub struct RunHandle {
    request_id: RequestId,
    events: mpsc::UnboundedReceiver<Box<Event>>,
    cancel: CancellationToken,
    task: JoinHandle<RunResponse>,
}

impl RunHandle {
    /// A handle on the spawned run `task`, whose events arrive on `events`.
    pub(crate) fn new(
        request_id: RequestId,
        events: mpsc::UnboundedReceiver<Box<Event>>,
        cancel: CancellationToken,
        task: JoinHandle<RunResponse>,
    ) -> Self {
        Self {
            request_id,
            events,
            cancel,
            task,
        }
    }

    /// The run's id.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The next live event (stored events and narration), or `None` once the run has ended
    /// and every event was delivered.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await.map(|event| *event)
    }

    /// The live events as a `Stream`; it ends when the run has ended.
    pub fn events(&mut self) -> impl futures_util::Stream<Item = Event> + Send + '_ {
        futures_util::stream::poll_fn(move |cx| {
            self.events
                .poll_recv(cx)
                .map(|event| event.map(|event| *event))
        })
    }

    /// A token that cancels the run when triggered.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Cancels the run; it ends with `runtime.request.cancelled`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the run to end. Undelivered events are dropped.
    pub async fn wait(self) -> Result<RunResponse, RuntimeError> {
        // Nobody reads the events any more: stop queueing them.
        let Self { events, task, .. } = self;
        drop(events);
        task.await
            .map_err(|e| RuntimeError::Internal(e.to_string()))
    }
}
