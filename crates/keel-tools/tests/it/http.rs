//! `http_fetch` and declared `http` tools against a real server on 127.0.0.1: the allow-list
//! (enforced by `check` and by the call), redirects, size caps, timeouts, URL templates, query
//! strings, JSON bodies and error statuses.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use keel_test_support::TempWorkspace;
use keel_tools::builtin::HttpFetch;
use keel_tools::http::HttpTool;
use keel_types::{Tool, ToolError};
use keel_workspace::{HttpFetchSettings, HttpMethod, ToolImpl, ToolSpecDoc};
use serde_json::{Value, json};

use crate::ctx;

/// A loopback server answering by path:
/// `/hello` text, `/json` JSON, `/big` 100 000 bytes, `/slow` after 10 s, `/missing` 404,
/// `/to-hello` a redirect to `/hello`, `/to-elsewhere` a redirect to another host, and
/// anything under `/echo` the request itself as JSON.
struct Server {
    addr: SocketAddr,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(answer);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, _task: task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

async fn answer(request: Request<Body>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from(body))
            .unwrap()
    };
    let redirect = |to: String| {
        Response::builder()
            .status(StatusCode::FOUND)
            .header(header::LOCATION, to)
            .body(Body::empty())
            .unwrap()
    };
    match path.as_str() {
        "/hello" => text(StatusCode::OK, "hello".to_owned()),
        "/json" => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"ok":true,"n":1}"#))
            .unwrap(),
        "/big" => text(StatusCode::OK, "x".repeat(100_000)),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            text(StatusCode::OK, "late".to_owned())
        }
        "/missing" => text(StatusCode::NOT_FOUND, "no such item".to_owned()),
        "/to-hello" => redirect("/hello".to_owned()),
        "/to-elsewhere" => {
            let port = request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.rsplit_once(':'))
                .map(|(_, port)| port.to_owned())
                .unwrap_or_default();
            redirect(format!("http://localhost:{port}/hello"))
        }
        _ if path.starts_with("/echo") => {
            let method = request.method().to_string();
            let uri = request.uri().to_string();
            let headers: BTreeMap<String, String> = request
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
                .collect();
            let body = to_bytes(request.into_body(), 1 << 20).await.unwrap();
            let echo = json!({
                "method": method,
                "uri": uri,
                "headers": headers,
                "body": String::from_utf8_lossy(&body),
            });
            let mut response = Response::new(Body::from(echo.to_string()));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        _ => text(StatusCode::NOT_FOUND, "unknown path".to_owned()),
    }
}

fn fetcher(allow: &[String]) -> HttpFetch {
    HttpFetch::new(&HttpFetchSettings {
        allow: allow.to_vec(),
        ..HttpFetchSettings::default()
    })
}

fn allow_server(server: &Server) -> Vec<String> {
    vec![server.url("/*")]
}

async fn fetch(tool: &HttpFetch, args: Value) -> Value {
    let ws = TempWorkspace::new();
    let context = ctx(ws.path());
    assert_eq!(tool.check(&context, &args), [], "{args}");
    let out = tool.call(&context, args.clone()).await;
    let out = out.unwrap_or_else(|e| panic!("http_fetch {args} failed: {e:?}"));
    serde_json::from_str(&out.content).unwrap()
}

#[tokio::test]
async fn an_empty_allow_list_blocks_everything_and_says_how_to_allow() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let tool = fetcher(&[]);
    let args = json!({"url": server.url("/hello")});
    let issues = tool.check(&ctx(ws.path()), &args);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/url");
    assert!(
        issues[0]
            .message
            .contains("`Runtime.spec.tools.httpFetch.allow`"),
        "{}",
        issues[0].message
    );
    // The call refuses too, without a request.
    let err = tool.call(&ctx(ws.path()), args).await.unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.contains("allow-list is empty")),
        "{err:?}"
    );
}

#[tokio::test]
async fn only_allowed_http_urls_pass_the_check() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let tool = fetcher(&[server.url("/hello"), server.url("/echo/*")]);
    let context = ctx(ws.path());
    for allowed in [server.url("/hello"), server.url("/echo/a/b?c=d")] {
        assert_eq!(
            tool.check(&context, &json!({ "url": allowed })),
            [],
            "{allowed}"
        );
    }
    let port = server.addr.port();
    for blocked in [
        server.url("/json"),
        server.url("/hello/more"),
        format!("http://localhost:{port}/hello"),
        format!("https://127.0.0.1:{port}/hello"),
        "file:///etc/passwd".to_owned(),
        "ftp://127.0.0.1/x".to_owned(),
        "not a url".to_owned(),
    ] {
        let issues = tool.check(&context, &json!({ "url": blocked }));
        assert_eq!(issues.len(), 1, "{blocked}: {issues:?}");
        assert_eq!(issues[0].path, "/url");
        let err = tool
            .call(&context, json!({ "url": blocked }))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{blocked}: {err:?}"
        );
    }
    let issues = tool.check(&context, &json!({"url": "file:///etc/passwd"}));
    assert!(
        issues[0].message.contains("only http and https"),
        "{issues:?}"
    );
}

