//! `/api/memory…` over the router, on a real SQLite file: write, search, update with
//! history, delete, export and import, maintenance as a run, clear 400s and 404s, and
//! request metadata (`/api/requests` `metadata`, `/v1` `user`) choosing the namespace a run
//! recalls from.

use axum::Router;
use axum::http::StatusCode;
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::{request_with, send};

fn memory_workspace() -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello there"}]}]}),
        )
        .agent("assistant", "{ model: m }")
        .document(
            "Memory",
            "user-notes",
            "  namespace: \"users/{metadata.user}\"\n  readers: [assistant]\n  writers: [assistant]\n  maxChars: 100\n",
        )
        .build()
}

async fn call(app: &Router, method: &str, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    let (status, _, bytes) = send(app.clone(), request_with(method, uri, None, body)).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

#[tokio::test]
async fn records_are_written_searched_versioned_exported_and_imported() {
    let ws = memory_workspace();
    let app = crate::app(&ws);
    let (status, record) = call(
        &app,
        "POST",
        "/api/memory",
        Some(&json!({"namespace": "users/alice", "text": "Alice drinks green tea.", "kind": "preference", "tags": ["tea"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{record}");
    let id = record["id"].as_str().unwrap().to_owned();
    assert_eq!(record["provenance"][0]["approvedBy"], "api");

    let (status, hits) = call(
        &app,
        "GET",
        "/api/memory/search?q=tea&namespace=users/alice",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{hits}");
    assert_eq!(hits["data"][0]["record"]["id"], id.as_str());

    let (status, updated) = call(
        &app,
        "PATCH",
        &format!("/api/memory/{id}"),
        Some(&json!({"text": "Alice drinks oolong tea."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["version"], 2);
    let (_, history) = call(&app, "GET", &format!("/api/memory/{id}/history"), None).await;
    assert_eq!(history["data"].as_array().unwrap().len(), 2);
    assert_eq!(history["data"][0]["status"], "superseded");

    let (status, error) = call(
        &app,
        "POST",
        "/api/memory",
        Some(&json!({"namespace": "teams/x", "text": "Hi."})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown namespace `teams/x`")
    );
    let (status, error) = call(
        &app,
        "POST",
        "/api/memory",
        Some(&json!({"namespace": "users/alice", "text": "tea ".repeat(40)})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keeps at most 100"),
        "{error}"
    );
    let (status, _) = call(&app, "GET", "/api/memory/mem_nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, gone) = call(&app, "DELETE", &format!("/api/memory/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(gone["status"], "deleted");
    let (_, listed) = call(&app, "GET", "/api/memory", None).await;
    assert_eq!(listed["data"], json!([]));
    let (_, all) = call(&app, "GET", "/api/memory?all=true", None).await;
    assert_eq!(all["data"].as_array().unwrap().len(), 2);

    let (status, export) = call(&app, "GET", "/api/memory/export", None).await;
    assert_eq!(status, StatusCode::OK);
    let jsonl = export.as_str().unwrap().to_owned();
    assert_eq!(jsonl.lines().count(), 2);
    let fresh = memory_workspace();
    let other = crate::app(&fresh);
    let (status, _, bytes) = send(
        other.clone(),
        axum::http::Request::post("/api/memory/import")
            .header("content-type", "application/x-ndjson")
            .body(axum::body::Body::from(jsonl.clone()))
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let (_, again) = call(&other, "GET", "/api/memory/export", None).await;
    assert_eq!(again.as_str().unwrap(), jsonl);

    let (status, report) = call(&app, "POST", "/api/memory/maintain", None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let run = report["requestId"].as_str().unwrap();
    let (status, _) = call(&app, "GET", &format!("/api/requests/{run}"), None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn request_metadata_picks_the_namespace_and_a_missing_key_is_a_400() {
    let ws = memory_workspace();
    let app = crate::app(&ws);
    call(
        &app,
        "POST",
        "/api/memory",
        Some(&json!({"namespace": "users/alice", "text": "Alice says hello warmly."})),
    )
    .await;

    let (status, error) = call(
        &app,
        "POST",
        "/api/requests",
        Some(&json!({"input": "hello", "wait": true})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("metadata `user`"),
        "{error}"
    );

    let (status, done) = call(
        &app,
        "POST",
        "/api/requests",
        Some(&json!({"input": "hello", "wait": true, "metadata": {"user": "alice"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let id = done["requestId"].as_str().unwrap();
    let (_, events) = call(&app, "GET", &format!("/api/requests/{id}/events"), None).await;
    let recall = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "runtime.memory.recall.completed")
        .cloned()
        .expect("a recall event");
    assert_eq!(recall["namespaces"], json!(["users/alice"]));
    assert_eq!(recall["recordIds"].as_array().unwrap().len(), 1);

    // The OpenAI facade's `user` is the run's `metadata.user`.
    let (status, completion) = call(
        &app,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": "assistant", "user": "bob", "messages": [{"role": "user", "content": "hello"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{completion}");
    let (status, _) = call(
        &app,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": "assistant", "messages": [{"role": "user", "content": "hello"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
