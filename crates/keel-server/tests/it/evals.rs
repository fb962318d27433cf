//! Evals over HTTP: the workspace's evals listed with their newest result, one run waiting
//! and one in the background, results listed and shown with each case's run, and the errors
//! of an unknown eval, an unknown result and a bad body.

use keel_test_support::{MockLlm, MockResponse, WorkspaceBuilder};

use super::*;
use crate::routes::call;

#[tokio::test]
async fn an_eval_runs_over_http_and_its_result_links_each_case_to_its_run() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let input = request.last_content_of("user").unwrap_or("").to_owned();
        MockResponse::text([if input.contains("bye") {
            "Goodbye."
        } else {
            "Hello!"
        }])
    });
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .openai_model_at("m", &mock.base_url())
        .agent("a", "{ model: m }")
        .yaml(
            "apiVersion: keel/v1\nkind: Eval\nmetadata: { name: greet }\nspec:\n  target: { agent: a }\n  threshold: 0.5\n  graders: [ { kind: contains, value: Hello } ]\n  cases: [ { name: hi, input: say hi }, { name: bye, input: say bye } ]\n",
        )
        .build();
    let app = app(&ws);

    let (status, listed) = call(&app, "GET", "/api/evals", None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["data"][0]["name"], "greet");
    assert_eq!(listed["data"][0]["cases"], 2);
    assert_eq!(listed["data"][0]["latest"], Value::Null);

    let (status, result) = call(
        &app,
        "POST",
        "/api/evals/greet/run",
        Some(&json!({"wait": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "completed");
    assert_eq!(result["summary"]["passed"], 1);
    assert_eq!(result["summary"]["passedThreshold"], true);
    let hi = &result["cases"][0];
    assert_eq!(hi["case"], "hi");
    let run = hi["requestId"].as_str().unwrap();
    let (status, record) = call(&app, "GET", &format!("/api/requests/{run}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(record["output"], "Hello!");

    let (status, started) = call(&app, "POST", "/api/evals/greet/run", None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    assert_eq!(started["status"], "running");
    let id = started["id"].as_str().unwrap().to_owned();
    let ended = loop {
        let (status, shown) = call(&app, "GET", &format!("/api/evals/results/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        if shown["status"] != "running" {
            break shown;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(ended["summary"]["runs"], 2, "{ended}");

    let (_, results) = call(&app, "GET", "/api/evals/results?eval=greet&limit=5", None).await;
    let data = results["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["id"], id.as_str(), "newest first");
    assert!(
        data[0].get("cases").is_none(),
        "a list leaves out the cases"
    );
    let (_, listed) = call(&app, "GET", "/api/evals", None).await;
    assert_eq!(listed["data"][0]["latest"]["id"], id.as_str());

    let (status, missing) = call(&app, "POST", "/api/evals/nope/run", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    let (status, _) = call(&app, "GET", "/api/evals/results/evr_nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, bad) = call(
        &app,
        "POST",
        "/api/evals/greet/run",
        Some(&json!({"repeat": "twice"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let (status, bad) = call(
        &app,
        "POST",
        "/api/evals/greet/run",
        Some(&json!({"model": "nobody", "wait": true})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`nobody`"),
        "{bad}"
    );
    let (status, bad) = call(&app, "GET", "/api/evals/results?planet=mars", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}