#[tokio::test]
async fn get_returns_status_headers_and_body() {
    let server = Server::start().await;
    let tool = fetcher(&allow_server(&server));
    let out = fetch(&tool, json!({"url": server.url("/hello")})).await;
    assert_eq!(
        out,
        json!({
            "status": 200,
            "headers": {"content-type": "text/plain", "content-length": "5"},
            "body": "hello",
            "truncated": false
        })
    );
    let out = fetch(&tool, json!({"url": server.url("/missing")})).await;
    assert_eq!(out["status"], 404);
    assert_eq!(out["body"], "no such item");
}

#[tokio::test]
async fn post_sends_text_or_json_bodies_and_headers() {
    let server = Server::start().await;
    let tool = fetcher(&allow_server(&server));
    let out = fetch(
        &tool,
        json!({
            "url": server.url("/echo/items"),
            "method": "POST",
            "headers": {"X-Trace": "t-1"},
            "body": {"name": "widget", "qty": 2}
        }),
    )
    .await;
    let echo: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["headers"]["content-type"], "application/json");
    assert_eq!(echo["headers"]["x-trace"], "t-1");
    assert_eq!(
        serde_json::from_str::<Value>(echo["body"].as_str().unwrap()).unwrap(),
        json!({"name": "widget", "qty": 2})
    );

    let out = fetch(
        &tool,
        json!({"url": server.url("/echo"), "method": "POST", "body": "plain words"}),
    )
    .await;
    let echo: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(echo["body"], "plain words");
}

#[tokio::test]
async fn a_body_needs_post_and_headers_must_be_valid() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let tool = fetcher(&allow_server(&server));
    let issues = tool.check(
        &ctx(ws.path()),
        &json!({"url": server.url("/echo"), "body": "x", "headers": {"bad header": "v"}}),
    );
    let paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["/headers", "/body"], "{issues:?}");
}

#[tokio::test]
async fn the_body_is_capped_at_max_bytes_and_says_so() {
    let server = Server::start().await;
    let tool = HttpFetch::new(&HttpFetchSettings {
        allow: allow_server(&server),
        max_bytes: 1000,
        ..HttpFetchSettings::default()
    });
    let out = fetch(&tool, json!({"url": server.url("/big")})).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"].as_str().unwrap().len(), 1000);
    assert_eq!(out["truncated"], true);
    assert!(
        out["note"]
            .as_str()
            .unwrap()
            .contains("larger than the limit of 1000 bytes"),
        "{out}"
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let tool = HttpFetch::new(&HttpFetchSettings {
        allow: allow_server(&server),
        timeout: keel_workspace::Duration::from_millis(300),
        ..HttpFetchSettings::default()
    });
    let err = tool
        .call(&ctx(ws.path()), json!({"url": server.url("/slow")}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_millis(300)));
}

#[tokio::test]
async fn redirects_are_followed_only_to_allowed_urls() {
    let server = Server::start().await;
    let tool = fetcher(&allow_server(&server));
    let out = fetch(&tool, json!({"url": server.url("/to-hello")})).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"], "hello");
    assert_eq!(out["url"], server.url("/hello"));

    let out = fetch(&tool, json!({"url": server.url("/to-elsewhere")})).await;
    assert_eq!(out["status"], 302);
    let target = format!("http://localhost:{}/hello", server.addr.port());
    assert_eq!(out["headers"]["location"], target);
    assert!(
        out["note"]
            .as_str()
            .unwrap()
            .contains(&format!("the redirect to `{target}` was not followed")),
        "{out}"
    );
}

fn http_doc(method: HttpMethod, url: String, headers: &[(&str, &str)]) -> ToolSpecDoc {
    ToolSpecDoc {
        sandbox: Default::default(),
        description: "an API".to_owned(),
        schema: json!({"type": "object"}),
        implementation: ToolImpl::Http {
            method,
            url,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            timeout: Some(keel_workspace::Duration::from_millis(300)),
        },
        policy: None,
        idempotent: false,
        gateway: Default::default(),
        hooks: Default::default(),
        double_check_on_run: false,
    }
}

async fn call_http(tool: &HttpTool, args: Value) -> Result<Value, ToolError> {
    let ws = TempWorkspace::new();
    let out = tool.call(&ctx(ws.path()), args).await?;
    Ok(serde_json::from_str(&out.content).unwrap_or(Value::String(out.content)))
}

#[tokio::test]
async fn http_tool_fills_the_url_template_and_sends_the_rest_as_query() {
    let server = Server::start().await;
    let doc = http_doc(
        HttpMethod::Get,
        server.url("/echo/items/{id}?fixed=1"),
        &[("X-Client", "keel")],
    );
    let tool = HttpTool::new("items", &doc, &BTreeMap::new());
    assert_eq!(tool.spec().name, "items");
    let echo = call_http(
        &tool,
        json!({"id": "a b/c?d", "q": "x y", "n": 3, "tags": ["p", "q"], "skip": null}),
    )
    .await
    .unwrap();
    assert_eq!(echo["method"], "GET");
    assert_eq!(
        echo["uri"],
        "/echo/items/a%20b%2Fc%3Fd?fixed=1&q=x+y&n=3&tags=p&tags=q"
    );
    assert_eq!(echo["headers"]["x-client"], "keel");
    assert_eq!(echo["body"], "");
}

#[tokio::test]
async fn http_tool_posts_the_other_arguments_as_json() {
    let server = Server::start().await;
    let doc = http_doc(
        HttpMethod::Post,
        server.url("/echo/users/{user}/notes"),
        &[],
    );
    let tool = HttpTool::new("notes", &doc, &BTreeMap::new());
    let echo = call_http(&tool, json!({"user": 42, "text": "hi", "tags": ["a"]}))
        .await
        .unwrap();
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["uri"], "/echo/users/42/notes");
    assert_eq!(echo["headers"]["content-type"], "application/json");
    assert_eq!(
        serde_json::from_str::<Value>(echo["body"].as_str().unwrap()).unwrap(),
        json!({"text": "hi", "tags": ["a"]})
    );
}

