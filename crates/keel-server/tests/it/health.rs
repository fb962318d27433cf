//! `GET /api/health` checks what it reports: the store (a read and a write), the workspace and
//! each model's provider; 503 when the store is not usable.

use super::*;

async fn health_of(app: Router) -> (StatusCode, Value) {
    let (status, _, body) = send(
        app,
        Request::get("/api/health").body(Body::empty()).unwrap(),
    )
    .await;
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn health_reports_the_store_the_workspace_and_the_models() {
    let ws = workspace();
    let (status, health) = health_of(app(&ws)).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(
        health["store"],
        json!({
            "status": "ok",
            "kind": "sqlite",
            "schemaVersion": keel_store::SCHEMA_VERSION,
            "writable": true,
        })
    );
    assert_eq!(
        health["workspace"]["documents"],
        json!({"agents": 1, "models": 1, "tools": 0, "policies": 0, "hooks": 0, "mcpServers": 0})
    );
    let loaded_at = health["workspace"]["loadedAt"].as_str().unwrap();
    assert!(
        loaded_at.ends_with('Z') && loaded_at.len() == 24,
        "{loaded_at}"
    );
    assert_eq!(
        health["models"],
        json!([{"name": "m", "provider": "scripted", "status": "ready"}])
    );
}

#[tokio::test]
async fn a_model_without_its_api_key_makes_health_degraded() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
        )
        .model(
            "gpt",
            "{ provider: openai, model: gpt-4o, apiKeyEnv: KEEL_HEALTH_TEST_KEY_NEVER_SET }",
        )
        .agent("assistant", "{ model: m }")
        .agent("writer", "{ model: gpt }")
        .build();
    let (status, health) = health_of(app(&ws)).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    let models = health["models"].as_array().unwrap();
    let gpt = models.iter().find(|m| m["name"] == "gpt").unwrap();
    assert_eq!(gpt["provider"], "openai");
    assert_eq!(gpt["status"], "unconfigured");
    assert!(
        gpt["error"]
            .as_str()
            .unwrap()
            .contains("KEEL_HEALTH_TEST_KEY_NEVER_SET"),
        "{gpt}"
    );
    let m = models.iter().find(|m| m["name"] == "m").unwrap();
    assert_eq!(m["status"], "ready");
}

#[tokio::test]
async fn an_mcp_server_that_is_down_makes_health_degraded_and_the_inventory_says_why() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
        )
        .agent("assistant", "{ model: m, tools: [\"mcp__gone__*\"] }")
        .document(
            "McpServer",
            "gone",
            "transport: stdio\ncommand: [\"./no-such-server\"]\n",
        )
        .build();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    runtime.settle_mcp().await;
    let app = keel_server::router(runtime.clone());
    let (status, health) = health_of(app.clone()).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(
        health["mcpServers"],
        json!([{"name": "gone", "state": "unavailable", "tools": 0, "restarts": 0}])
    );
    let (status, _, body) = send(
        app,
        Request::get("/api/inventory").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let inventory: Value = serde_json::from_slice(&body).unwrap();
    let server = &inventory["mcpServers"][0];
    assert_eq!(server["name"], "gone");
    assert_eq!(server["transport"], "stdio");
    assert!(
        server["lastError"]
            .as_str()
            .unwrap()
            .contains("program not found"),
        "{server}"
    );
    runtime.stop_mcp().await;
}

/// The health of a server whose store was made unusable while it ran: the database file is
/// removed (`gone`) or replaced by a folder — both work as root, unlike permission bits.
async fn health_after(break_store: impl FnOnce(&std::path::Path)) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = workspace();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(keel_server::serve(
        runtime,
        keel_server::Telemetry::new(),
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let client = reqwest::Client::new();
    let before = client
        .get(format!("{base}/api/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(before.status().as_u16(), 200);
    break_store(&ws.path().join(".keel"));
    let after = client
        .get(format!("{base}/api/health"))
        .send()
        .await
        .unwrap();
    let status = after.status().as_u16();
    let body: Value = after.json().await.unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    (status, body)
}

#[tokio::test]
async fn health_is_503_when_the_database_file_is_gone() {
    let (status, health) = health_after(|keel| std::fs::remove_dir_all(keel).unwrap()).await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["status"], "unavailable");
    assert_eq!(health["store"]["status"], "unavailable");
    let error = health["store"]["error"].as_str().unwrap();
    assert!(error.contains("cannot be read or written"), "{error}");
    // A public route: no paths or other internals.
    assert!(!health.to_string().contains(".keel"), "{health}");
    assert_eq!(health["workspace"]["documents"]["agents"], 1);
}

#[tokio::test]
async fn health_is_503_when_the_database_file_is_replaced_by_a_folder() {
    let (status, health) = health_after(|keel| {
        let db = keel.join("keel.db");
        std::fs::remove_file(&db).unwrap();
        std::fs::create_dir(&db).unwrap();
    })
    .await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["store"]["status"], "unavailable", "{health}");
}
