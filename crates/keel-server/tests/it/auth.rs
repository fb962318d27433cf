//! API keys and roles.

use std::collections::BTreeMap;

use super::*;

pub(super) const OPERATOR: &str = "op-secret-123";
pub(super) const CLIENT: &str = "client-secret-456";

/// The test workspace with an operator key, a client key and a key whose variable is unset.
pub(super) fn keyed_workspace() -> TempWorkspace {
    workspace_with(
        "
        defaultAgent: assistant
        server:
          apiKeys:
            - { env: OP_KEY, role: operator }
            - { env: CLIENT_KEY, role: client }
            - { env: UNSET_KEY, role: operator }
        ",
    )
}

pub(super) fn runtime(ws: &TempWorkspace) -> keel::Runtime {
    let env = BTreeMap::from([
        ("OP_KEY".to_owned(), OPERATOR.to_owned()),
        ("CLIENT_KEY".to_owned(), CLIENT.to_owned()),
    ]);
    keel::Runtime::builder()
        .workspace(ws.path())
        .load_options(keel::LoadOptions {
            env,
            ..Default::default()
        })
        .build()
        .unwrap()
}

fn get_with(uri: &str, key: Option<&str>) -> Request<Body> {
    let mut request = Request::get(uri);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    request.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn auth_configured_reflects_the_keys() {
    let ws = workspace();
    assert!(!keel_server::auth_configured(
        &keel::Runtime::builder()
            .workspace(ws.path())
            .build()
            .unwrap()
    ));
    let ws = keyed_workspace();
    assert!(keel_server::auth_configured(&runtime(&ws)));
}

/// Every route of the OpenAPI document (read with the operator key): method, a concrete
/// path (`{id}` → `x`) and the roles allowed.
async fn every_route(app: &Router) -> Vec<(String, String, Vec<String>)> {
    let (status, _, body) = send(app.clone(), get_with("/api/openapi.json", Some(OPERATOR))).await;
    assert_eq!(status, StatusCode::OK);
    let doc: Value = serde_json::from_slice(&body).unwrap();
    let mut routes = Vec::new();
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let roles = operation["security"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s.as_object().unwrap().keys().cloned())
                .collect();
            let concrete = path.replace("{id}", "x").replace("{name}", "x");
            routes.push((method.to_uppercase(), concrete, roles));
        }
    }
    assert!(routes.len() >= 25, "{routes:?}");
    routes
}

#[tokio::test]
async fn every_route_needs_a_valid_key() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    for (method, uri, roles) in every_route(&app).await {
        if roles.is_empty() {
            // Health, and the A2A agent cards (public by A2A's design; they name the scheme).
            let card = uri.ends_with("/.well-known/agent-card.json");
            assert!(uri == "/api/health" || card, "{uri} is public");
            let (status, _, _) = send(app.clone(), request_with(&method, &uri, None, None)).await;
            let found = status == StatusCode::OK || (card && status == StatusCode::NOT_FOUND);
            assert!(found, "{uri}: {status}");
            continue;
        }
        for key in [
            None,
            Some("wrong"),
            Some(""),
            Some("op-secret-12"),
            Some("op-secret-1234"),
        ] {
            let (status, _, body) = send(
                app.clone(),
                request_with(&method, &uri, key, Some(&json!({}))),
            )
            .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} {key:?}");
            if uri == "/v1/messages" {
                // The Anthropic facade answers in Anthropic's error shape.
                let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(value["type"], "error", "{value}");
                assert_eq!(value["error"]["type"], "authentication_error", "{value}");
                assert!(!value.to_string().contains(OPERATOR));
                continue;
            }
            let value = assert_error(&body, "invalid_request_error");
            assert_eq!(value["error"]["code"], "invalid_api_key");
            assert!(!value.to_string().contains(OPERATOR));
        }
    }
    // Not a bearer token.
    let request = Request::get("/v1/models")
        .header(header::AUTHORIZATION, OPERATOR)
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The key as Anthropic's SDKs send it.
    let request = Request::get("/v1/models")
        .header("x-api-key", OPERATOR)
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = send(app, request).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn client_keys_get_403_on_operator_routes_and_operators_pass_everywhere() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    let mut client_routes = 0;
    for (method, uri, roles) in every_route(&app).await {
        if roles.is_empty() {
            continue;
        }
        let (status, _, body) = send(
            app.clone(),
            request_with(&method, &uri, Some(CLIENT), Some(&json!({}))),
        )
        .await;
        if roles.contains(&"client".to_owned()) {
            client_routes += 1;
            assert!(
                status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                "{method} {uri}: {status}"
            );
        } else {
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}");
            assert_eq!(
                assert_error(&body, "invalid_request_error")["error"]["code"],
                "forbidden"
            );
        }
        let (status, _, _) = send(
            app.clone(),
            request_with(&method, &uri, Some(OPERATOR), Some(&json!({}))),
        )
        .await;
        assert!(
            status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
            "{method} {uri}: {status}"
        );
        assert!(!status.is_server_error(), "{method} {uri}: {status}");
    }
    // The facades, creating, listing and a request's record, events, trace, cancel and retry,
    // usage; AG-UI and A2A.
    assert_eq!(client_routes, 14);
}

