//! Workflows over HTTP: listed as `/v1` models (`workflow/<name>`) and under
//! `/api/workflows`, run through `POST /api/requests` (`workflow`) and
//! `/v1/chat/completions`, and a run's tree through `GET /api/requests/{id}?tree=true`.

use keel_test_support::workflows::triage_workspace;
use keel_test_support::{MockLlm, MockResponse};

use super::*;

async fn call(app: &Router, method: &str, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    let (status, _, bytes) = send(app.clone(), request_with(method, uri, None, body)).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

#[tokio::test]
async fn workflows_are_models_routes_and_requests() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text([r#"{"severity": "low"}"#]));
    let ws = triage_workspace(&mock.base_url()).build();
    let app = app(&ws);

    let (status, models) = call(&app, "GET", "/v1/models", None).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["classifier", "workflow/notify", "workflow/triage"]);

    let (status, listed) = call(&app, "GET", "/api/workflows", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"][1]["name"], "triage");
    assert_eq!(listed["data"][1]["nodes"], 7);
    let (status, shown) = call(&app, "GET", "/api/workflows/triage", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        shown["mermaid"]
            .as_str()
            .unwrap()
            .starts_with("flowchart TD")
    );
    assert_eq!(shown["spec"]["nodes"][0]["id"], "plan");
    let (status, _) = call(&app, "GET", "/api/workflows/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let body = json!({"workflow": "triage", "input": r#"{"ticket": "T-3"}"#, "wait": true});
    let (status, response) = call(&app, "POST", "/api/requests", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["status"], "completed");
    assert_eq!(
        response["value"],
        json!({"low": {"classify": {"severity": "low"}}})
    );
    let id = response["requestId"].as_str().unwrap();
    let (status, record) = call(&app, "GET", &format!("/api/requests/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(record["agent"], "workflow/triage");
    assert!(record.get("children").is_none());
    let (status, tree) = call(&app, "GET", &format!("/api/requests/{id}?tree=true"), None).await;
    assert_eq!(status, StatusCode::OK);
    // classify (tool calls are in the workflow's own log).
    let children = tree["children"].as_array().unwrap();
    assert_eq!(children.len(), 1);
    assert!(
        children
            .iter()
            .all(|c| c["links"]["parentId"] == id && c["links"]["rootId"] == id)
    );

    // The trace: the workflow's span, a span per node, the agent node's run under its node.
    let (status, trace) = call(&app, "GET", &format!("/api/requests/{id}/trace"), None).await;
    assert_eq!(status, StatusCode::OK, "{trace}");
    let spans = trace["spans"].as_array().unwrap();
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}` in {trace:#}"))
    };
    let root = named("invoke_workflow triage");
    assert_eq!(root["attributes"]["gen_ai.workflow.name"], "triage");
    let node = named("keel.workflow.node classify");
    assert_eq!(node["parentSpanId"], root["spanId"]);
    assert_eq!(node["attributes"]["keel.workflow.node.state"], "completed");
    let child = spans
        .iter()
        .find(|s| {
            s["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("invoke_agent"))
        })
        .unwrap();
    assert_eq!(child["parentSpanId"], node["spanId"], "{trace:#}");
    assert!(spans.iter().all(|s| s["traceId"] == trace["traceId"]));

    let chat = json!({"model": "workflow/notify", "messages": [{"role": "user", "content": r#"{"ticket": "T-4"}"#}]});
    let (status, completion) = call(&app, "POST", "/v1/chat/completions", Some(&chat)).await;
    assert_eq!(status, StatusCode::OK, "{completion}");
    assert_eq!(
        completion["choices"][0]["message"]["content"],
        r#"{"recorded":true}"#
    );
    // Streamed, the result comes whole before the finish chunk.
    let streamed = json!({"model": "workflow/notify", "stream": true, "messages": [{"role": "user", "content": r#"{"ticket": "T-5"}"#}]});
    let (status, _, bytes) = send(
        app.clone(),
        request_with("POST", "/v1/chat/completions", None, Some(&streamed)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let body = String::from_utf8(bytes).unwrap();
    assert!(
        body.contains(r#""content":"{\"recorded\":true}""#),
        "{body}"
    );
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    let effects = std::fs::read_to_string(ws.join("effects.log")).unwrap();
    assert!(effects.contains("notify T-4"), "{effects}");
    assert!(effects.contains("notify T-5"), "{effects}");
}

#[tokio::test]
async fn bad_workflow_requests_are_refused_with_what_is_wrong() {
    let mock = MockLlm::start().await;
    let ws = triage_workspace(&mock.base_url()).build();
    let app = app(&ws);
    let both = json!({"workflow": "notify", "agent": "classifier", "input": "x"});
    let (status, body) = call(&app, "POST", "/api/requests", Some(&both)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{body}"
    );
    let unknown = json!({"workflow": "nope", "input": "x"});
    let (status, _) = call(&app, "POST", "/api/requests", Some(&unknown)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let bad_input = json!({"workflow": "notify", "input": "not json"});
    let (status, body) = call(&app, "POST", "/api/requests", Some(&bad_input)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be JSON"),
        "{body}"
    );
    let history = json!({"model": "workflow/notify", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": r#"{"ticket": "T"}"#}
    ]});
    let (status, body) = call(&app, "POST", "/v1/chat/completions", Some(&history)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("one user message"),
        "{body}"
    );
    let (status, _) = call(
        &app,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": "workflow/nope", "messages": [{"role": "user", "content": "x"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_streamed_structured_answer_carries_only_the_answer_that_matched() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Probably ", "low."]));
    mock.push(MockResponse::text([r#"{"severity": "low"}"#]));
    let ws = triage_workspace(&mock.base_url()).build();
    let app = app(&ws);
    let streamed = json!({"model": "classifier", "stream": true, "messages": [{"role": "user", "content": "Classify T-6"}]});
    let (status, _, bytes) = send(
        app.clone(),
        request_with("POST", "/v1/chat/completions", None, Some(&streamed)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let body = String::from_utf8(bytes).unwrap();
    assert!(
        !body.contains("Probably"),
        "a rejected answer leaked: {body}"
    );
    assert!(body.contains(r#"{\"severity\": \"low\"}"#), "{body}");
    assert_eq!(mock.request_count(), 2);
}
