//! The route table's rows of the agent protocols Keel speaks over HTTP besides the model-API
//! facades: AG-UI (`/api/agui/{name}`).

use axum::http::Method;
use axum::routing;

use super::{Access, Route, route, schema};

/// The protocols' routes.
pub(super) fn routes() -> Vec<Route> {
    use Access::Client;
    vec![Route {
        body: Some(schema::<crate::agui::RunAgentInput>),
        ..route(
            Method::POST,
            "/api/agui/{name}",
            Client,
            "AG-UI: run agent or workflow `name` from AG-UI's `RunAgentInput` (the last message is the input; `resume` answers the approval interrupts the previous run ended with); docs/protocols.md maps the events",
            "SSE of AG-UI events: `RUN_STARTED`, steps (model rounds, workflow nodes), text messages, tool calls and results, `STATE_SNAPSHOT` (workflows), then `RUN_FINISHED` (outcome `success`, `interrupt` for a human approval, or `cancelled`) or `RUN_ERROR`",
            || routing::post(crate::agui::run),
        )
    }]
}
