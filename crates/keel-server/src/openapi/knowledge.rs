//! The route table's rows of what agents know and do: skills (`/api/skills…`), workflows
//! (`/api/workflows…`), memory (`/api/memory…`) and evals (`/api/evals…`), operator keys.

use axum::http::Method;
use axum::routing;

use super::{Accepts, Access, Route, SKILL_NAME, param, route, schema};
use crate::{evals, memory, skills, workflows};

/// The `/api/skills…`, `/api/workflows…` and `/api/memory…` routes.
pub(super) fn routes() -> Vec<Route> {
    use Access::Operator;
    vec![
        route(
            Method::GET,
            "/api/evals",
            Operator,
            "The workspace's evals, each with the summary of its newest result",
            "`{data: [{name, description, target, cases, graders, passScore, threshold, version, latest?}]}`",
            || routing::get(evals::list_evals),
        ),
        Route {
            body: Some(schema::<evals::RunEval>),
            body_optional: true,
            ..route(
                Method::POST,
                "/api/evals/{name}/run",
                Operator,
                "Run an eval: each case a recorded run, graded as it ends; the result is stored",
                "202 `{id, status: running}`, or with `wait: true` 200 and the EvalResult; 404 for an unknown eval",
                || routing::post(evals::run_eval),
            )
        },
        Route {
            query: const {
                &[
                    param("eval", Accepts::Text, "only results of this eval"),
                    param("limit", super::page(1000), "how many (default 20)"),
                ]
            },
            ..route(
                Method::GET,
                "/api/evals/results",
                Operator,
                "Stored eval results, newest first, without their cases",
                "`{data: [EvalResult without cases]}`",
                || routing::get(evals::list_results),
            )
        },
        route(
            Method::GET,
            "/api/evals/results/{id}",
            Operator,
            "An eval result: every case with its graders and the run it was (`requestId`)",
            "the EvalResult; 404 for an unknown id",
            || routing::get(evals::get_result),
        ),
        route(
            Method::GET,
            "/api/workflows",
            Operator,
            "The workspace's workflows",
            "`{data: [{name, description, nodes, phases}]}`",
            || routing::get(workflows::list_workflows),
        ),
        Route {
            path_param: Accepts::Text,
            ..route(
                Method::GET,
                "/api/workflows/{name}",
                Operator,
                "A workflow: its nodes, edges and phases, and its graph as a Mermaid flowchart",
                "`{name, spec, mermaid}`",
                || routing::get(workflows::get_workflow),
            )
        },
        Route {
            query: const {
                &[param(
                    "agent",
                    Accepts::Text,
                    "only the skills this agent may use",
                )]
            },
            ..route(
                Method::GET,
                "/api/skills",
                Operator,
                "The workspace's skills (latest scan), the problems of the broken ones and the overridden ones",
                "`{data: [{name, description, file, extra?, alwaysOn?}], problems, overridden}`",
                || routing::get(skills::list_skills),
            )
        },
        Route {
            path_param: SKILL_NAME,
            ..route(
                Method::GET,
                "/api/skills/{name}",
                Operator,
                "A skill: its front matter, the files of its folder and its instructions",
                "`{name, description, file, extra?, files: [{path, bytes}], body}`",
                || routing::get(skills::get_skill),
            )
        },
        Route {
            query: const {
                &[
                    param("namespace", Accepts::Text, "only this namespace"),
                    param("all", Accepts::Boolean, "closed versions too"),
                    param(
                        "limit",
                        Accepts::Integer {
                            min: 1,
                            max: 10_000,
                        },
                        "at most this many (default 100)",
                    ),
                ]
            },
            ..route(
                Method::GET,
                "/api/memory",
                Operator,
                "Memory records, newest first",
                "`{data: [MemoryRecord]}`",
                || routing::get(memory::list),
            )
        },
        Route {
            body: Some(schema::<memory::NewRecord>),
            ..route(
                Method::POST,
                "/api/memory",
                Operator,
                "Store a memory record (the operator is its approval)",
                "201 and the MemoryRecord; 400 for an unknown namespace or a text too long",
                || routing::post(memory::add),
            )
        },
        Route {
            query: const {
                &[
                    param(
                        "q",
                        Accepts::Text,
                        "what to look for (none: nothing is found)",
                    ),
                    param("namespace", Accepts::Text, "only this namespace"),
                    param(
                        "limit",
                        Accepts::Integer { min: 1, max: 100 },
                        "at most this many (default 10)",
                    ),
                ]
            },
            ..route(
                Method::GET,
                "/api/memory/search",
                Operator,
                "Search memory as recall ranks it (full-text, or hybrid with embeddings)",
                "`{data: [{record, textScore?, similarity?, score}]}`",
                || routing::get(memory::search),
            )
        },
        route(
            Method::GET,
            "/api/memory/candidates",
            Operator,
            "Memory candidates waiting for a person (decide them at /api/approvals/{id})",
            "`{data: [ApprovalRecord]}`",
            || routing::get(memory::candidates),
        ),
        Route {
            body: Some(schema::<memory::Maintain>),
            body_optional: true,
            ..route(
                Method::POST,
                "/api/memory/maintain",
                Operator,
                "Expire records past their TTL and merge duplicates, recorded as a run",
                "`{requestId, merged, expired}`",
                || routing::post(memory::maintain),
            )
        },
        Route {
            query: const { &[param("namespace", Accepts::Text, "only this namespace")] },
            ..route(
                Method::GET,
                "/api/memory/export",
                Operator,
                "Every version of every record as JSONL",
                "`application/x-ndjson`, one MemoryRecord per line",
                || routing::get(memory::export),
            )
        },
        route(
            Method::POST,
            "/api/memory/import",
            Operator,
            "Import an export (JSONL body); all or nothing",
            "`{imported}`; 400 naming the first bad line",
            || routing::post(memory::import),
        ),
        route(
            Method::GET,
            "/api/memory/{id}",
            Operator,
            "A memory record (its latest version)",
            "the MemoryRecord; 404 for an unknown id",
            || routing::get(memory::show),
        ),
        Route {
            body: Some(schema::<memory::Change>),
            ..route(
                Method::PATCH,
                "/api/memory/{id}",
                Operator,
                "Update a record: a new version (the old one is kept)",
                "the new MemoryRecord",
                || routing::patch(memory::update),
            )
        },
        route(
            Method::DELETE,
            "/api/memory/{id}",
            Operator,
            "Delete a record (its history stays)",
            "the closed MemoryRecord",
            || routing::delete(memory::delete),
        ),
        route(
            Method::GET,
            "/api/memory/{id}/history",
            Operator,
            "Every version of a record, oldest first",
            "`{data: [MemoryRecord]}`",
            || routing::get(memory::history),
        ),
    ]
}
