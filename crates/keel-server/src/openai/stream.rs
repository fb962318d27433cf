//! The streamed answer of both facades (`stream: true`): a task feeds the run's events into a
//! bounded outbox and the client reads frames from it, so a slow reader never holds up the
//! run. Output text becomes the dialect's text frames (consecutive deltas merge while they
//! wait), opted-in Keel events become SSE events named `keel`, and the stream ends with the
//! dialect's closing frames. A [`Dialect`] writes the frames: [`ChatDialect`] the
//! `chat.completion.chunk` frames ending with `[DONE]` of Chat Completions, the Messages API's
//! its own (`crate::anthropic`). The client going away cancels the run; a client more than
//! [`MAX_PENDING_BYTES`] behind is cut off and the run goes on.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::response::Response;
use bytes::Bytes;
use keel::{Event, EventPayload, RunHandle, RunResponse, RuntimeError};
use keel_types::event::AdapterEvent;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::DropGuard;

use super::wire::{Completion, DONE, finish_reason, frame, run_error};
use crate::ApiError;
use crate::requests::sse_response;
use crate::state::Ticket;

/// What a stream holds for a client that reads slower than the run writes, at most. Output
/// text merges into one chunk while it waits, so only frames that cannot merge count up; a
/// client so far behind loses the rest of the stream (it ends with an error naming the
/// request, whose answer stays in the store) and the run goes on.
const MAX_PENDING_BYTES: usize = 1024 * 1024;

/// A frame waiting for the client.
enum Item {
    /// Output text of the message numbered by the key (consecutive deltas of one message
    /// merge).
    Text(u64, String),
    Frame(Bytes),
}

impl Item {
    fn len(&self) -> usize {
        match self {
            Self::Text(_, text) => text.len(),
            Self::Frame(frame) => frame.len(),
        }
    }
}

/// How a facade's stream is written.
pub(crate) trait Dialect: Send + Sync + 'static {
    /// The frames that open the stream.
    fn opening(&self) -> Vec<Bytes>;
    /// A frame of answer text, of the message numbered `message` (dialects with one message
    /// per stream ignore it).
    fn text(&self, message: u64, text: String) -> Bytes;
    /// The frames that end the stream once the run ended: the finish (and usage), or the
    /// run's error.
    fn closing(&self, response: Result<RunResponse, RuntimeError>) -> Vec<Bytes>;
    /// What ends a stream whose client fell too far behind.
    fn cut_off(&self, error: ApiError) -> Bytes;
}

/// The Chat Completions stream.
pub(super) struct ChatDialect {
    pub completion: Completion,
    /// A usage chunk before `[DONE]` (`stream_options.include_usage`).
    pub include_usage: bool,
}

impl Dialect for ChatDialect {
    fn opening(&self) -> Vec<Bytes> {
        vec![
            self.completion
                .chunk(json!({ "role": "assistant", "content": "" }), None),
        ]
    }

    fn text(&self, _: u64, text: String) -> Bytes {
        self.completion.chunk(json!({ "content": text }), None)
    }

    fn closing(&self, response: Result<RunResponse, RuntimeError>) -> Vec<Bytes> {
        closing_frames(&self.completion, response, self.include_usage)
    }

    fn cut_off(&self, error: ApiError) -> Bytes {
        let mut bytes = frame(&error.body()).to_vec();
        bytes.extend_from_slice(DONE);
        Bytes::from(bytes)
    }
}

/// Frames from the run to the client. The run side never waits for the client.
#[derive(Default)]
struct Outbox {
    items: VecDeque<Item>,
    bytes: usize,
    /// The run side is done: nothing is added after what is queued.
    closed: bool,
    /// The client fell more than [`MAX_PENDING_BYTES`] behind.
    overflowed: bool,
}

struct Shared {
    outbox: Mutex<Outbox>,
    ready: Notify,
}

/// The run side of a stream: what it pushes waits for the client in a bounded outbox, and
/// it never waits for the client.
pub(crate) struct Sink {
    shared: Arc<Shared>,
}

impl Sink {
    /// Output text of message `message` (merged with the queued text of the same message).
    pub(crate) fn text(&self, message: u64, text: String) {
        self.shared.push(Item::Text(message, text));
    }