/// Starts a run with `wait: true` as `key`; its request id.
async fn run_as(app: &Router, key: &str) -> String {
    let (status, _, body) = send(
        app.clone(),
        request_with(
            "POST",
            "/api/requests",
            Some(key),
            Some(&json!({"input": "Hi", "wait": true})),
        ),
    )
    .await;
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{value}");
    value["requestId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn client_keys_see_only_their_own_requests() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    let theirs = run_as(&app, OPERATOR).await;
    let mine = run_as(&app, CLIENT).await;

    for (method, suffix) in [
        ("GET", ""),
        ("GET", "/events"),
        ("POST", "/cancel"),
        ("POST", "/retry"),
    ] {
        let uri = format!("/api/requests/{theirs}{suffix}");
        let (status, _, body) =
            send(app.clone(), request_with(method, &uri, Some(CLIENT), None)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}");
        assert_error(&body, "invalid_request_error");
        let uri = format!("/api/requests/{mine}{suffix}");
        let (status, _, body) =
            send(app.clone(), request_with(method, &uri, Some(CLIENT), None)).await;
        let body = String::from_utf8_lossy(&body);
        assert!(status.is_success(), "{method} {uri}: {status} {body}");
    }

    // The list holds the client's runs only (its own run and the retry of it); operators
    // see everything.
    let (_, _, body) = send(app.clone(), get_with("/api/requests", Some(CLIENT))).await;
    let listed: Value = serde_json::from_slice(&body).unwrap();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["requestId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&mine.as_str()), "{listed}");
    assert!(!ids.contains(&theirs.as_str()), "{listed}");
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["owner"] == "CLIENT_KEY"),
        "{listed}"
    );
    let (_, _, body) = send(app.clone(), get_with("/api/requests", Some(OPERATOR))).await;
    let listed: Value = serde_json::from_slice(&body).unwrap();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["requestId"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&mine.as_str()) && ids.contains(&theirs.as_str()));

    // Approving needs an operator.
    let (status, _, _) = send(
        app.clone(),
        request_with(
            "POST",
            "/api/approvals/any/approve",
            Some(CLIENT),
            Some(&json!({})),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_openapi_document_declares_security_only_when_keys_are_configured() {
    let document = |app: Router, key: Option<&'static str>| async move {
        let (status, _, body) = send(app, get_with("/api/openapi.json", key)).await;
        assert_eq!(status, StatusCode::OK);
        serde_json::from_slice::<Value>(&body).unwrap()
    };
    let ws = keyed_workspace();
    let keyed = document(keel_server::router(runtime(&ws)), Some(OPERATOR)).await;
    assert_eq!(
        keyed["components"]["securitySchemes"]["operator"]["scheme"],
        "bearer"
    );
    let paths = &keyed["paths"];
    assert_eq!(paths["/api/health"]["get"]["security"], json!([]));
    assert_eq!(
        paths["/api/requests"]["get"]["security"],
        json!([{ "client": [] }, { "operator": [] }])
    );
    assert_eq!(
        paths["/api/tasks"]["get"]["security"],
        json!([{ "operator": [] }])
    );

    let open_ws = workspace();
    let open = document(app(&open_ws), None).await;
    assert!(
        open["components"].get("securitySchemes").is_none(),
        "{open}"
    );
    let declared = open["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|ops| ops.as_object().unwrap().values())
        .filter(|op| op.get("security").is_some())
        .count();
    assert_eq!(declared, 0, "no operation declares security without keys");
}

/// A client key with a daily budget: its runs' cost (12 prompt and 3 completion tokens at
/// 1,000 and 10,000 per million: 0.042 a run) counts from the store; once spent, the facade
/// answers 429 `insufficient_quota` with the time left in the day, and the operator key,
/// which has no budget, goes on.
#[tokio::test]
async fn a_key_whose_daily_budget_is_spent_gets_429_until_the_day_ends() {
    let ws = WorkspaceBuilder::new()
        .runtime(
            "{ defaultAgent: assistant, server: { apiKeys: [ { env: OP_KEY, role: operator }, { env: CLIENT_KEY, role: client, name: acme, budget: \"0.08 USD\" } ] } }",
        )
        .priced_scripted_model("m", (12, 3), "{ inputPerMTok: 1000, outputPerMTok: 10000 }")
        .agent("assistant", "{ model: m }")
        .build();
    let app = keel_server::router(runtime(&ws));
    let chat = json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]});
    for spent in ["0.042", "0.084"] {
        let (status, _, body) = send(
            app.clone(),
            request_with("POST", "/v1/chat/completions", Some(CLIENT), Some(&chat)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let (_, _, usage) = send(
            app.clone(),
            request_with("GET", "/api/usage?by=key", Some(CLIENT), None),
        )
        .await;
        let usage: Value = serde_json::from_slice(&usage).unwrap();
        assert_eq!(
            usage["data"][0]["usage"]["cost"]["amount"], spent,
            "{usage}"
        );
    }
    let response = app
        .clone()
        .oneshot(request_with(
            "POST",
            "/v1/chat/completions",
            Some(CLIENT),
            Some(&chat),
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let error = assert_error(&body, "insufficient_quota");
    assert_eq!(error["error"]["code"], "budget_exceeded");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has spent 0.084 USD today, its daily budget is 0.08 USD"),
        "{error}"
    );
    let wait: u64 = headers
        .get(header::RETRY_AFTER)
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    let (status, _, _) = send(
        app,
        request_with("POST", "/v1/chat/completions", Some(OPERATOR), Some(&chat)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "another key is not held back");
}
