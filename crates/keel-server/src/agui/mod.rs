//! AG-UI (the Agent–User Interaction protocol): `POST /api/agui/{name}` takes AG-UI's
//! `RunAgentInput` and answers the run as AG-UI events over SSE, so a front end built on
//! `@ag-ui/client` (CopilotKit and the like) renders a Keel run live. `{name}` is an agent or
//! a workflow. The mapping, in short (docs/protocols.md has the table):
//!
//! - the last message (a user message) is the run's input, the ones before it its history;
//!   `context` entries go before the input; `threadId`, `runId`, `parentRunId` and
//!   `forwardedProps` are kept in the run's metadata (`agui.*`);
//! - model rounds are steps, answer text is a text message, each tool call is
//!   start/args/end and its result; a workflow's nodes are steps and its state (each node's)
//!   comes as `STATE_SNAPSHOT`;
//! - a human approval ends the AG-UI run with an `interrupt` outcome whose id is the
//!   approval's; the Keel run waits. The next AG-UI run answers it in `resume` (`resolved`
//!   with `{approved, scope?, reason?}`, or `cancelled` = deny) and streams the rest of the
//!   same Keel run. The approval can as well be decided anywhere else (console, API, CLI).
//!
//! Client-side tools (`tools`) and shared state for agents cannot be honoured and are refused
//! with a 400 naming the field.

mod events;
mod input;

use std::sync::{Arc, LazyLock};

use axum::Extension;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use bytes::Bytes;
use keel::{ApprovalScope, ApprovalStatus, EventPayload, RequestId, RequestOptions, RunHandle};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::ApiError;
use crate::body::{internal, parse_body};
use crate::follow::{Followed, Follower};
use crate::openai::stream::{Dialect, Sink, frames_response};
use crate::requests::{start_run, visible_run};
use crate::state::{AppState, Principal, Ticket};

use events::{AguiDialect, Flow, StreamIds, Translator};
pub(crate) use input::RunAgentInput;

/// Who decided approvals answered through AG-UI.
const DECIDER: &str = "agui";

/// What an approval interrupt's answer (`resume[].payload`) holds.
pub(crate) static RESPONSE_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean", "description": "approve (true) or deny (false) the call"},
            "scope": {"enum": ["once", "session"], "description": "`session`: calls of the same tool for the rest of the session are approved too"},
            "reason": {"type": "string"},
        },
        "required": ["approved"],
    })
});

/// `POST /api/agui/{name}`: an AG-UI run of agent or workflow `name`, as SSE.
pub(crate) async fn run(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let target = target(&state, &name)?;
    let input: RunAgentInput = parse_body(body, false)?;
    if !input.resume.is_empty() {
        return resume(state, principal, &name, &target, input).await;
    }
    input.check_tools()?;
    let thread_id = input.thread_id.clone();
    let run_id = input.run_id.clone();
    let asked = match input.into_request(target.workflow) {
        Ok(asked) => asked,
        // A conversation Keel cannot run is the run's error, in the stream, as AG-UI reports
        // errors (the request itself was well-formed).
        Err(ApiError::BadRequest { message, .. }) => {
            return Ok(refused_run(&thread_id, &run_id, &message));
        }
        Err(other) => return Err(other),
    };
    let options = RequestOptions {
        input: asked.input,
        history: asked.history,
        agent: Some(target.agent),
        metadata: asked.metadata,
        ..Default::default()
    };
    let (handle, ticket) = start_run(&state, &principal, options).await?;
    handle.skip_narration();
    let ids = StreamIds {
        thread_id: asked.thread_id,
        run_id: asked.run_id,
        request_id: handle.request_id().to_string(),
        whole_answer: target.whole_answer,
    };
    let dialect = Arc::new(AguiDialect { ids: ids.clone() });
    let (response, sink) = frames_response(
        dialect.clone(),
        ids.request_id.clone(),
        handle.cancel_token().drop_guard(),
    );
    tokio::spawn(live(handle, ticket, sink, dialect, Translator::new(ids)));
    Ok(response)
}

/// What `{name}` runs: an agent, or a workflow (`workflow:` prefixed, as Keel names them).
struct Target {
    agent: String,
    workflow: bool,
    /// Its answer is sent whole at the end: a workflow's result, a structured output.
    whole_answer: bool,
}

fn target(state: &AppState, name: &str) -> Result<Target, ApiError> {
    if let Some(agent) = state.runtime.workspace().agents.get(name) {
        return Ok(Target {
            agent: name.to_owned(),
            workflow: false,
            whole_answer: agent.output.is_some(),
        });
    }
    if state.runtime.workflows().contains_key(name) {
        return Ok(Target {
            agent: format!("{}{name}", keel_types::WORKFLOW_PREFIX),
            workflow: true,
            whole_answer: true,
        });
    }
    Err(ApiError::ResourceNotFound(format!(
        "no agent or workflow `{name}`"
    )))
}

/// Streams a run started by this request from its live events. After an interrupt the stream
/// has ended, and the run goes on (waiting for the decision) holding its admission place.
async fn live(
    mut handle: RunHandle,
    ticket: Ticket,
    sink: Sink,
    dialect: Arc<AguiDialect>,
    mut translator: Translator,
) {
    let mut flow = Flow::Go;
    while let Some(event) = handle.next_event().await {
        if flow == Flow::Go {
            // An approval asked now is pending: it was just asked.
            flow = translator.on_event(&event, &sink, |_| true);
        }
    }
    let response = handle.wait().await;
    drop(ticket);
    if flow == Flow::Go {
        sink.close(dialect.closing(response));
    }
}

