//! The operator API under `/api` and `/v1/capabilities`, without auth.

use keel_types::{ApprovalStore, RunLog};
use std::sync::Arc;

use keel::{ApprovalRecord, RequestId, RunRecord};
use keel_store::SqliteStore;

use super::*;

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn post_to(uri: &str, body: &Value) -> Request<Body> {
    Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn send_json(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let (status, _, body) = send(app.clone(), request).await;
    (status, serde_json::from_slice(&body).unwrap())
}

/// Starts a run with `wait: true` and returns its request id.
async fn finished_run(app: &Router) -> String {
    let (status, value) = send_json(
        app,
        post_to("/api/requests", &json!({"input": "Hi", "wait": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    value["requestId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn capabilities_are_listed() {
    let ws = workspace();
    let (status, value) = send_json(&app(&ws), get("/v1/capabilities")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        value,
        json!({
            "object": "capabilities",
            "streaming": true,
            "tools": "workspace",
            "progressEvents": true,
            "progressHeader": "x-keel-progress",
            "sessionHeader": "x-keel-session",
        })
    );
}

#[tokio::test]
async fn create_and_wait_answers_the_run_response() {
    let ws = workspace();
    let (status, value) = send_json(
        &app(&ws),
        post_to(
            "/api/requests",
            &json!({"input": "Hi", "agent": "assistant", "wait": true}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["status"], "completed");
    assert_eq!(value["output"], "Hello there");
    assert!(value["requestId"].is_string());
}

#[tokio::test]
async fn create_async_is_202_and_the_run_completes() {
    let ws = workspace();
    let app = app(&ws);
    let (status, value) = send_json(&app, post_to("/api/requests", &json!({"input": "Hi"}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{value}");
    let id = value["requestId"].as_str().unwrap().to_owned();
    let mut record = Value::Null;
    for _ in 0..200 {
        let (status, value) = send_json(&app, get(&format!("/api/requests/{id}"))).await;
        assert_eq!(status, StatusCode::OK, "{value}");
        record = value;
        if record["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["output"], "Hello there");
}

#[tokio::test]
async fn bad_create_bodies_are_400() {
    let ws = workspace();
    let app = app(&ws);
    for body in [
        json!({}),
        json!({"input": 3}),
        json!({"input": "Hi", "wait": "yes"}),
    ] {
        let (status, value) = send_json(&app, post_to("/api/requests", &body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_error(
            &serde_json::to_vec(&value).unwrap(),
            "invalid_request_error",
        );
    }
}

#[tokio::test]
async fn list_filters_and_get_unknown_is_404() {
    let ws = workspace();
    let app = app(&ws);
    let id = finished_run(&app).await;
    let (status, value) = send_json(
        &app,
        get("/api/requests?status=completed&agent=assistant&limit=10"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let data = value["data"].as_array().unwrap();
    assert!(
        data.iter().any(|r| r["requestId"] == id.as_str()),
        "{value}"
    );
    let (status, value) = send_json(&app, get("/api/requests?status=failed")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["data"], json!([]));
    let (status, _) = send_json(&app, get("/api/requests?status=bogus")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, value) = send_json(&app, get("/api/requests/run_nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(
        &serde_json::to_vec(&value).unwrap(),
        "invalid_request_error",
    );
}

#[tokio::test]
async fn events_page_and_cancel_of_a_finished_run() {
    let ws = workspace();
    let app = app(&ws);
    let id = finished_run(&app).await;
    let (status, value) = send_json(&app, get(&format!("/api/requests/{id}/events"))).await;
    assert_eq!(status, StatusCode::OK);
    let all = value["data"].as_array().unwrap().clone();
    assert!(all.len() > 3, "{value}");
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    let (_, value) = send_json(&app, get(&format!("/api/requests/{id}/events?after=2"))).await;
    assert_eq!(value["data"].as_array().unwrap()[0]["seq"], 3);

    let (status, value) = send_json(
        &app,
        post_to(&format!("/api/requests/{id}/cancel"), &json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value, json!({"cancelled": false}));
    let (status, _) = send_json(&app, post_to("/api/requests/run_nope/cancel", &json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sse_resumes_after_last_event_id() {
    let ws = workspace();
    let app = app(&ws);
    let id = finished_run(&app).await;
    let (_, page) = send_json(&app, get(&format!("/api/requests/{id}/events"))).await;
    let expected: Vec<u64> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .filter(|seq| *seq >= 4)
        .collect();
    let request = Request::get(format!("/api/requests/{id}/events"))
        .header(header::ACCEPT, "text/event-stream")
        .header("Last-Event-ID", "3")
        .body(Body::empty())
        .unwrap();
    let (status, content_type, body) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let text = String::from_utf8(body).unwrap();
    let frames: Vec<&str> = text.split("\n\n").filter(|f| !f.is_empty()).collect();
    let mut seqs = Vec::new();
    let mut last_type = String::new();
    for frame in &frames {
        let mut id_line = None;
        let mut data = None;
        for line in frame.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id_line = Some(v.parse::<u64>().unwrap());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str::<Value>(v).unwrap());
            } else if let Some(v) = line.strip_prefix("event: ") {
                last_type = v.to_owned();
            }
        }
        let data = data.unwrap();
        assert_eq!(data["seq"].as_u64(), id_line, "{frame}");
        seqs.push(id_line.unwrap());
    }
    assert_eq!(seqs, expected, "{text}");
    assert_eq!(last_type, "runtime.request.completed", "{text}");
}

#[tokio::test]
async fn sse_follows_a_live_run_to_its_end() {
    let ws = workspace();
    let app = app(&ws);
    let (_, value) = send_json(&app, post_to("/api/requests", &json!({"input": "Hi"}))).await;
    let id = value["requestId"].as_str().unwrap();
    let request = Request::get(format!("/api/requests/{id}/events"))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with("id: 1\n"), "{text}");
    assert!(
        text.trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap()
            .contains("event: runtime.request.completed"),
        "{text}"
    );
}

fn pending(request_id: &RequestId) -> ApprovalRecord {
    keel_test_support::fixtures::approval(request_id, "assistant")
}

#[tokio::test]
async fn approvals_are_listed_and_decided_once() {
    let ws = workspace();
    let store = Arc::new(SqliteStore::open(ws.path()).unwrap());
    let run = RunRecord::new(RequestId::generate(), None, "assistant", "deploy please");
    store.create_run(&run).await.unwrap();
    let first = pending(&run.request_id);
    let second = pending(&run.request_id);
    store.create_approval(&first).await.unwrap();
    store.create_approval(&second).await.unwrap();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .store(store)
        .build()
        .unwrap();
    let app = keel_server::router(runtime);

    let (status, value) = send_json(&app, get("/api/approvals?status=pending")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["data"].as_array().unwrap().len(), 2, "{value}");

    let approve = format!("/api/approvals/{}/approve", first.approval_id);
    let (status, value) =
        send_json(&app, post_to(&approve, &json!({"reason": "looks fine"}))).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["status"], "approved");
    assert_eq!(value["decisionReason"], "looks fine");
    let (status, value) = send_json(&app, post_to(&approve, &json!({}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was already approved"),
        "{value}"
    );

    // Deny with an empty body.
    let deny = Request::post(format!("/api/approvals/{}/deny", second.approval_id))
        .body(Body::empty())
        .unwrap();
    let (status, value) = send_json(&app, deny).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["status"], "denied");

    let (_, value) = send_json(&app, get("/api/approvals?status=pending")).await;
    assert_eq!(value["data"], json!([]));
    let (status, _) = send_json(&app, post_to("/api/approvals/apr_nope/deny", &json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_mention_of_an_unknown_skill_is_a_bad_request_on_both_apis() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello there"}]}]}),
        )
        .agent("assistant", "{ model: m, skills: [release-notes] }")
        .file(
            "resources/skills/release-notes/SKILL.md",
            "---\nname: release-notes\ndescription: Write release notes.\n---\nGroup by kind.\n",
        )
        .build();
    let app = app(&ws);

    let (status, value) = send_json(
        &app,
        post_to(
            "/api/requests",
            &json!({"input": "Use $deploy", "wait": true}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(message.contains("no skill `deploy`"), "{value}");

    let (status, value) = send_json(
        &app,
        post_to(
            "/v1/chat/completions",
            &json!({"model": "assistant", "messages": [{"role": "user", "content": "Use $deploy"}]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no skill `deploy`"),
        "{value}"
    );

    let (status, value) = send_json(
        &app,
        post_to(
            "/api/requests",
            &json!({"input": "Use $release-notes", "wait": true}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
}

/// A workspace with two skills, one of which agent `assistant` may use.
fn skills_workspace() -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant, skills: { refreshInterval: 20ms } }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello there"}]}]}),
        )
        .agent(
            "assistant",
            "{ model: m, skills: [\"release-*\"], alwaysOnSkills: [release-notes] }",
        )
        .file(
            "resources/skills/release-notes/SKILL.md",
            "---\nname: release-notes\ndescription: Write release notes.\nlicense: MIT\n---\nGroup by kind.\n",
        )
        .file("resources/skills/release-notes/references/style.md", "Be brief.\n")
        .file(
            "resources/skills/ops-oncall/SKILL.md",
            "---\nname: ops-oncall\ndescription: The on-call rotation.\n---\nPage the secondary.\n",
        )
        .build()
}

#[tokio::test]
async fn skills_are_listed_filtered_by_agent_and_shown_with_their_files_and_body() {
    let ws = skills_workspace();
    let app = app(&ws);

    let (status, value) = send_json(&app, get("/api/skills")).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let names: Vec<&str> = value["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ops-oncall", "release-notes"]);
    assert_eq!(value["data"][1]["extra"], json!({"license": "MIT"}));
    assert_eq!(
        value["data"][1]["file"],
        "resources/skills/release-notes/SKILL.md"
    );
    assert_eq!(value["problems"], json!([]));

    let (status, value) = send_json(&app, get("/api/skills?agent=assistant")).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["data"].as_array().unwrap().len(), 1, "{value}");
    assert_eq!(value["data"][0]["alwaysOn"], true);
    let (status, _) = send_json(&app, get("/api/skills?agent=nobody")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, value) = send_json(&app, get("/api/skills/release-notes")).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["body"], "Group by kind.");
    assert_eq!(
        value["files"],
        json!([{"path": "references/style.md", "bytes": 10}])
    );
    let (status, _) = send_json(&app, get("/api/skills/deploy")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send_json(&app, get("/api/skills/Not_A_Name")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_skill_added_while_serving_is_listed_without_a_restart() {
    let ws = skills_workspace();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    runtime.skills().watch();
    let app = keel_server::router(runtime);

    ws.write(
        "resources/skills/release-checklist/SKILL.md",
        "---\nname: release-checklist\ndescription: What to check before a release.\n---\nRun the tests.\n",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, value) = send_json(&app, get("/api/skills/release-checklist")).await;
        if status == StatusCode::OK {
            assert_eq!(value["body"], "Run the tests.");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never listed: {value}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
