//! Eval results on both stores (contract tests): saved while running and replaced when ended,
//! read back exactly (text with a NUL character too), listed newest first by eval with a
//! limit, kept across a reopen.

use keel_types::eval::{CaseResult, EvalOptions, EvalResult, EvalStatus, GraderResult};

use crate::backends::Backend;

fn result(id: &str, eval: &str, started_at: &str) -> EvalResult {
    EvalResult {
        id: id.into(),
        eval: eval.into(),
        version: "sha256:v1".into(),
        workspace_digest: "sha256:ws".into(),
        target: "support".into(),
        status: EvalStatus::Running,
        started_at: started_at.into(),
        ended_at: None,
        owner: Some("ci".into()),
        options: EvalOptions {
            concurrency: 4,
            repeat: 1,
            model: None,
            replay: false,
        },
        pass_score: 1.0,
        threshold: 0.9,
        cases: Vec::new(),
        summary: None,
        error: None,
    }
}

async fn eval_results_are_replaced_listed_newest_first_and_kept(backend: &Backend) {
    let store = backend.runs();
    let mut first = result("evr_1", "support", "2026-11-29T10:00:00.000Z");
    store.save_eval_result(&first).await.unwrap();
    store
        .save_eval_result(&result("evr_2", "support", "2026-11-29T11:00:00.000Z"))
        .await
        .unwrap();
    store
        .save_eval_result(&result("evr_3", "triage", "2026-11-29T12:00:00.000Z"))
        .await
        .unwrap();
    assert_eq!(
        store.get_eval_result("evr_1").await.unwrap().unwrap(),
        first
    );

    // Ended: the same id, replaced whole.
    first.status = EvalStatus::Completed;
    first.ended_at = Some("2026-11-29T10:05:00.000Z".into());
    first.cases.push(CaseResult {
        case: "late-return".into(),
        index: 0,
        attempt: 0,
        request_id: Some("run_1".into()),
        status: "completed".into(),
        score: 0.5,
        passed: false,
        error: None,
        latency_ms: 812,
        cost: 0.0021,
        currency: Some("USD".into()),
        tokens: 1840,
        steps: 2,
        graders: vec![GraderResult {
            name: "contains".into(),
            kind: "contains".into(),
            weight: 1.0,
            score: Some(0.0),
            passed: false,
            detail: "does not contain `30\u{0} days`".into(),
            error: None,
            reasoning: None,
        }],
        divergence: None,
    });
    store.save_eval_result(&first).await.unwrap();
    assert_eq!(
        store.get_eval_result("evr_1").await.unwrap().unwrap(),
        first
    );
    assert!(store.get_eval_result("evr_9").await.unwrap().is_none());

    let ids = |results: Vec<EvalResult>| results.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.list_eval_results(None, 10).await.unwrap()),
        ["evr_3", "evr_2", "evr_1"]
    );
    assert_eq!(
        ids(store.list_eval_results(Some("support"), 10).await.unwrap()),
        ["evr_2", "evr_1"]
    );
    assert_eq!(
        ids(store.list_eval_results(Some("support"), 1).await.unwrap()),
        ["evr_2"]
    );
    assert!(
        store
            .list_eval_results(Some("nope"), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let reopened = backend.reopen().await;
    assert_eq!(
        reopened.get_eval_result("evr_1").await.unwrap().unwrap(),
        first
    );
}

crate::contract!(eval_results_are_replaced_listed_newest_first_and_kept);
