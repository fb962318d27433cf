//! `Model.limits`: 50 concurrent runs against a model limited to 10 requests per window all
//! complete; the rounds past the limit waited, and said so (`runtime.model.queued`).

use keel::{EventPayload, RequestOptions, RunStatus, Runtime};
use keel_test_support::WorkspaceBuilder;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_past_a_models_rate_limit_wait_instead_of_failing() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a, limits: { maxConcurrentRuns: 64 } }")
        .model(
            "m",
            "{ provider: scripted, script: script.yaml, limits: { requests: 10, per: 1s, maxConcurrent: 4 } }",
        )
        .agent("a", "{ model: m }")
        .file(
            "script.yaml",
            serde_json::to_string(&json!({"conversations": [{"steps": [{"text": "done"}]}]}))
                .unwrap(),
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut handles = Vec::new();
    for i in 0..50 {
        handles.push(
            runtime
                .request(RequestOptions {
                    input: format!("task {i}"),
                    ..Default::default()
                })
                .await
                .unwrap(),
        );
    }
    let mut queued = 0;
    for handle in handles {
        let response = handle.wait().await.unwrap();
        assert_eq!(
            response.status,
            RunStatus::Completed,
            "{:?}",
            response.error
        );
        let events = runtime
            .runs()
            .events(&response.request_id, 0)
            .await
            .unwrap();
        queued += events
            .iter()
            .filter(|e| matches!(&e.payload, EventPayload::ModelQueued { model, wait_ms, .. } if model == "m" && *wait_ms > 0))
            .count();
    }
    // 50 rounds at 10 per window: the 40 past the first window wait when they all arrive
    // within it, at least 30 when a slow machine spreads them over two.
    assert!(queued >= 30, "{queued} rounds waited");
}
