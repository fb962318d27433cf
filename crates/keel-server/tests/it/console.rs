//! The web console's delivery and sign-in: the page and its assets are served from the
//! binary; with keys, an operator key opens an HttpOnly, SameSite=Strict cookie session, a
//! client key is refused, and a state-changing request made with the cookie needs the
//! session's CSRF token; without keys no sign-in is needed.

use super::auth::{CLIENT, OPERATOR, keyed_workspace, runtime};
use super::*;

async fn call(app: &Router, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, body)
}

fn with_cookie(
    method: &str,
    uri: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: Option<&Value>,
) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::COOKIE, cookie);
    if let Some(csrf) = csrf {
        request = request.header("x-keel-csrf", csrf);
    }
    match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => request.body(Body::empty()).unwrap(),
    }
}

#[tokio::test]
async fn the_console_is_served_from_the_binary() {
    let ws = workspace();
    let app = app(&ws);
    let (status, headers, body) =
        call(&app, Request::get("/console").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'self'")
    );
    assert!(
        body.as_str()
            .unwrap()
            .contains("<title>Keel console</title>")
    );
    // Every file the page names is served (and the icon under the name browsers guess).
    let page = body.as_str().unwrap();
    let named: Vec<&str> = page
        .split(['"', '\''])
        .filter(|part| part.starts_with("/console/"))
        .collect();
    assert_eq!(named.len(), 8, "{named:?}");
    for path in named.iter().copied().chain(["/favicon.ico"]) {
        let (status, headers, _) =
            call(&app, Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let kind = match path.rsplit('.').next() {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            _ => "image/svg+xml",
        };
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{path}"
        );
    }
    let (status, _, _) = call(
        &app,
        Request::get("/console/nothing.js")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, session) = call(
        &app,
        Request::get("/console/session")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(session, json!({"authRequired": false, "signedIn": true}));
    let (status, _, overview) = call(
        &app,
        Request::get("/api/overview").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(overview["agents"], json!(["assistant"]));
    // The last hour, minute by minute, the current minute last.
    let minutes = overview["lastHour"]["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 60);
    assert!(minutes[0]["minute"].as_str().unwrap() < minutes[59]["minute"].as_str().unwrap());
    assert_eq!(overview["lastHour"]["started"], 0);
}

#[tokio::test]
async fn an_operator_key_opens_a_cookie_session_and_state_changes_need_its_csrf_token() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    let (status, _, _) = call(
        &app,
        Request::get("/api/overview").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, _, session) = call(
        &app,
        Request::get("/console/session")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(session, json!({"authRequired": true, "signedIn": false}));

    let login = |key: &str| {
        Request::post("/console/login")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json!({"key": key}).to_string()))
            .unwrap()
    };
    let (status, _, body) = call(&app, login(CLIENT)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, _) = call(&app, login("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, headers, body) = call(&app, login(OPERATOR)).await;
    assert_eq!(status, StatusCode::OK);
    let set_cookie = headers[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let csrf = body["csrf"].as_str().unwrap().to_owned();
    assert_eq!(csrf.len(), 64);

    let (status, _, _) = call(
        &app,
        with_cookie("GET", "/api/overview", &cookie, None, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, session) = call(
        &app,
        with_cookie("GET", "/console/session", &cookie, None, None),
    )
    .await;
    assert_eq!(session["csrf"], csrf.as_str());
    let run = json!({"input": "Hi"});
    let (status, _, body) = call(
        &app,
        with_cookie("POST", "/api/requests", &cookie, None, Some(&run)),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "csrf", "{body}");
    let (status, _, _) = call(
        &app,
        with_cookie("POST", "/api/requests", &cookie, Some("forged"), Some(&run)),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, body) = call(
        &app,
        with_cookie("POST", "/api/requests", &cookie, Some(&csrf), Some(&run)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    let (status, headers, _) = call(
        &app,
        with_cookie("POST", "/console/logout", &cookie, None, None),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let (status, _, _) = call(
        &app,
        with_cookie("GET", "/api/overview", &cookie, None, None),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a closed session opens nothing"
    );
}
