//! The route table's rows of the model-API facades — OpenAI's (`/v1/models`,
//! `/v1/capabilities`, `/v1/chat/completions`) and Anthropic's (`/v1/messages`) — and
//! `/api/usage`, what their runs used and cost.

use axum::http::Method;
use axum::routing;

use super::{Accepts, Access, Route, param, route};
use crate::{openai, requests};

/// The facades' routes and `/api/usage`.
pub(super) fn routes() -> Vec<Route> {
    use Access::Client;
    vec![
        route(
            Method::GET,
            "/v1/models",
            Client,
            "The workspace's agents as OpenAI models",
            "an OpenAI model list",
            || routing::get(openai::models),
        ),
        route(
            Method::GET,
            "/v1/capabilities",
            Client,
            "What this server offers (streaming, tools, progress opt-in, session header)",
            "a capabilities object",
            || routing::get(crate::capabilities),
        ),
        Route {
            body: Some(openai::fields::request_schema),
            ..route(
                Method::POST,
                "/v1/chat/completions",
                Client,
                "OpenAI Chat Completions; `model` is the agent. Headers: `X-Keel-Session` (a turn of that session), `X-Keel-Progress: true` (Keel events as SSE events named `keel`)",
                "`chat.completion`, or with `stream: true` SSE `chat.completion.chunk` frames ending with `[DONE]`",
                || routing::post(openai::chat_completions),
            )
        },
        Route {
            body: Some(crate::anthropic::request_schema),
            ..route(
                Method::POST,
                crate::anthropic::PATH,
                Client,
                "Anthropic Messages; `model` is the agent. Auth: `Authorization: Bearer` or `x-api-key`. Header `X-Keel-Session` (a turn of that session; `X-Keel-Progress` is refused: the SDKs fail on stream events they do not know). Errors in Anthropic's shape (`{type: error, error: {type, message}}`)",
                "a `message` with the answer as one text block, or with `stream: true` SSE events `message_start` … `message_stop`",
                || routing::post(crate::anthropic::messages),
            )
        },
        Route {
            query: const {
                &[
                    param(
                        "by",
                        Accepts::Format {
                            pattern: "^(agent|session|key|day)(,(agent|session|key|day))*$",
                            check: usage_groupings,
                        },
                        "group by agent (default), session, API key or UTC day, or by several separated by commas (`day,agent`)",
                    ),
                    param(
                        "since",
                        Accepts::Text,
                        "only runs started at or after this RFC 3339 time",
                    ),
                ]
            },
            ..route(
                Method::GET,
                "/api/usage",
                Client,
                "What runs used and cost (tokens, cache reads and writes, cost at the models' declared pricing), summed by agent, session, key or day, or by several (`by=day,agent`); client keys: their own runs",
                "`{data: [{group, groups?, runs, usage}]}` (`groups`: each grouping's value, when by several)",
                || routing::get(requests::usage),
            )
        },
    ]
}

/// `by` of `/api/usage`: one grouping or several, separated by commas.
fn usage_groupings(value: &str) -> bool {
    !value.contains(' ') && keel::UsageBy::parse_list(value).is_ok()
}
