//! `MockLlm`: queue, default responder, recording, SSE framing.

use keel_test_support::{MockLlm, MockResponse, MockSse, TempWorkspace};
use serde_json::{Value, json};

use crate::client;

async fn post(mock: &MockLlm, body: Value) -> reqwest::Response {
    client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .bearer_auth("sk-x")
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn queued_responses_are_served_in_order_and_requests_recorded() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::completion_text("first"));
    mock.push(MockResponse::error(418, "teapot"));

    let first = post(
        &mock,
        json!({"messages": [{"role": "user", "content": "a"}]}),
    )
    .await;
    let first_body: Value = first.json().await.unwrap();
    let second = post(
        &mock,
        json!({"messages": [{"role": "user", "content": "b"}]}),
    )
    .await;

    assert_eq!(first_body["choices"][0]["message"]["content"], "first");
    assert_eq!(second.status(), 418);
    assert_eq!(second.text().await.unwrap(), "teapot");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("Authorization"), Some("Bearer sk-x"));
    assert_eq!(requests[1].last_content_of("user"), Some("b"));
    assert_eq!(mock.pending(), 0);
}

#[tokio::test]
async fn an_empty_queue_asks_the_default_responder() {
    let mock = MockLlm::start().await;
    let unset = post(&mock, json!({"messages": []})).await;
    mock.respond_with(|req| {
        MockResponse::completion_text(format!("{} messages", req.messages().len()))
    });

    let answered = post(
        &mock,
        json!({"messages": [{"role": "user", "content": "x"}]}),
    )
    .await;

    assert_eq!(unset.status(), 500);
    let body: Value = answered.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "1 messages");
}

#[tokio::test]
async fn streamed_answers_are_event_streams_of_data_frames() {
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::sse(MockSse::new().text("hi").raw("data: {oops\n\n").done())
            .header("x-extra", "1"),
    );

    let response = post(&mock, json!({"stream": true, "messages": []})).await;

    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-extra"], "1");
    let text = response.text().await.unwrap();
    let frames: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(frames.len(), 3);
    let first: Value = serde_json::from_str(frames[0].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(first["choices"][0]["delta"]["content"], "hi");
    assert_eq!(frames[1], "data: {oops");
    assert_eq!(frames[2], "data: [DONE]");
}

#[tokio::test]
async fn other_paths_are_not_found() {
    let mock = MockLlm::start().await;
    let response = client()
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(mock.request_count(), 0);
}

#[test]
fn temp_workspace_writes_nested_files() {
    let ws = TempWorkspace::new();
    let path = ws.write("config/deep/a.yaml", "x: 1\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x: 1\n");
    assert!(path.starts_with(ws.path()));
}
