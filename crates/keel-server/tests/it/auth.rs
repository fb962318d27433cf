//! API keys and roles.

use std::collections::BTreeMap;

use super::*;

const OPERATOR: &str = "op-secret-123";
const CLIENT: &str = "client-secret-456";

/// The test workspace with an operator key, a client key and a key whose variable is unset.
fn keyed_workspace() -> TempWorkspace {
    let ws = workspace();
    let path = ws.path().join("config/keel.yaml");
    let config = std::fs::read_to_string(&path).unwrap().replacen(
        "  defaultAgent: assistant\n",
        "  defaultAgent: assistant\n  server:\n    apiKeys:\n      - { env: OP_KEY, role: operator }\n      - { env: CLIENT_KEY, role: client }\n      - { env: UNSET_KEY, role: operator }\n",
        1,
    );
    assert!(config.contains("apiKeys"));
    ws.write("config/keel.yaml", &config);
    ws
}

fn runtime(ws: &TempWorkspace) -> keel::Runtime {
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

#[tokio::test]
async fn missing_or_wrong_keys_are_401() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    for uri in [
        "/v1/models",
        "/v1/capabilities",
        "/api/requests",
        "/api/approvals",
    ] {
        for key in [None, Some("wrong"), Some(""), Some("op-secret-12")] {
            let (status, _, body) = send(app.clone(), get_with(uri, key)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri} {key:?}");
            let value = assert_error(&body, "invalid_request_error");
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
    // Health stays open.
    let (status, _, _) = send(app, get_with("/api/health", None)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn client_keys_may_use_v1_only() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    let (status, _, _) = send(app.clone(), get_with("/v1/models", Some(CLIENT))).await;
    assert_eq!(status, StatusCode::OK);
    for uri in [
        "/api/requests",
        "/api/approvals",
        "/api/requests/run_x/events",
    ] {
        let (status, _, body) = send(app.clone(), get_with(uri, Some(CLIENT))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri}");
        assert_error(&body, "invalid_request_error");
    }
}

#[tokio::test]
async fn operator_keys_may_use_everything() {
    let ws = keyed_workspace();
    let app = keel_server::router(runtime(&ws));
    for uri in [
        "/v1/models",
        "/v1/capabilities",
        "/api/requests",
        "/api/approvals",
    ] {
        let (status, _, _) = send(app.clone(), get_with(uri, Some(OPERATOR))).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
}