#[tokio::test]
async fn http_tool_needs_every_placeholder() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let doc = http_doc(HttpMethod::Get, server.url("/echo/{owner}/{repo}"), &[]);
    let tool = HttpTool::new("repo", &doc, &BTreeMap::new());
    let issues = tool.check(&ctx(ws.path()), &json!({"owner": "me"}));
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/repo");
    assert_eq!(
        issues[0].message,
        "the URL needs `repo`, which is missing from the arguments"
    );
    let err = call_http(&tool, json!({"owner": "me"})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments(
            "the URL needs `repo`, which is missing from the arguments".to_owned()
        )
    );
    assert!(
        tool.check(&ctx(ws.path()), &json!({"owner": "me", "repo": "r"}))
            .is_empty()
    );
}

#[tokio::test]
async fn http_tool_returns_json_or_text_and_fails_on_error_statuses() {
    let server = Server::start().await;
    let json_tool = HttpTool::new(
        "j",
        &http_doc(HttpMethod::Get, server.url("/json"), &[]),
        &BTreeMap::new(),
    );
    assert_eq!(
        call_http(&json_tool, json!({})).await.unwrap(),
        json!({"ok": true, "n": 1})
    );
    let text_tool = HttpTool::new(
        "t",
        &http_doc(HttpMethod::Get, server.url("/hello"), &[]),
        &BTreeMap::new(),
    );
    assert_eq!(call_http(&text_tool, json!({})).await.unwrap(), "hello");
    let missing = HttpTool::new(
        "m",
        &http_doc(HttpMethod::Delete, server.url("/missing"), &[]),
        &BTreeMap::new(),
    );
    let err = call_http(&missing, json!({})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed(format!(
            "HTTP 404 Not Found from {}: no such item",
            server.url("/missing")
        ))
    );
}

#[tokio::test]
async fn http_tool_times_out() {
    let server = Server::start().await;
    let tool = HttpTool::new(
        "slow",
        &http_doc(HttpMethod::Get, server.url("/slow"), &[]),
        &BTreeMap::new(),
    );
    assert_eq!(tool.timeout(), Duration::from_millis(300));
    let err = call_http(&tool, json!({})).await.unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_millis(300)));
}

#[tokio::test]
async fn http_tool_masks_credentials_an_api_echoes() {
    let server = Server::start().await;
    let env = BTreeMap::from([("SERVICE_API_KEY".to_owned(), "key-abcdef-123".to_owned())]);
    let doc = http_doc(
        HttpMethod::Post,
        server.url("/echo"),
        &[("Authorization", "Bearer tok-0123456789")],
    );
    let tool = HttpTool::new("echo", &doc, &env);
    let echo = call_http(&tool, json!({"note": "key-abcdef-123"}))
        .await
        .unwrap();
    // The server saw the real header; the model sees it masked.
    assert_eq!(echo["headers"]["authorization"], "[redacted]");
    assert_eq!(echo["body"], r#"{"note":"[redacted]"}"#);
}

#[tokio::test]
async fn declared_builds_an_http_tool_for_http_documents() {
    let server = Server::start().await;
    let ws = TempWorkspace::new();
    let doc = http_doc(HttpMethod::Get, server.url("/hello"), &[]);
    let tool = keel_tools::declared("hello", &doc, ws.path());
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    assert_eq!(out.content, "hello");
}
