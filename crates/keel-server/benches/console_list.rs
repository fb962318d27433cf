//! What the console's busiest views cost the server with 10,000 stored runs: the requests list
//! (first page, the next page by cursor, filtered by status and by agent) and the overview
//! (runs by status, pending approvals, the last hour by minute — here every run is in it),
//! each asked 200 times through the router in-process, so the figures are server time
//! (routing, auth, the store's query, JSON) without a network.
//! Prints the median and p99 per view. Target: under 200 ms for the list page.
//!
//! ```sh
//! cargo bench -p keel-server --bench console_list    # KEEL_BENCH_RUNS=N (10000)
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use keel_types::RunLog;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use keel::{RequestId, RunRecord, RunStatus};
use keel_store::SqliteStore;
use keel_test_support::WorkspaceBuilder;
use serde_json::Value;
use tower::ServiceExt;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &serde_json::json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
        )
        .agent("assistant", "{ model: m }")
        .agent("helper", "{ model: m }")
        .build();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Arc::new(SqliteStore::open(ws.path()).unwrap());
        // Fill the store: runs of two agents, most completed, some failed or running.
        let started = Instant::now();
        let writers: Vec<_> = (0..64)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in (w..runs).step_by(64) {
                        let agent = if i % 3 == 0 { "helper" } else { "assistant" };
                        let mut run =
                            RunRecord::new(RequestId::generate(), None, agent, format!("task {i}"));
                        store.create_run(&run).await.unwrap();
                        run.status = match i % 10 {
                            0 => RunStatus::Failed,
                            1 => RunStatus::Running,
                            _ => RunStatus::Completed,
                        };
                        run.output = Some(format!("answer {i}"));
                        store.update_run(&run).await.unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        println!(
            "console_list: {runs} runs stored in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let runtime = keel::Runtime::builder()
            .workspace(ws.path())
            .store(store.clone())
            .build()
            .unwrap();
        let app = keel_server::router(runtime);
        let get = |uri: String| {
            let app = app.clone();
            async move {
                let response = app
                    .oneshot(Request::get(uri.as_str()).body(Body::empty()).unwrap())
                    .await
                    .unwrap();
                assert_eq!(response.status(), StatusCode::OK, "{uri}");
                let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                    .await
                    .unwrap();
                serde_json::from_slice::<Value>(&bytes).unwrap()
            }
        };
        let first = get("/api/requests?limit=50".into()).await;
        let cursor = first["nextCursor"].as_str().unwrap().to_owned();
        let views = [
            (
                "list, first page of 50",
                "/api/requests?limit=50".to_owned(),
            ),
            (
                "list, next page by cursor",
                format!("/api/requests?limit=50&cursor={cursor}"),
            ),
            (
                "list, status=failed",
                "/api/requests?limit=50&status=failed".to_owned(),
            ),
            (
                "list, agent=helper",
                "/api/requests?limit=50&agent=helper".to_owned(),
            ),
            ("overview", "/api/overview".to_owned()),
        ];
        for (name, uri) in views {
            let mut times = Vec::with_capacity(200);
            for _ in 0..200 {
                let start = Instant::now();
                get(uri.clone()).await;
                times.push(start.elapsed());
            }
            times.sort();
            println!(
                "  {name}: p50 {:.2} ms, p99 {:.2} ms",
                percentile(&times, 0.5).as_secs_f64() * 1e3,
                percentile(&times, 0.99).as_secs_f64() * 1e3
            );
        }
    });
}
