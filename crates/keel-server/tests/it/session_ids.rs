//! Session ids follow one rule everywhere (1–128 characters of `[A-Za-z0-9._-]`): the
//! `X-Keel-Session` header, the `sessionId` body field, the `session` query filter and the
//! `{id}` path parameter answer 400 `invalid_session_id` naming the rule.

use super::*;

fn chat_in_session(session: &str) -> Request<Body> {
    Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-keel-session", session)
        .body(Body::from(
            json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]})
                .to_string(),
        ))
        .unwrap()
}

/// Asserts a 400 `invalid_session_id` with `param` and returns its message.
fn assert_invalid_session(status: StatusCode, body: &[u8], param: &str) -> String {
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(body)
    );
    let value = assert_error(body, "invalid_request_error");
    assert_eq!(value["error"]["code"], "invalid_session_id", "{value}");
    assert_eq!(value["error"]["param"], param, "{value}");
    let message = value["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("1-128 letters, digits, `.`, `_` or `-`"),
        "{message}"
    );
    message
}

#[tokio::test]
async fn the_session_header_is_checked() {
    let ws = workspace();
    for bad in ["", "../x", "a b", &"s".repeat(129)] {
        let (status, _, body) = send(app(&ws), chat_in_session(bad)).await;
        assert_invalid_session(status, &body, "X-Keel-Session");
    }
    let (status, _, body) = send(app(&ws), chat_in_session("chat-1.a_b")).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn the_session_body_field_is_checked() {
    let ws = workspace();
    let long = "s".repeat(60_000);
    for bad in ["", "a\0b", "../x", long.as_str()] {
        let request = json!({"input": "Hi", "sessionId": bad});
        let (status, _, body) = send(
            app(&ws),
            request_with("POST", "/api/requests", None, Some(&request)),
        )
        .await;
        let message = assert_invalid_session(status, &body, "sessionId");
        assert!(message.len() < 400, "the message stays short: {message}");
    }
    let request = json!({"input": "Hi", "sessionId": "good-1", "wait": true});
    let (status, _, body) = send(
        app(&ws),
        request_with("POST", "/api/requests", None, Some(&request)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn session_paths_and_filters_are_checked() {
    let ws = workspace();
    for uri in ["/api/sessions/..%2Fx", "/api/sessions/a%00b"] {
        for method in ["GET", "DELETE"] {
            let (status, _, body) = send(app(&ws), request_with(method, uri, None, None)).await;
            assert_invalid_session(status, &body, "id");
        }
    }
    let (status, _, body) = send(
        app(&ws),
        request_with("GET", "/api/requests?session=..%2Fx", None, None),
    )
    .await;
    assert_invalid_session(status, &body, "session");
    // A well-formed id that names no session is still a 404.
    let (status, _, _) = send(
        app(&ws),
        request_with("GET", "/api/sessions/none-such", None, None),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_session_is_compacted_over_http_and_its_record_shows_the_summary() {
    let ws = workspace();
    let app = app(&ws);
    for _ in 0..3 {
        let (status, _, body) = send(app.clone(), chat_in_session("long-talk")).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    }
    let (status, _, body) = send(
        app.clone(),
        request_with("POST", "/api/sessions/long-talk/compact?keep=1", None, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let compacted: Value = serde_json::from_slice(&body).unwrap();
    // Three turns of two messages: the first two are summarized (by the scripted model).
    assert_eq!(compacted["summary"]["throughSeq"], 4, "{compacted}");
    assert_eq!(compacted["summary"]["text"], "Hello there");
    let (_, _, body) = send(
        app.clone(),
        request_with("GET", "/api/sessions/long-talk", None, None),
    )
    .await;
    let session: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(session["session"]["summary"]["throughSeq"], 4, "{session}");
    assert_eq!(
        session["messages"].as_array().unwrap().len(),
        6,
        "every turn kept"
    );
    let (status, _, body) = send(
        app.clone(),
        request_with("POST", "/api/sessions/long-talk/compact?keep=1", None, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let again: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(again["summary"], Value::Null, "nothing more to compact");
    let (status, _, _) = send(
        app,
        request_with("POST", "/api/sessions/none-such/compact", None, None),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
