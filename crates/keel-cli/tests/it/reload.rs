//! `keel serve` reloads its workspace — on SIGHUP, on `POST /api/workspace/reload` and, with
//! `server.watch: true`, when a configuration file changes — validating it first: an invalid
//! one is refused and the loaded one keeps serving; a run in flight finishes on the workspace
//! it started with; each reload is recorded (`runtime.workspace.reloaded`) and `/api/health`
//! shows the loaded digest.

use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

/// The old model waits in a tool when asked to (so a run stays in flight) and answers "old
/// answer"; the new one answers "new answer".
fn workspace(runtime: &str) -> TempWorkspace {
    let old = json!({"conversations": [
        {"match": "wait", "steps": [
            {"toolCalls": [{"name": "gate", "arguments": {}}]},
            {"text": "old answer"},
        ]},
        {"steps": [{"text": "old answer"}]},
    ]});
    let new = json!({"conversations": [{"steps": [{"text": "new answer"}]}]});
    WorkspaceBuilder::new()
        .runtime(runtime)
        .scripted_model("m", &old)
        .file("scripts/new.json", new.to_string())
        .agent("assistant", "{ model: m, tools: [gate] }")
        .tool(
            "gate",
            r#"
            description: Waits until the test lets it go.
            impl:
              kind: command
              command: ["sh", "-c", "touch started; while [ ! -e release ]; do sleep 0.05; done; echo released"]
            policy: allow
            "#,
        )
        .build()
}

/// Points model `m` at `script` in the workspace's configuration.
fn use_script(ws: &TempWorkspace, from: &str, to: &str) {
    let path = ws.path().join("config/keel.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

struct Http {
    base: String,
    client: reqwest::Client,
}

impl Http {
    fn new(addr: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn digest(&self) -> String {
        let health = self.get("/api/health").await;
        health["workspace"]["digest"]
            .as_str()
            .unwrap_or_else(|| panic!("no digest: {health}"))
            .to_owned()
    }

    /// Runs `input` to its end and returns its answer.
    async fn answer(&self, input: &str) -> String {
        let (status, run) = self
            .post("/api/requests", json!({"input": input, "wait": true}))
            .await;
        assert_eq!(status, 200, "{run}");
        run["output"].as_str().unwrap_or_default().to_owned()
    }
}

/// Polls `check` until it holds (generous limit: a loaded CI machine).
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_the_route_reload_validated_runs_in_flight_keep_their_workspace() {
    let ws = workspace("{ defaultAgent: assistant }");
    let mut server = keel_in(&ws).serve();
    let http = Http::new(server.addr());
    let first = http.digest().await;
    assert!(first.starts_with("sha256:"), "{first}");

    // A run in flight, waiting in its tool.
    let (status, started) = http
        .post("/api/requests", json!({"input": "wait for the gate"}))
        .await;
    assert_eq!(status, 202, "{started}");
    let in_flight = started["requestId"].as_str().unwrap().to_owned();
    until("the run to reach its tool", || async {
        ws.path().join("started").exists()
    })
    .await;

    // SIGHUP: the new workspace serves the next run.
    use_script(&ws, "scripts/m.json", "scripts/new.json");
    let pid = server.child().id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    until("health to show the reloaded digest", || async {
        http.digest().await != first
    })
    .await;
    let second = http.digest().await;
    assert_eq!(http.answer("hello").await, "new answer");

    // The run in flight finishes on the workspace it started with.
    std::fs::write(ws.path().join("release"), "").unwrap();
    until("the run in flight to end", || async {
        http.get(&format!("/api/requests/{in_flight}")).await["status"] != "running"
    })
    .await;
    let run = http.get(&format!("/api/requests/{in_flight}")).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], "old answer", "{run}");

    // An invalid workspace is refused with its errors; the loaded one keeps serving.
    let path = ws.path().join("config/keel.yaml");
    let valid = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, valid.replace("model: m,", "model: nowhere,")).unwrap();
    let (status, refused) = http.post("/api/workspace/reload", json!({})).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("config/keel.yaml") && message.contains("nowhere"),
        "{message}"
    );
    assert_eq!(http.digest().await, second);
    assert_eq!(http.answer("hello").await, "new answer");

    // The route reloads a valid change, and records it.
    std::fs::write(&path, valid.replace("scripts/new.json", "scripts/m.json")).unwrap();
    let (status, reloaded) = http.post("/api/workspace/reload", json!({})).await;
    assert_eq!(status, 200, "{reloaded}");
    assert_eq!(reloaded["changed"], true, "{reloaded}");
    assert_eq!(
        reloaded["changes"],
        json!(["Model/m (changed)"]),
        "{reloaded}"
    );
    // The same documents as at the start: the same digest.
    assert_eq!(reloaded["digest"], first.as_str(), "{reloaded}");
    assert_eq!(http.digest().await, first);
    assert_eq!(http.answer("hello").await, "old answer");
    let run = reloaded["run"].as_str().unwrap();
    let events = http.get(&format!("/api/requests/{run}/events")).await;
    let events = events["data"].as_array().unwrap();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [
            "runtime.request.started",
            "runtime.workspace.reloaded",
            "runtime.request.completed"
        ],
        "{events:?}"
    );
    assert_eq!(events[1]["digest"], first.as_str());
    assert_eq!(events[1]["changes"], json!(["Model/m (changed)"]));

    // The SIGHUP's reload is recorded too: two reload runs in all.
    let reloads = http.get("/api/requests?agent=workspace").await;
    let digests: Vec<Value> = futures_digests(&http, &reloads).await;
    assert_eq!(digests, [json!(first), json!(second)], "{reloads}");
}

/// The `runtime.workspace.reloaded` digests of the listed reload runs, newest first.
async fn futures_digests(http: &Http, runs: &Value) -> Vec<Value> {
    let mut digests = Vec::new();
    for run in runs["data"].as_array().unwrap() {
        let id = run["requestId"].as_str().unwrap();
        let events = http.get(&format!("/api/requests/{id}/events")).await;
        let reloaded = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "runtime.workspace.reloaded")
            .cloned()
            .unwrap_or(Value::Null);
        digests.push(reloaded["digest"].clone());
    }
    digests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_a_changed_file_is_picked_up() {
    let ws = workspace("{ defaultAgent: assistant, server: { watch: true } }");
    let server = keel_in(&ws).serve();
    let http = Http::new(server.addr());
    let first = http.digest().await;
    assert_eq!(http.answer("hello").await, "old answer");

    use_script(&ws, "scripts/m.json", "scripts/new.json");
    until("health to show the changed file's digest", || async {
        http.digest().await != first
    })
    .await;
    assert_eq!(http.answer("hello").await, "new answer");
}
