//! The HTTP routes driven in-process with `tower::ServiceExt::oneshot` (no sockets), over a
//! runtime whose model is `scripted`.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A workspace with agent `assistant` on a scripted model answering "Hello there" (and failing
/// with an auth error on "fail"), under `runtime` (a `Runtime` spec).
fn workspace_with(runtime: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(runtime)
        .scripted_model(
            "m",
            &json!({"conversations": [
                {"match": "(?i)fail", "steps": [{"error": {"kind": "auth", "message": "bad key"}}]},
                {"steps": [{"text": "Hello there", "chunkSize": 4, "chunkDelay": "20ms",
                            "usage": {"promptTokens": 12, "completionTokens": 3}}]}
            ]}),
        )
        .agent("assistant", "{ model: m, instructions: Be brief. }")
        .build()
}

/// [`workspace_with`] a runtime whose default agent is `assistant`.
fn workspace() -> TempWorkspace {
    workspace_with("{ defaultAgent: assistant }")
}

fn app(ws: &TempWorkspace) -> Router {
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    keel_server::router(runtime)
}

async fn send(app: Router, request: Request<Body>) -> (StatusCode, Option<String>, Vec<u8>) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, content_type, body.to_vec())
}

fn post(body: impl Into<Body>) -> Request<Body> {
    Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

/// A request with an optional bearer key and an optional JSON body.
fn request_with(method: &str, uri: &str, key: Option<&str>, body: Option<&Value>) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => request.body(Body::empty()).unwrap(),
    }
}

fn post_json(body: &Value) -> Request<Body> {
    post(body.to_string())
}

/// Asserts an OpenAI-style error body and returns it.
fn assert_error(body: &[u8], kind: &str) -> Value {
    let value: Value = serde_json::from_slice(body).unwrap();
    let error = &value["error"];
    assert!(error["message"].is_string(), "{value}");
    assert_eq!(error["type"], kind, "{value}");
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "{value}"
    );
    value
}

#[tokio::test]
async fn models_lists_agents() {
    let ws = workspace();
    let (status, _, body) = send(
        app(&ws),
        Request::get("/v1/models").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"object":"list","data":[{"id":"assistant","object":"model","created":0,"owned_by":"keel"}]})
    );
}

#[tokio::test]
async fn non_stream_completion_has_content_and_usage() {
    let ws = workspace();
    let request = json!({
        "model": "assistant",
        "messages": [
            {"role": "system", "content": "ignored"},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
        ]
    });
    let (status, content_type, body) = send(app(&ws), post_json(&request)).await;
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert!(value["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(value["object"], "chat.completion");
    assert_eq!(value["model"], "assistant");
    assert_eq!(value["choices"][0]["message"]["role"], "assistant");
    assert_eq!(value["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(value["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        value["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    );
}

#[tokio::test]
async fn stream_sends_chunks_usage_and_done() {
    let ws = workspace();
    let request = json!({
        "model": "assistant",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": true,
        "stream_options": {"include_usage": true}
    });
    let (status, content_type, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let text = String::from_utf8(body).unwrap();
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| f.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(frames.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"));
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["model"], "assistant");
    }
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let deltas = &chunks[1..chunks.len() - 2];
    assert!(deltas.len() > 1, "several text deltas: {text}");
    let content: String = deltas
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(content, "Hello there");
    // The whole stream as it goes over the wire (before `[DONE]`), ids and times redacted.
    insta::assert_json_snapshot!("sse_frames", chunks, {
        "[].id" => "[id]",
        "[].created" => "[created]",
    });
}

#[tokio::test]
async fn stream_without_usage_ends_with_finish_chunk() {
    let ws = workspace();
    let request = json!({
        "model": "assistant",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": true
    });
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(!text.contains("\"usage\""), "{text}");
    assert!(
        text.ends_with("\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"),
        "{text}"
    );
}

#[tokio::test]
async fn unknown_model_is_404() {
    let ws = workspace();
    let request = json!({"model": "nope", "messages": [{"role": "user", "content": "Hi"}]});
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let value = assert_error(&body, "invalid_request_error");
    assert_eq!(value["error"]["param"], "model");
    assert_eq!(value["error"]["code"], "model_not_found");
}

#[tokio::test]
async fn bad_json_is_400() {
    let ws = workspace();
    let (status, _, body) = send(app(&ws), post("{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_request_error");
}

#[tokio::test]
async fn wrong_types_are_400() {
    let ws = workspace();
    for request in [
        json!({"model": 3, "messages": []}),
        json!({"model": "assistant", "messages": "Hi"}),
        json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}], "stream": "yes"}),
        json!({"messages": [{"role": "user", "content": "Hi"}]}),
    ] {
        let (status, _, body) = send(app(&ws), post_json(&request)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{request}");
        assert_error(&body, "invalid_request_error");
    }
}

#[tokio::test]
async fn empty_messages_are_400() {
    let ws = workspace();
    for messages in [json!([]), json!([{"role": "system", "content": "x"}])] {
        let request = json!({"model": "assistant", "messages": messages});
        let (status, _, body) = send(app(&ws), post_json(&request)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let value = assert_error(&body, "invalid_request_error");
        assert_eq!(value["error"]["param"], "messages");
    }
}

#[tokio::test]
async fn oversized_body_is_413() {
    let ws = workspace();
    let big = "x".repeat(1024 * 1024 + 1);
    let request = json!({"model": "assistant", "messages": [{"role": "user", "content": big}]});
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let value = assert_error(&body, "invalid_request_error");
    assert_eq!(value["error"]["code"], "payload_too_large");
}

#[tokio::test]
async fn unknown_route_is_404_json() {
    let ws = workspace();
    let (status, _, body) = send(
        app(&ws),
        Request::get("/v1/nope").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "invalid_request_error");
}

#[tokio::test]
async fn failed_run_is_502_with_the_run_error() {
    let ws = workspace();
    let request =
        json!({"model": "assistant", "messages": [{"role": "user", "content": "please fail"}]});
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let value = assert_error(&body, "server_error");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad key"),
        "{value}"
    );
}

mod adapters;
mod api;
mod auth;
mod console;
mod encodings;
mod evals;
mod fields;
mod health;
mod hooked;
mod malformed;
mod mcp;
mod memory;
mod otel;
mod routes;
mod sampling;
mod session_ids;
mod session_owners;
mod slow_clients;
mod socket;
mod usage;
mod wire;
mod workflows;