    /// A frame as written.
    pub(crate) fn frame(&self, frame: Bytes) {
        self.shared.push(Item::Frame(frame));
    }

    /// The last frames: the stream ends after them (the run goes on if it has not ended).
    pub(crate) fn close(&self, last: Vec<Bytes>) {
        self.shared.close(last);
    }
}

impl Shared {
    fn push(&self, item: Item) {
        let Ok(mut outbox) = self.outbox.lock() else {
            return;
        };
        if outbox.overflowed {
            return;
        }
        outbox.bytes += item.len();
        match (outbox.items.back_mut(), item) {
            (Some(Item::Text(key, queued)), Item::Text(message, text)) if *key == message => {
                queued.push_str(&text);
            }
            (_, item) => outbox.items.push_back(item),
        }
        if outbox.bytes > MAX_PENDING_BYTES {
            outbox.overflowed = true;
            outbox.items.clear();
            outbox.bytes = 0;
        }
        drop(outbox);
        self.ready.notify_one();
    }

    fn close(&self, last: Vec<Bytes>) {
        if let Ok(mut outbox) = self.outbox.lock() {
            if !outbox.overflowed {
                for frame in last {
                    outbox.bytes += frame.len();
                    outbox.items.push_back(Item::Frame(frame));
                }
            }
            outbox.closed = true;
        }
        self.ready.notify_one();
    }
}

/// Feeds the run's events into the outbox until the run ends; holds the run's admission
/// place until then.
async fn pump<D: Dialect>(
    mut handle: RunHandle,
    ticket: Ticket,
    sink: Sink,
    dialect: Arc<D>,
    options: StreamOptions,
) {
    while let Some(event) = handle.next_event().await {
        match &event.payload {
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { text, .. },
            } if !text.is_empty() && !options.whole_answer => sink.text(0, text.clone()),
            payload if options.progress && is_progress(payload) => {
                sink.frame(progress_frame(&event));
            }
            _ => {}
        }
    }
    let mut response = handle.wait().await;
    drop(ticket);
    if options.value_as_content
        && let Ok(response) = &mut response
    {
        value_as_content(response);
    }
    if options.whole_answer
        && let Ok(RunResponse {
            output: Some(output),
            ..
        }) = &response
    {
        sink.text(0, output.clone());
    }
    sink.close(dialect.closing(response));
}

/// How a facade stream is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamOptions {
    /// Keel progress events too (`X-Keel-Progress`).
    pub progress: bool,
    /// Send the answer in one piece at the end instead of as it streams: for a structured
    /// output (an answer the model is asked to correct must not reach the client) and for a
    /// workflow (whose answer is its result, not a model's text).
    pub whole_answer: bool,
    /// The answer is the run's structured value as compact JSON (the request asked for
    /// `response_format` JSON; the model's text may have had a code fence around it).
    pub value_as_content: bool,
}

/// A structured answer's content: its checked value as compact JSON.
pub(crate) fn value_as_content(response: &mut RunResponse) {
    if let Some(value) = &response.value {
        response.output = Some(value.to_string());
    }
}

/// The Keel events an opted-in stream carries: narration, tool progress, approvals and
/// model retries.
fn is_progress(payload: &EventPayload) -> bool {
    matches!(
        payload,
        EventPayload::Narration { .. }
            | EventPayload::Adapter {
                event: AdapterEvent::ToolStart { .. } | AdapterEvent::ToolResult { .. }
            }
            | EventPayload::ApprovalRequested { .. }
            | EventPayload::ApprovalResolved { .. }
            | EventPayload::ModelRetry { .. }
    )
}

/// A Keel event on the facade stream: a named SSE event (`event: keel`), so standard chunk
/// parsers that dispatch on the event name leave it alone.
fn progress_frame(event: &Event) -> Bytes {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("event: keel\ndata: {data}\n\n"))
}

