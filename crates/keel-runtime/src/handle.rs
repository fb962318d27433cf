//! A started run as its caller holds it: [`RunHandle`] (live events, cancel, the final
//! result) and [`RunResponse`], what a run ended with.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_types::{ErrorInfo, Event, FinishReason, RequestId, RunStatus, Usage};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::RuntimeError;
use crate::emitter::Subscription;

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
    /// Whether the run makes narration for this handle (see [`Self::skip_narration`]).
    narration: Arc<AtomicBool>,
    cancel: CancellationToken,
    task: JoinHandle<RunResponse>,
}

impl RunHandle {
    /// A handle on the spawned run `task`, whose events arrive on `live`.
    pub(crate) fn new(
        request_id: RequestId,
        live: Subscription,
        cancel: CancellationToken,
        task: JoinHandle<RunResponse>,
    ) -> Self {
        Self {
            request_id,
            events: live.events,
            narration: live.narration,
            cancel,
            task,
        }
    }

    /// From now on the live events carry no `runtime.progress.narration` lines: for a reader
    /// that would drop them, so the run stops making them (narration is derived and never
    /// stored; the stored events are unchanged).
    pub fn skip_narration(&self) {
        self.narration.store(false, Ordering::Relaxed);
    }

    /// The run's id.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The next live event (stored events and narration), or `None` once the run has ended
    /// and every event was delivered.
    pub async fn next_event(&mut self) -> Option<Event> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The live events as a `Stream`; it ends when the run has ended.
    pub fn events(&mut self) -> impl futures_util::Stream<Item = Event> + Send + '_ {
        futures_util::stream::poll_fn(move |cx| self.poll_event(cx))
    }

    /// The next live event, leaving out narration once it is skipped (lines made before
    /// [`Self::skip_narration`] may still be queued).
    fn poll_event(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Event>> {
        loop {
            let event = std::task::ready!(self.events.poll_recv(cx));
            match event {
                Some(event)
                    if event.payload.is_derived() && !self.narration.load(Ordering::Relaxed) => {}
                event => return std::task::Poll::Ready(event.map(|event| *event)),
            }
        }
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
