//! The routes beyond requests and approvals (sessions, tasks, tools, artifacts, inventory,
//! metrics, OpenAPI), the facade's message mapping, sessions and progress opt-in, and the
//! server's limits (429 when full, request timeout, slow clients).

use std::time::Duration;

use super::*;

/// A workspace whose scripted model answers by keyword: `slow` after 3 s, `big` with 2 MiB
/// of text, `files` by listing the folder first; anything else "Hello there".
/// `runtime_extra` continues the runtime spec (lines indented by two; by four to add limits).
fn rich_builder(runtime_extra: &str) -> WorkspaceBuilder {
    let big = "x".repeat(2 * 1024 * 1024);
    let script = json!({"conversations": [
        {"match": "(?i)slow", "steps": [{"text": "slow answer", "delay": "3s"}]},
        {"match": "(?i)big", "steps": [{"text": big, "chunkSize": 1024}]},
        {"match": "(?i)files", "steps": [
            {"toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "Listed."}
        ]},
        {"steps": [{"text": "Hello there", "chunkSize": 4}]}
    ]});
    WorkspaceBuilder::new()
        .runtime(&format!(
            "  defaultAgent: assistant\n  limits:\n    maxToolOutputBytes: 1024\n{runtime_extra}"
        ))
        .scripted_model("m", &script)
        .agent(
            "assistant",
            "{ model: m, tools: [list_dir, read_file, dump] }",
        )
        .tool(
            "dump",
            "
            description: Print big.txt.
            schema: { type: object }
            policy: allow
            impl: { kind: command, command: [cat, big.txt] }
            ",
        )
        .file("notes.txt", "first notes")
        .file("other.txt", "other notes")
        .file("big.txt", "0123456789\n".repeat(400))
}

/// The workspace [`rich_builder`] lays out.
pub(crate) fn rich_workspace(runtime_extra: &str) -> TempWorkspace {
    rich_builder(runtime_extra).build()
}

pub(crate) fn rich_app(ws: &TempWorkspace) -> Router {
    keel_server::router(
        keel::Runtime::builder()
            .workspace(ws.path())
            .build()
            .unwrap(),
    )
}

pub(crate) async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let (status, _, bytes) = send(app.clone(), request_with(method, uri, None, body)).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

pub(crate) fn chat(input: &str, stream: bool) -> Value {
    json!({"model": "assistant", "messages": [{"role": "user", "content": input}], "stream": stream})
}

/// The only run's record, once it has ended.
async fn wait_until_ended(app: &Router) -> Value {
    for _ in 0..200 {
        let (_, listed) = call(app, "GET", "/api/requests", None).await;
        if let Some(run) = listed["data"].as_array().and_then(|d| d.first())
            && !matches!(run["status"].as_str(), Some("running" | "queued"))
        {
            return run.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run did not end");
}

#[tokio::test]
async fn earlier_messages_become_the_runs_history() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let body = json!({"model": "assistant", "messages": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
        {"role": "user", "content": "What is my name?"}
    ]});
    let (status, value) = call(&app, "POST", "/v1/chat/completions", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let id = value["id"]
        .as_str()
        .unwrap()
        .trim_start_matches("chatcmpl-")
        .to_owned();
    let (_, run) = call(&app, "GET", &format!("/api/requests/{id}"), None).await;
    assert_eq!(run["input"], "What is my name?");
    let (_, events) = call(&app, "GET", &format!("/api/requests/{id}/events"), None).await;
    let started = &events["data"][0];
    assert_eq!(started["type"], "runtime.request.started");
    let history = started["history"].as_array().unwrap();
    assert_eq!(history.len(), 3, "{started}");
    assert_eq!(history[0]["role"], "system");
    assert_eq!(history[2]["content"], "Hello Ada.");
}

#[tokio::test]
async fn the_session_header_makes_turns_of_a_stored_session() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    for input in ["one", "two"] {
        let request = Request::post("/v1/chat/completions")
            .header(header::CONTENT_TYPE, "application/json")
            .header("X-Keel-Session", "s-1")
            .body(Body::from(chat(input, false).to_string()))
            .unwrap();
        let (status, _, body) = send(app.clone(), request).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    }
    let (status, listed) = call(&app, "GET", "/api/sessions", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"][0]["sessionId"], "s-1", "{listed}");
    let (status, session) = call(&app, "GET", "/api/sessions/s-1", None).await;
    assert_eq!(status, StatusCode::OK);
    let messages = session["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{session}");
    let (_, runs) = call(&app, "GET", "/api/requests?session=s-1", None).await;
    assert_eq!(runs["data"].as_array().unwrap().len(), 2);

    let (status, deleted) = call(&app, "DELETE", "/api/sessions/s-1", None).await;
    assert_eq!(
        (status, deleted),
        (StatusCode::OK, json!({"deleted": true}))
    );
    let (status, _) = call(&app, "DELETE", "/api/sessions/s-1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, "GET", "/api/sessions/s-1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn progress_events_are_sent_only_to_clients_that_opt_in() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (status, _, plain) = send(app.clone(), post_json(&chat("files please", true))).await;
    assert_eq!(status, StatusCode::OK);
    let plain = String::from_utf8(plain).unwrap();
    assert!(!plain.contains("event:"), "{plain}");
    assert!(plain.contains("Listed.") && plain.ends_with("data: [DONE]\n\n"));

    let request = Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .header("X-Keel-Progress", "true")
        .body(Body::from(chat("files please", true).to_string()))
        .unwrap();
    let (status, _, body) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    let progress: Vec<Value> = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("event: keel\ndata: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let kinds: Vec<&str> = progress
        .iter()
        .map(|e| {
            e["event"]["kind"]
                .as_str()
                .or(e["type"].as_str())
                .unwrap_or("")
        })
        .collect();
    assert!(
        progress
            .iter()
            .any(|e| e["type"] == "runtime.adapter.event"),
        "{kinds:?}"
    );
    // The standard frames are all still there, in order.
    let chunks: String = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(chunks, "Listed.");

    let request = Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .header("X-Keel-Progress", "maybe")
        .body(Body::from(chat("hi", true).to_string()))
        .unwrap();
    let (status, _, body) = send(app, request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "invalid_request_error");
}

#[tokio::test]
async fn a_client_that_does_not_read_never_holds_up_the_run() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    // Small answer: the run completes while nobody reads; the stream is whole afterwards.
    let response = app
        .clone()
        .oneshot(post_json(&chat("hi", true)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let run = wait_until_ended(&app).await;
    assert_eq!(run["status"], "completed");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains("\"finish_reason\":\"stop\"") && text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn a_client_too_far_behind_loses_the_stream_but_not_the_run() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    // 2 MiB of answer, more than a stream buffers for an idle client.
    let response = app
        .clone()
        .oneshot(post_json(&chat("big", true)))
        .await
        .unwrap();
    let run = wait_until_ended(&app).await;
    assert_eq!(run["status"], "completed");
    assert_eq!(run["output"].as_str().unwrap().len(), 2 * 1024 * 1024);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(body.len() < 1024 * 1024, "{} bytes", body.len());
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains("read too slowly"),
        "{}",
        &text[..text.len().min(500)]
    );
    assert!(text.contains(run["requestId"].as_str().unwrap()));
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn a_full_server_answers_429_with_retry_after() {
    let ws = rich_workspace("    maxConcurrentRuns: 1\n  server:\n    maxQueuedRequests: 0\n");
    let app = rich_app(&ws);
    let (status, started) = call(
        &app,
        "POST",
        "/api/requests",
        Some(&json!({"input": "slow"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let response = app
        .clone()
        .oneshot(post_json(&chat("hi", false)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = assert_error(&body, "rate_limit_error");
    assert_eq!(value["error"]["code"], "rate_limit_exceeded");
    // Once the run ends its place is free again.
    let id = started["requestId"].as_str().unwrap();
    let (status, _) = call(&app, "POST", &format!("/api/requests/{id}/cancel"), None).await;
    assert_eq!(status, StatusCode::OK);
    wait_until_ended(&app).await;
    let mut answered = StatusCode::TOO_MANY_REQUESTS;
    for _ in 0..100 {
        let (status, _) = call(
            &app,
            "POST",
            "/v1/chat/completions",
            Some(&chat("hi", false)),
        )
        .await;
        answered = status;
        if status != StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(answered, StatusCode::OK);
}

#[tokio::test]
async fn a_request_past_the_server_timeout_is_504_and_recorded() {
    let ws = rich_workspace("  server:\n    requestTimeout: 300ms\n");
    let app = rich_app(&ws);
    let (status, value) = call(
        &app,
        "POST",
        "/v1/chat/completions",
        Some(&chat("slow", false)),
    )
    .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{value}");
    assert_eq!(value["error"]["code"], "timeout");
    let run = wait_until_ended(&app).await;
    assert_eq!(run["finishReason"], "timeout", "{run}");
}

#[tokio::test]
async fn retry_runs_an_ended_request_again() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (_, first) = call(
        &app,
        "POST",
        "/api/requests",
        Some(&json!({"input": "hi", "wait": true})),
    )
    .await;
    let id = first["requestId"].as_str().unwrap();
    let (status, retried) = call(
        &app,
        "POST",
        &format!("/api/requests/{id}/retry"),
        Some(&json!({"wait": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["output"], "Hello there");
    let new_id = retried["requestId"].as_str().unwrap();
    assert_ne!(new_id, id);
    let (_, run) = call(&app, "GET", &format!("/api/requests/{new_id}"), None).await;
    assert_eq!(run["links"]["retryOf"], id, "{run}");
    assert_eq!(run["input"], "hi");

    // A run still going cannot be retried; an unknown one is 404.
    let (_, slow) = call(
        &app,
        "POST",
        "/api/requests",
        Some(&json!({"input": "slow"})),
    )
    .await;
    let slow = slow["requestId"].as_str().unwrap();
    let (status, value) = call(&app, "POST", &format!("/api/requests/{slow}/retry"), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{value}");
    call(&app, "POST", &format!("/api/requests/{slow}/cancel"), None).await;
    let (status, _) = call(&app, "POST", "/api/requests/nope/retry", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn requests_page_with_a_cursor() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (_, run) = call(
            &app,
            "POST",
            "/api/requests",
            Some(&json!({"input": "hi", "wait": true})),
        )
        .await;
        ids.push(run["requestId"].as_str().unwrap().to_owned());
    }
    let mut seen = Vec::new();
    let mut uri = "/api/requests?limit=2".to_owned();
    loop {
        let (status, page) = call(&app, "GET", &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(
            data.iter()
                .map(|r| r["requestId"].as_str().unwrap().to_owned()),
        );
        match page["nextCursor"].as_str() {
            Some(cursor) => uri = format!("/api/requests?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "every run once, newest first");

    // Events page too.
    let (_, page) = call(
        &app,
        "GET",
        &format!("/api/requests/{}/events?limit=2", ids[0]),
        None,
    )
    .await;
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    assert_eq!(page["nextAfter"], 2);
    let (_, rest) = call(
        &app,
        "GET",
        &format!("/api/requests/{}/events?after=2", ids[0]),
        None,
    )
    .await;
    assert!(rest["nextAfter"].is_null());
    assert_eq!(rest["data"][0]["seq"], 3);
}

#[tokio::test]
async fn tasks_are_staged_patched_run_and_deleted() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (status, task) = call(
        &app,
        "POST",
        "/api/tasks",
        Some(&json!({"tool": "read_file", "arguments": {"path": "notes.txt"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{task}");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let (status, listed) = call(&app, "GET", "/api/tasks", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"][0]["taskId"], id.as_str());
    let (status, patched) = call(
        &app,
        "PATCH",
        &format!("/api/tasks/{id}"),
        Some(&json!({"path": "other.txt"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["arguments"]["path"], "other.txt");
    let (status, ran) = call(&app, "POST", &format!("/api/tasks/{id}/run"), None).await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert!(
        ran["output"].as_str().unwrap().contains("other notes"),
        "{ran}"
    );
    let (_, task) = call(&app, "GET", &format!("/api/tasks/{id}"), None).await;
    assert_eq!(task["requestId"], ran["requestId"]);
    let (status, _) = call(&app, "DELETE", &format!("/api/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    for (method, uri) in [
        ("GET", format!("/api/tasks/{id}")),
        ("DELETE", format!("/api/tasks/{id}")),
        ("POST", format!("/api/tasks/{id}/run")),
    ] {
        let (status, _) = call(&app, method, &uri, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}");
    }
    let (status, _) = call(&app, "PATCH", &format!("/api/tasks/{id}"), Some(&json!({}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_task_denied_by_policy_says_why() {
    let ws = rich_builder("")
        .policy(
            "default",
            r#"
            rules:
              - { tool: read_file, args: { path: "secret*" }, decision: deny, reason: "secrets stay put" }
            "#,
        )
        .build();
    let app = rich_app(&ws);
    let (status, task) = call(
        &app,
        "POST",
        "/api/tasks",
        Some(&json!({"tool": "read_file", "arguments": {"path": "secret.txt"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{task}");
    assert_eq!(task["decision"], "deny", "{task}");
    assert_eq!(task["issues"][0]["message"], "secrets stay put", "{task}");
}

#[tokio::test]
async fn tools_are_listed_called_directly_and_their_big_output_is_an_artifact() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (status, tools) = call(&app, "GET", "/api/tools", None).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = tools["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"dump"),
        "{names:?}"
    );
    let (status, _) = call(&app, "GET", "/api/tools?agent=nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, called) = call(
        &app,
        "POST",
        "/api/tools/dump/call",
        Some(&json!({"arguments": {}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{called}");
    let id = called["requestId"].as_str().unwrap();
    let (_, events) = call(&app, "GET", &format!("/api/requests/{id}/events"), None).await;
    let artifact = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "runtime.artifact.created")
        .unwrap_or_else(|| panic!("no artifact in {events}"))["artifact"]
        .clone();
    let artifact_id = artifact["id"].as_str().unwrap();
    let (status, content_type, content) = send(
        app.clone(),
        request_with("GET", &format!("/api/artifacts/{artifact_id}"), None, None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.unwrap().starts_with("text/"));
    assert!(
        String::from_utf8(content)
            .unwrap()
            .contains(&"0123456789\n".repeat(400))
    );
    let (status, meta) = call(
        &app,
        "GET",
        &format!("/api/artifacts/{artifact_id}?meta=true"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(meta["sha256"], artifact["sha256"]);
    let (status, _) = call(&app, "GET", "/api/artifacts/0000", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&app, "GET", "/api/artifacts/..%2Fkeel.db", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, stats) = call(&app, "GET", "/api/tools/stats", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        stats["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["tool"] == "dump" && s["calls"] == 1),
        "{stats}"
    );

    // A call that fails validation is blocked in the gateway, recorded, and answered.
    let (status, blocked) = call(
        &app,
        "POST",
        "/api/tools/read_file/call",
        Some(&json!({"arguments": {"nope": 1}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{blocked}");
    assert_ne!(blocked["status"], "completed", "{blocked}");
}

#[tokio::test]
async fn inventory_lists_the_workspace_without_secrets() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (status, inventory) = call(&app, "GET", "/api/inventory", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(inventory["agents"][0]["name"], "assistant");
    assert_eq!(inventory["agents"][0]["default"], true);
    assert_eq!(inventory["models"][0]["provider"], "scripted");
    let read_file = inventory["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap();
    assert_eq!(read_file["agents"], json!(["assistant"]));
    assert_eq!(read_file["builtin"], true);
}

#[tokio::test]
async fn metrics_show_runs_latencies_tokens_and_approvals() {
    let ws = rich_workspace("");
    let telemetry = keel_server::Telemetry::new();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .observer(telemetry.observer())
        .build()
        .unwrap();
    let app = keel_server::router_with(runtime, telemetry);
    let (status, _) = call(
        &app,
        "POST",
        "/v1/chat/completions",
        Some(&chat("files", false)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, content_type, body) =
        send(app.clone(), request_with("GET", "/metrics", None, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = String::from_utf8(body).unwrap();
    for expected in [
        "keel_runs{status=\"completed\"} 1",
        "keel_runs_finished_total{status=\"completed\"} 1",
        "keel_model_latency_seconds_count{agent=\"assistant\",model=\"m\"} 2",
        "keel_tool_latency_seconds_count{tool=\"list_dir\",ok=\"true\"} 1",
        "keel_model_tokens_total{agent=\"assistant\",model=\"m\",kind=\"completion\"}",
        "keel_approvals_pending 0",
        "keel_http_runs_in_flight 0",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    // The process's live Tokio tasks, a count.
    let tasks = text
        .lines()
        .find_map(|line| line.strip_prefix("keel_tasks_alive "))
        .unwrap_or_else(|| panic!("no keel_tasks_alive in:\n{text}"));
    assert!(tasks.parse::<u64>().is_ok(), "{tasks}");
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test]
async fn metrics_count_rate_limit_waits_fallbacks_and_cache_tokens() {
    let ws = rich_workspace("");
    let telemetry = keel_server::Telemetry::new();
    let observer = telemetry.observer();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let app = keel_server::router_with(runtime, telemetry);
    let event = |payload: keel::EventPayload| keel::Event {
        id: keel::EventId::generate(),
        seq: 1,
        ts: String::new(),
        request_id: keel::RequestId::from("run_1"),
        session_id: None,
        agent_id: "assistant".into(),
        payload,
    };
    for wait_ms in [120, 480] {
        observer.observe(&event(keel::EventPayload::ModelQueued {
            step: 1,
            model: "sonnet".into(),
            wait_ms,
        }));
    }
    observer.observe(&event(keel::EventPayload::ModelFallback {
        step: 2,
        from: "sonnet".into(),
        to: "gpt".into(),
        reason: keel::ErrorInfo::new(keel::ErrorCode::ModelUnavailable, "Overloaded"),
        note: None,
    }));
    observer.observe(&event(keel::EventPayload::ModelCompleted {
        step: 2,
        stop_reason: keel::ModelStopReason::Stop,
        usage: keel::Usage {
            cache_read_tokens: 300,
            cost: Some(keel::Cost {
                amount: "0.0015".parse().unwrap(),
                currency: keel::Currency::USD,
            }),
            ..keel::Usage::new(420, 6)
        },
        latency_ms: 40,
        content: "Hi.".into(),
        tool_calls: Vec::new(),
        thinking: Vec::new(),
    }));
    let (status, _, body) = send(app, request_with("GET", "/metrics", None, None)).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    for expected in [
        "keel_model_queue_wait_seconds_count{model=\"sonnet\"} 2",
        "keel_model_queue_wait_seconds_sum{model=\"sonnet\"} 0.6",
        "keel_model_fallbacks_total{from=\"sonnet\",to=\"gpt\"} 1",
        "keel_model_tokens_total{agent=\"assistant\",model=\"m\",kind=\"cache_read\"} 300",
        "keel_cost_total{agent=\"assistant\",model=\"m\",currency=\"USD\"} 0.0015",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
    assert!(
        !text.contains("kind=\"cache_write\""),
        "none were written:\n{text}"
    );
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    let (status, doc) = call(&app, "GET", "/api/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for path in [
        "/v1/chat/completions",
        "/api/requests",
        "/api/requests/{id}/events",
        "/api/requests/{id}/retry",
        "/api/sessions/{id}",
        "/api/approvals/{id}/approve",
        "/api/tasks/{id}/run",
        "/api/tools/{name}/call",
        "/api/artifacts/{id}",
        "/api/inventory",
        "/metrics",
    ] {
        assert!(paths.contains_key(path), "{path}");
    }
    // Request bodies come from the handlers' own types.
    let schema =
        &paths["/api/requests"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    let schema = match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    };
    assert_eq!(schema["required"], json!(["input"]), "{schema}");
    assert!(schema["properties"]["wait"].is_object());
    // Every documented route is served (no 404 from the fallback).
    for (path, operations) in paths {
        for method in operations.as_object().unwrap().keys() {
            let uri = path.replace("{id}", "x").replace("{name}", "x");
            let (status, value) = call(&app, &method.to_uppercase(), &uri, Some(&json!({}))).await;
            assert_ne!(value["error"]["code"], "unknown_route", "{method} {path}");
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }
}
