//! Sessions belong to their principal (API key and `metadata.user`): another key or another
//! user continuing one gets 403 `session_forbidden` over `/v1` and `/api/requests`, without
//! learning whose it is; an operator may override it explicitly; a key's fixed metadata
//! (`server.apiKeys[].metadata`) cannot be overridden by a request; `user` and
//! `metadata.user` naming different users are refused.

use std::collections::BTreeMap;

use super::*;

const WEB: &str = "web-secret-1";
const APP: &str = "app-secret-2";
const OP: &str = "op-secret-3";
const ALICE_ONLY: &str = "alice-secret-4";

fn app_with_keys() -> (TempWorkspace, Router) {
    let ws = workspace_with(
        "
        defaultAgent: assistant
        server:
          apiKeys:
            - { env: WEB_KEY, role: client, name: web }
            - { env: APP_KEY, role: client, name: app }
            - { env: OP_KEY, role: operator, name: ops }
            - { env: ALICE_KEY, role: client, name: alice-app, metadata: { user: alice } }
        ",
    );
    let env = BTreeMap::from([
        ("WEB_KEY".to_owned(), WEB.to_owned()),
        ("APP_KEY".to_owned(), APP.to_owned()),
        ("OP_KEY".to_owned(), OP.to_owned()),
        ("ALICE_KEY".to_owned(), ALICE_ONLY.to_owned()),
    ]);
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .load_options(keel::LoadOptions {
            env,
            ..Default::default()
        })
        .build()
        .unwrap();
    (ws, keel_server::router(runtime))
}

/// A `/v1/chat/completions` turn of session `session` with `key` and these extra fields.
fn chat(key: &str, session: &str, extra: Value) -> Request<Body> {
    let mut body = json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .header("x-keel-session", session)
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Asserts a 403 `session_forbidden` that names neither the owner's key nor its user.
fn assert_forbidden(status: StatusCode, body: &[u8]) {
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "{}",
        String::from_utf8_lossy(body)
    );
    let value = assert_error(body, "invalid_request_error");
    assert_eq!(value["error"]["code"], "session_forbidden", "{value}");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("alice") && !message.contains("web"),
        "{message}"
    );
}

#[tokio::test]
async fn v1_sessions_refuse_another_key_or_user_and_accept_the_same_user_normalised() {
    let (_ws, app) = app_with_keys();
    let (status, _, body) = send(app.clone(), chat(WEB, "s1", json!({"user": "alice"}))).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));

    let (status, _, body) = send(app.clone(), chat(WEB, "s1", json!({"user": "bob"}))).await;
    assert_forbidden(status, &body);
    let (status, _, body) = send(
        app.clone(),
        chat(APP, "s1", json!({"metadata": {"user": "alice"}})),
    )
    .await;
    assert_forbidden(status, &body);

    // Full-width `ａｌｉｃｅ` is `alice` (NFKC).
    let (status, _, body) = send(
        app.clone(),
        chat(WEB, "s1", json!({"metadata": {"user": "ａｌｉｃｅ"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn v1_user_and_metadata_user_naming_different_users_are_refused() {
    let (_ws, app) = app_with_keys();
    let (status, _, body) = send(
        app.clone(),
        chat(
            WEB,
            "s2",
            json!({"user": "alice", "metadata": {"user": "bob"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let value = assert_error(&body, "invalid_request_error");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`user`") && message.contains("`metadata.user`"),
        "{message}"
    );
    // The same value in both is one user.
    let (status, _, body) = send(
        app,
        chat(
            WEB,
            "s2",
            json!({"user": "alice", "metadata": {"user": "alice"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

fn create(key: &str, body: Value) -> Request<Body> {
    request_with("POST", "/api/requests", Some(key), Some(&body))
}

#[tokio::test]
async fn api_requests_refuse_another_principal_unless_an_operator_overrides() {
    let (_ws, app) = app_with_keys();
    let turn = |user: &str| json!({"input": "Hi", "sessionId": "s3", "wait": true, "metadata": {"user": user}});
    let (status, _, body) = send(app.clone(), create(WEB, turn("alice"))).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));

    let (status, _, body) = send(app.clone(), create(APP, turn("alice"))).await;
    assert_forbidden(status, &body);
    let (status, _, body) = send(app.clone(), create(WEB, turn("bob"))).await;
    assert_forbidden(status, &body);
    // The operator key is another principal too, unless it says it overrides.
    let (status, _, body) = send(app.clone(), create(OP, turn("alice"))).await;
    assert_forbidden(status, &body);
    let mut overriding = turn("bob");
    overriding["overrideSessionOwner"] = json!(true);
    let (status, _, body) = send(app.clone(), create(WEB, overriding.clone())).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a client key may not override"
    );
    assert_error(&body, "invalid_request_error");
    let (status, _, body) = send(app.clone(), create(OP, overriding)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let id = answer["requestId"].as_str().unwrap();
    let uri = format!("/api/requests/{id}/events");
    let (status, _, body) = send(app.clone(), request_with("GET", &uri, Some(OP), None)).await;
    assert_eq!(status, StatusCode::OK);
    let events: Value = serde_json::from_slice(&body).unwrap();
    let started = &events["data"][0];
    assert_eq!(started["type"], "runtime.request.started", "{events}");
    assert_eq!(
        started["sessionOwnerOverridden"],
        json!({"key": "web", "user": "alice"}),
        "{events}"
    );

    // Operators read any session, owner included.
    let (status, _, body) =
        send(app, request_with("GET", "/api/sessions/s3", Some(OP), None)).await;
    assert_eq!(status, StatusCode::OK);
    let session: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        session["session"]["owner"],
        json!({"key": "web", "user": "alice"}),
        "{session}"
    );
}

#[tokio::test]
async fn a_keys_fixed_metadata_is_added_and_cannot_be_overridden_by_the_request() {
    let (_ws, app) = app_with_keys();
    let sent = json!({"input": "Hi", "sessionId": "s4", "wait": true, "metadata": {"user": "bob"}});
    let (status, _, body) = send(app.clone(), create(ALICE_ONLY, sent)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let value = assert_error(&body, "invalid_request_error");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("metadata.user"),
        "{value}"
    );
    let (status, _, body) = send(
        app.clone(),
        create(
            ALICE_ONLY,
            json!({"input": "Hi", "sessionId": "s4", "wait": true}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let (_, _, body) = send(app, request_with("GET", "/api/sessions/s4", Some(OP), None)).await;
    let session: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        session["session"]["owner"],
        json!({"key": "alice-app", "user": "alice"}),
        "{session}"
    );
}
