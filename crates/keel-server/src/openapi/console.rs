//! The route table's rows of the web console: its page and assets and its sign-in
//! (`/console…`, public: the page holds no data, and sign-in is how a key becomes a session;
//! left out of the OpenAPI document, which describes the API); `GET /api/overview`, the
//! figures its first page shows; and resuming and forking a run (operator keys).

use axum::http::Method;
use axum::routing;

use super::{Access, Route, route, schema};
use crate::{branches, console};

/// The `/console…` routes and `/api/overview`.
pub(super) fn routes() -> Vec<Route> {
    use Access::{Operator, Public};
    let page = |method, path, summary, answers, handler| Route {
        documented: false,
        ..route(method, path, Public, summary, answers, handler)
    };
    vec![
        page(
            Method::GET,
            "/console",
            "The web console",
            "the page",
            || routing::get(console::index),
        ),
        page(
            Method::GET,
            "/console/{file}",
            "The console's scripts, style sheet and icon",
            "the file; 404 for another name",
            || routing::get(console::file),
        ),
        page(
            Method::GET,
            "/favicon.ico",
            "The console's icon",
            "SVG",
            || routing::get(console::favicon),
        ),
        Route {
            body: Some(schema::<console::Login>),
            ..page(
                Method::POST,
                "/console/login",
                "Sign in with an operator key: an HttpOnly session cookie and its CSRF token",
                "`{authRequired, csrf}`",
                || routing::post(console::login),
            )
        },
        Route {
            body_optional: true,
            ..page(Method::POST, "/console/logout", "Sign out", "204", || {
                routing::post(console::logout)
            })
        },
        page(
            Method::GET,
            "/console/session",
            "Whether the console needs a sign-in, and the session's CSRF token",
            "`{authRequired, signedIn, csrf?}`",
            || routing::get(console::session),
        ),
        Route {
            body: Some(schema::<branches::ResumeBody>),
            body_optional: true,
            ..route(
                Method::POST,
                "/api/requests/{id}/resume",
                Operator,
                "Continue an interrupted request from its log",
                "202 `{requestId}` or the RunResponse; 400 unless the run is interrupted",
                || routing::post(branches::resume_request),
            )
        },
        Route {
            body: Some(schema::<branches::ForkBody>),
            ..route(
                Method::POST,
                "/api/requests/{id}/fork",
                Operator,
                "Start a new request from a request's first `atSeq` events (`links.forkedFrom`)",
                "202 `{requestId}` or the RunResponse",
                || routing::post(branches::fork_request),
            )
        },
        route(
            Method::GET,
            "/api/overview",
            Operator,
            "What the console's first page shows: runs by status, live runs, pending approvals, the error rate of ended runs, model and tool latency, agents and workflows",
            "`{runs: {status: count}, live, pendingApprovals, errorRate, latency: {models, tools}, agents, workflows}`",
            || routing::get(console::overview),
        ),
    ]
}
