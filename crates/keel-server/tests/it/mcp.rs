//! `/mcp`, MCP's streamable HTTP, as the router mounts it: behind the API keys with the
//! operator role, guarded against DNS rebinding on loopback, and left out of the OpenAPI
//! document on purpose. (What MCP clients do with it is tested end to end with the official
//! Python SDK in keel-cli's `mcp_server` tests.)

use super::auth::{CLIENT, OPERATOR, keyed_workspace, runtime};
use super::*;

/// An MCP `initialize` request as a client posts it.
fn initialize(host: &str, key: Option<&str>) -> Request<Body> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}
        }
    });
    let mut request = Request::post("/mcp")
        .header(header::HOST, host)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream");
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    request.body(Body::from(body.to_string())).unwrap()
}

/// The JSON-RPC message of an answer, JSON or an SSE stream.
fn message(body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(body);
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .find(|data| data.starts_with('{'))
        .unwrap_or(&text);
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn mcp_needs_an_operator_key() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    for key in [None, Some("wrong")] {
        let (status, headers, body) =
            send_with_headers(app.clone(), initialize("keel.example", key)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}");
        assert_error(&body, "invalid_request_error");
        // The challenge names a bearer key, so MCP clients do not start an OAuth flow.
        assert_eq!(
            headers
                .get(header::WWW_AUTHENTICATE)
                .map(|v| v.to_str().unwrap()),
            Some("Bearer realm=\"keel\""),
            "{key:?}"
        );
    }
    for method in ["POST", "GET", "DELETE"] {
        let request = request_with(method, "/mcp", Some(CLIENT), None);
        let (status, _, body) = send(app.clone(), request).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}");
        assert_eq!(
            assert_error(&body, "invalid_request_error")["error"]["code"],
            "forbidden"
        );
    }
    // With keys every request is authenticated, so any Host may reach the server.
    let (status, headers, body) =
        send_with_headers(app, initialize("keel.example", Some(OPERATOR))).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert!(headers.contains_key("mcp-session-id"), "{headers:?}");
    let answer = message(&body);
    assert_eq!(answer["result"]["serverInfo"]["name"], "keel", "{answer}");
    assert!(
        answer["result"]["capabilities"]["tools"].is_object(),
        "{answer}"
    );
}

#[tokio::test]
async fn mcp_without_keys_accepts_only_loopback_hosts() {
    let ws = workspace();
    let (status, _, body) = send(app(&ws), initialize("attacker.example", None)).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(&body)
    );
    for host in ["127.0.0.1:8642", "localhost:8642"] {
        let (status, _, body) = send(app(&ws), initialize(host, None)).await;
        assert_eq!(status, StatusCode::OK, "{host}");
        assert_eq!(message(&body)["result"]["serverInfo"]["name"], "keel");
    }
}

#[tokio::test]
async fn the_openapi_document_leaves_mcp_out_and_says_so() {
    let ws = workspace();
    let (status, _, body) = send(
        app(&ws),
        Request::get("/api/openapi.json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert!(doc["paths"].get("/mcp").is_none());
    assert!(
        doc["info"]["description"]
            .as_str()
            .unwrap()
            .contains("/mcp"),
        "{doc}"
    );
}

async fn send_with_headers(
    app: Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, body.to_vec())
}
