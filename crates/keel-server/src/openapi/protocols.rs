//! The route table's rows of the agent protocols Keel speaks over HTTP besides the model-API
//! facades: AG-UI (`/api/agui/{name}`) and A2A (`/a2a/{agent}` and the agent cards).

use axum::http::Method;
use axum::routing;

use super::{Access, Route, route, schema};

/// The protocols' routes.
pub(super) fn routes() -> Vec<Route> {
    use Access::{Client, Public};
    vec![
        route(
            Method::GET,
            "/.well-known/agent-card.json",
            Public,
            "A2A: the default agent's Agent Card",
            "an A2A 1.0 `AgentCard` (JSON-RPC interface at `/a2a/{agent}`; the bearer scheme when keys are configured)",
            || routing::get(crate::a2a::default_card),
        ),
        route(
            Method::GET,
            "/a2a/{agent}/.well-known/agent-card.json",
            Public,
            "A2A: an agent's Agent Card",
            "an A2A 1.0 `AgentCard`",
            || routing::get(crate::a2a::card),
        ),
        Route {
            body: Some(crate::a2a::request_schema),
            ..route(
                Method::POST,
                "/a2a/{agent}",
                Client,
                "A2A 1.0 JSON-RPC: SendMessage, SendStreamingMessage (SSE), GetTask, CancelTask, SubscribeToTask (SSE), ListTasks. A task is a run of `agent`, its context the run's session; a run waiting on an approval is TASK_STATE_INPUT_REQUIRED and a message to the task (`approve`/`deny`) decides it",
                "a JSON-RPC 2.0 response (HTTP 200, errors included), or SSE of JSON-RPC responses whose results are `StreamResponse`s",
                || routing::post(crate::a2a::rpc),
            )
        },
        Route {
            body: Some(schema::<crate::agui::RunAgentInput>),
            ..route(
                Method::POST,
                "/api/agui/{name}",
                Client,
                "AG-UI: run agent or workflow `name` from AG-UI's `RunAgentInput` (the last message is the input; `resume` answers the approval interrupts the previous run ended with); docs/protocols.md maps the events",
                "SSE of AG-UI events: `RUN_STARTED`, steps (model rounds, workflow nodes), text messages, tool calls and results, `STATE_SNAPSHOT` (workflows), then `RUN_FINISHED` (outcome `success`, `interrupt` for a human approval, or `cancelled`) or `RUN_ERROR`",
                || routing::post(crate::agui::run),
            )
        },
    ]
}