/// The closing frames: finish chunk, usage chunk, `[DONE]` — or an error object and `[DONE]`.
fn closing_frames(
    completion: &Completion,
    response: Result<RunResponse, RuntimeError>,
    include_usage: bool,
) -> Vec<Bytes> {
    let mut frames = Vec::with_capacity(3);
    match response {
        Err(_) => {
            let error = ApiError::RunFailed("the run ended abnormally".into());
            frames.push(frame(&error.body()));
        }
        Ok(response) => {
            if let Some(error) = run_error(&response) {
                frames.push(frame(&error.body()));
            } else {
                frames.push(completion.chunk(json!({}), Some(finish_reason(&response))));
                if include_usage {
                    frames.push(completion.usage_chunk(&response));
                }
            }
        }
    }
    frames.push(Bytes::from_static(DONE));
    frames
}

/// The client side of a streamed answer.
struct Streaming<D> {
    shared: Arc<Shared>,
    dialect: Arc<D>,
    request_id: String,
    /// Cancels the run if the client goes away before the stream ends.
    guard: Option<DropGuard>,
    finished: bool,
}

impl<D: Dialect> Streaming<D> {
    /// The next frame, or `None` once the closing frames were sent.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if self.finished {
                return None;
            }
            let item = {
                let mut outbox = self.shared.outbox.lock().ok()?;
                if outbox.overflowed {
                    self.finished = true;
                    if let Some(guard) = self.guard.take() {
                        // The run goes on; its answer is in the store.
                        guard.disarm();
                    }
                    let error = ApiError::RunFailed(format!(
                        "the client read too slowly and the stream was cut; the run goes on as request `{}`",
                        self.request_id
                    ));
                    return Some(self.dialect.cut_off(error));
                }
                match outbox.items.pop_front() {
                    Some(item) => {
                        outbox.bytes -= item.len();
                        Some(item)
                    }
                    None if outbox.closed => {
                        self.finished = true;
                        if let Some(guard) = self.guard.take() {
                            guard.disarm();
                        }
                        return None;
                    }
                    None => None,
                }
            };
            match item {
                Some(Item::Text(message, text)) => return Some(self.dialect.text(message, text)),
                Some(Item::Frame(frame)) => return Some(frame),
                None => self.shared.ready.notified().await,
            }
        }
    }
}

/// A `text/event-stream` answer in `dialect`'s frames. A task feeds the run's events into a
/// bounded outbox, so a slow reader never holds up the run; the client going away cancels
/// the run.
pub(crate) fn stream_response<D: Dialect>(
    dialect: D,
    handle: RunHandle,
    ticket: Ticket,
    options: StreamOptions,
) -> Response {
    let dialect = Arc::new(dialect);
    if !options.progress {
        // Only an opted-in stream shows narration: the run need not make it.
        handle.skip_narration();
    }
    let (response, sink) = frames_response(
        dialect.clone(),
        handle.request_id().to_string(),
        handle.cancel_token().drop_guard(),
    );
    tokio::spawn(pump(handle, ticket, sink, dialect, options));
    response
}

/// A `text/event-stream` answer in `dialect`'s frames, opening with
/// [`Dialect::opening`], and the [`Sink`] the run side pushes the rest into. `guard` cancels
/// the run if the client goes away before the sink is closed and its frames were read; a
/// client that falls too far behind is cut off with [`Dialect::cut_off`] naming `request_id`
/// (the run goes on).
pub(crate) fn frames_response<D: Dialect>(
    dialect: Arc<D>,
    request_id: String,
    guard: DropGuard,
) -> (Response, Sink) {
    let opening = dialect.opening();
    let shared = Arc::new(Shared {
        outbox: Mutex::new(Outbox {
            bytes: opening.iter().map(Bytes::len).sum(),
            items: opening.into_iter().map(Item::Frame).collect(),
            ..Outbox::default()
        }),
        ready: Notify::new(),
    });
    let streaming = Streaming {
        shared: shared.clone(),
        dialect,
        request_id,
        guard: Some(guard),
        finished: false,
    };
    let response = sse_response(futures_util::stream::unfold(
        streaming,
        |mut streaming| async move {
            let frame = streaming.next().await?;
            Some((Ok::<_, Infallible>(frame), streaming))
        },
    ));
    (response, Sink { shared })
}