/// Answers the interrupts in `input.resume` (approvals of one run) and streams the rest of
/// that run as a new AG-UI run.
async fn resume(
    state: AppState,
    principal: Principal,
    name: &str,
    target: &Target,
    input: RunAgentInput,
) -> Result<Response, ApiError> {
    let mut run_of: Option<RequestId> = None;
    let mut decided = Vec::with_capacity(input.resume.len());
    for (index, entry) in input.resume.iter().enumerate() {
        let approval = state
            .runtime
            .approvals()
            .get(&entry.interrupt_id)
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                ApiError::ResourceNotFound(format!(
                    "resume[{index}].interruptId: no interrupt `{}` (interrupt ids are approval ids)",
                    entry.interrupt_id
                ))
            })?;
        let run = visible_run(&state.runtime, &principal, &approval.request_id).await?;
        if run.agent != target.agent {
            return Err(bad_resume(format!(
                "resume[{index}]: interrupt `{}` belongs to a run of `{}`, not `{name}`",
                entry.interrupt_id, run.agent
            )));
        }
        if run_of.as_ref().is_some_and(|id| *id != approval.request_id) {
            return Err(bad_resume(format!(
                "resume[{index}]: the interrupts answered together must come from one run"
            )));
        }
        run_of = Some(approval.request_id.clone());
        let answer = entry.answer();
        decided.push((approval, answer));
    }
    let Some(request_id) = run_of else {
        return Err(bad_resume("`resume` is empty".into()));
    };
    // The stream goes on from the first approval answered (what followed it was not sent).
    let events = state
        .runtime
        .runs()
        .events(&request_id, 0)
        .await
        .map_err(internal)?;
    let after = events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::ApprovalRequested { approval }
                if decided
                    .iter()
                    .any(|(asked, _)| asked.approval_id == approval.approval_id) =>
            {
                Some(event.seq)
            }
            _ => None,
        })
        .min()
        .unwrap_or(0);
    for (approval, answer) in decided {
        if approval.status != ApprovalStatus::Pending {
            // Decided elsewhere meanwhile: that decision stands.
            continue;
        }
        let outcome = state
            .runtime
            .approvals()
            .decide(
                &approval.approval_id,
                answer.approve,
                answer.scope,
                DECIDER,
                answer.reason.as_deref(),
            )
            .await;
        if let Err(error) = outcome {
            // Decided elsewhere between the read and now: that decision stands too.
            tracing::debug!(%error, approval = %approval.approval_id, "an AG-UI resume found its approval decided");
        }
    }
    let ids = StreamIds {
        thread_id: input.thread_id.clone(),
        run_id: input.run_id.clone(),
        request_id: request_id.to_string(),
        whole_answer: target.whole_answer,
    };
    let dialect = Arc::new(AguiDialect { ids: ids.clone() });
    let stop = CancellationToken::new();
    let (response, sink) = frames_response(
        dialect.clone(),
        ids.request_id.clone(),
        stop.clone().drop_guard(),
    );
    let follower = Follower::new(state.clone(), request_id, after);
    let mut translator = Translator::new(ids);
    let earlier: Vec<keel::Event> = events.into_iter().filter(|e| e.seq <= after).collect();
    translator.announced(&earlier);
    tokio::spawn(follow(state, follower, sink, dialect, translator, stop));
    Ok(response)
}

/// Streams a run from the store (a resumed AG-UI run); the client going away (`stop`)
/// cancels the run, as it does for a run the stream started.
async fn follow(
    state: AppState,
    mut follower: Follower,
    sink: Sink,
    dialect: Arc<AguiDialect>,
    mut translator: Translator,
    stop: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            next = follower.next() => next,
            () = stop.cancelled() => {
                let id = RequestId::from(dialect.ids.request_id.clone());
                if let Err(error) = state.runtime.cancel(&id).await {
                    tracing::warn!(%error, "cancelling a run whose AG-UI client went away failed");
                }
                return;
            }
        };
        let event = match next {
            Some(Followed::Event(event)) => event,
            Some(Followed::Idle) => continue,
            None => break,
        };
        let pending = crate::follow::approval_pending(&state, &event).await;
        if translator.on_event(&event, &sink, |_| pending) == Flow::Ended {
            return;
        }
    }
    let id = RequestId::from(dialect.ids.request_id.clone());
    let response = state.runtime.runs().get(&id).await.ok().flatten();
    sink.close(
        dialect.closing(Err(keel::RuntimeError::Internal(match response {
            Some(run) => format!("its events ended while it was `{}`", json!(run.status)),
            None => "it is no longer in the store".into(),
        }))),
    );
}

/// An AG-UI run that ends at once with `RUN_ERROR` saying why.
fn refused_run(thread_id: &str, run_id: &str, message: &str) -> Response {
    let frames = [
        events::frame(&events::agui_event(
            "RUN_STARTED",
            json!({"threadId": thread_id, "runId": run_id}),
        )),
        events::frame(&events::agui_event(
            "RUN_ERROR",
            json!({"message": message, "code": "invalid_input"}),
        )),
    ];
    crate::requests::sse_response(futures_util::stream::iter(
        frames.map(Ok::<_, std::convert::Infallible>),
    ))
}

fn bad_resume(message: String) -> ApiError {
    ApiError::BadRequest {
        message,
        param: Some("resume"),
    }
}

/// An interrupt's answer, read from a `resume` entry.
pub(crate) struct Answer {
    approve: bool,
    scope: ApprovalScope,
    reason: Option<String>,
}
