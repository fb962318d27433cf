//! A corpus of malformed requests: every one gets a 4xx with a JSON error body, never a 5xx,
//! and the server and its store stay sound.

use super::*;

/// (method, uri, content type, body, extra header).
type Case = (
    &'static str,
    String,
    Option<&'static str>,
    Vec<u8>,
    Option<(&'static str, &'static str)>,
);

fn case(method: &'static str, uri: &str, body: impl Into<Vec<u8>>) -> Case {
    (
        method,
        uri.to_owned(),
        Some("application/json"),
        body.into(),
        None,
    )
}

fn corpus() -> Vec<Case> {
    let chat = "/v1/chat/completions";
    let mut cases = vec![
        // Not JSON, or not an object.
        case("POST", chat, "{not json"),
        case("POST", chat, ""),
        case("POST", chat, "null"),
        case("POST", chat, "[]"),
        case("POST", chat, "\"text\""),
        case("POST", chat, vec![0xff, 0xfe, 0x00]),
        case(
            "POST",
            chat,
            "{\"model\":\"assistant\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]",
        ),
        // Wrong types and missing fields.
        case("POST", chat, r#"{"model":3,"messages":[]}"#),
        case("POST", chat, r#"{"model":"assistant","messages":"Hi"}"#),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":"Hi"}],"stream":"yes"}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"messages":[{"role":"user","content":"Hi"}]}"#,
        ),
        case("POST", chat, r#"{"model":"assistant"}"#),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"content":"Hi"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":7}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":"Hi"}],"stream_options":{"include_usage":"x"}}"#,
        ),
        // Unknown model, empty or unusable messages.
        case(
            "POST",
            chat,
            r#"{"model":"nope","messages":[{"role":"user","content":"Hi"}]}"#,
        ),
        case("POST", chat, r#"{"model":"assistant","messages":[]}"#),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"system","content":"x"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":""}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"wizard","content":"x"},{"role":"user","content":"Hi"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"tool","content":"x"},{"role":"user","content":"Hi"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"c","content":"x"}]}"#,
        ),
        case(
            "POST",
            chat,
            r#"{"model":"assistant","messages":[{"role":"assistant","tool_calls":[{"id":"c"}]},{"role":"user","content":"Hi"}]}"#,
        ),
        // Oversized.
        case(
            "POST",
            chat,
            format!(
                r#"{{"model":"assistant","messages":[{{"role":"user","content":"{}"}}]}}"#,
                "x".repeat(1024 * 1024 + 10)
            ),
        ),
        // Operator API bodies.
        case("POST", "/api/requests", "{}"),
        case("POST", "/api/requests", r#"{"input":5}"#),
        case("POST", "/api/requests", r#"{"input":"hi","surprise":true}"#),
        case(
            "POST",
            "/api/requests",
            r#"{"input":"hi","agent":"nobody"}"#,
        ),
        case(
            "POST",
            "/api/requests",
            r#"{"input":"hi","timeout":"soon"}"#,
        ),
        case("POST", "/api/requests", r#"{"input":"hi","mode":"yolo"}"#),
        case("POST", "/api/requests", r#"{"input":"hi","wait":"yes"}"#),
        case("POST", "/api/requests/x/retry", "{"),
        case("POST", "/api/approvals/x/approve", r#"{"scope":"forever"}"#),
        case("POST", "/api/approvals/x/deny", r#"{"reason":1}"#),
        case("POST", "/api/tasks", r#"{"arguments":{}}"#),
        case(
            "POST",
            "/api/tasks",
            r#"{"tool":"read_file","arguments":{},"agent":"nobody"}"#,
        ),
        case("PATCH", "/api/tasks/x", "[1]"),
        case(
            "POST",
            "/api/tools/read_file/call",
            r#"{"arguments":{},"extra":1}"#,
        ),
        case(
            "POST",
            "/api/tools/read_file/call",
            r#"{"arguments":{},"agent":"nobody"}"#,
        ),
        // Queries.
        case("GET", "/api/requests?status=sleeping", ""),
        case("GET", "/api/requests?limit=0", ""),
        case("GET", "/api/requests?limit=many", ""),
        case("GET", "/api/requests?limit=100000", ""),
        case("GET", "/api/requests?cursor=garbage", ""),
        case("GET", "/api/requests?agent=%ZZ", ""),
        case("GET", "/api/approvals?status=maybe", ""),
        case("GET", "/api/sessions?limit=-1", ""),
        case("GET", "/api/artifacts/..%2F..%2Fetc", ""),
        case("GET", "/api/artifacts/abc?meta=perhaps", ""),
        // Typed query values, as the OpenAPI document declares them: an empty value of a
        // typed parameter is no value, a number out of the declared range is refused.
        case("GET", "/api/requests?status=", ""),
        case("GET", "/api/requests?cursor=0a41", ""),
        case("GET", "/api/requests/x/events?after=abc", ""),
        case(
            "GET",
            "/api/requests/x/events?after=9223372036854775808",
            "",
        ),
        case("GET", "/api/sessions?limit=", ""),
        case("GET", "/api/tasks?limit=5000", ""),
        case("GET", "/api/artifacts/abc?meta=", ""),
        // A body is a JSON object, never an array read into the same fields.
        case("POST", "/api/tools/read_file/call", "[null, null]"),
        // Unknown routes and methods.
        case("GET", "/v1/nope", ""),
        case("DELETE", "/v1/chat/completions", ""),
        case("PUT", "/api/requests", "{}"),
    ];
    // Not JSON at all, with a JSON or no content type.
    cases.push((
        "POST",
        chat.to_owned(),
        None,
        b"model=assistant".to_vec(),
        None,
    ));
    cases.push((
        "POST",
        chat.to_owned(),
        Some("text/plain"),
        b"hello".to_vec(),
        None,
    ));
    // Bad Keel headers.
    cases.push((
        "POST",
        chat.to_owned(),
        Some("application/json"),
        br#"{"model":"assistant","messages":[{"role":"user","content":"Hi"}]}"#.to_vec(),
        Some(("x-keel-progress", "sometimes")),
    ));
    cases
}

async fn assert_4xx_json(app: &Router, request: Request<Body>, what: &str) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(
        status.is_client_error(),
        "{what}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    let value: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| panic!("{what}: not JSON: {}", String::from_utf8_lossy(&body)));
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {value}"
    );
    assert!(value["error"]["type"].is_string(), "{what}: {value}");
}

#[tokio::test]
async fn every_malformed_request_is_a_4xx_with_a_json_error() {
    let ws = workspace();
    let app = app(&ws);
    for (method, uri, content_type, body, extra) in corpus() {
        let mut request = Request::builder().method(method).uri(&uri);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        if let Some((name, value)) = extra {
            request = request.header(name, value);
        }
        let shown = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
        let request = request.body(Body::from(body)).unwrap();
        assert_4xx_json(&app, request, &format!("{method} {uri} {shown}")).await;
    }
    // Last-Event-ID that is not a seq, on a real run.
    let (status, _, body) = send(
        app.clone(),
        Request::post("/api/requests")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"input":"Hi","wait":true}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = serde_json::from_slice::<Value>(&body).unwrap()["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let request = Request::get(format!("/api/requests/{id}/events"))
        .header(header::ACCEPT, "text/event-stream")
        .header("last-event-id", "seven")
        .body(Body::empty())
        .unwrap();
    assert_4xx_json(&app, request, "Last-Event-ID").await;

    // The server still answers and the store holds only sound runs.
    let (status, _, body) = send(
        app.clone(),
        Request::get("/api/requests?limit=1000")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let runs: Value = serde_json::from_slice(&body).unwrap();
    for run in runs["data"].as_array().unwrap() {
        assert!(
            matches!(run["status"].as_str(), Some("completed" | "failed")),
            "{run}"
        );
    }
}

#[tokio::test]
async fn random_bodies_never_cause_a_5xx() {
    let ws = workspace();
    let app = app(&ws);
    let mut rng = fastrand::Rng::with_seed(7);
    let fragments = [
        "{",
        "}",
        "[",
        "]",
        "\"model\"",
        ":",
        ",",
        "\"assistant\"",
        "\"messages\"",
        "\"role\"",
        "\"user\"",
        "\"content\"",
        "null",
        "true",
        "1e999",
        "-0",
        "\"\\u0000\"",
        "\"stream\"",
        "\"input\"",
        "\"wait\"",
        "{\"type\":\"text\"}",
        "\u{1F600}",
        "\"tool_calls\"",
    ];
    for i in 0..300 {
        let body: String = (0..rng.usize(0..24))
            .map(|_| fragments[rng.usize(..fragments.len())])
            .collect();
        let uri = if i % 2 == 0 {
            "/v1/chat/completions"
        } else {
            "/api/requests"
        };
        let request = Request::post(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.clone()))
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert!(
            !response.status().is_server_error(),
            "{uri} {body}: {}",
            response.status()
        );
    }
}
