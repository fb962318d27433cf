//! OpenTelemetry export against a real OTLP receiver (the official `opentelemetry-proto`
//! definitions decoding what arrives, in a Python process): a run with a repaired tool call, a
//! hook, an approval and a subagent, started with a caller's `traceparent`, arrives as one
//! span tree with the GenAI attributes and Keel's own; what the run sent its model, its
//! command tool and its hook names those spans; the trace endpoint computes the same spans
//! without a collector. And a dead collector blocks nothing: spans are dropped and counted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use keel::{ApprovalScope, ApprovalStatus, EventPayload};
use keel_test_support::otlp::OtlpReceiver;
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use super::*;

const CALLER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";

/// Agent `lead` (tools `record`, asked for by policy, and `task` to `helper`) on the mock.
fn traced_workspace(mock: &MockLlm, otlp: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: lead, observability: {{ otlp: {{ endpoint: \"{otlp}\", \
             exportInterval: 100ms, resource: {{ deployment.environment: test }} }} }} }}"
        ))
        .openai_model_at("m", &mock.base_url())
        .agent("lead", "{ model: m, tools: [record], subagents: [helper] }")
        .agent("helper", "{ model: m, instructions: Help. }")
        .tool(
            "record",
            r#"
            description: Records a count.
            schema: { type: object, properties: { count: { type: integer } }, required: [count] }
            policy: ask
            impl: { kind: command, command: ["sh", "-c", "printf %s \"$TRACEPARENT\" > tool_traceparent.txt; echo recorded"] }
            "#,
        )
        .hook(
            "audit",
            "event: PreToolUse\nmatcher: record\nhandler: { kind: command, command: [sh, -c, 'printf %s \"$TRACEPARENT\" > hook_traceparent.txt'] }\n",
        )
        .build()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn spans_named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = spans_named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span expected in {spans:#?}");
    found[0]
}

/// The usage the run's `runtime.model.completed` events recorded, in order.
async fn recorded_usage(runtime: &keel::Runtime, id: &keel::RequestId) -> Vec<keel::Usage> {
    let events = runtime.runs().events(id, 0).await.unwrap();
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ModelCompleted { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_governed_run_with_a_subagent_arrives_as_one_span_tree() {
    let receiver = OtlpReceiver::start();
    let mock = MockLlm::start().await;
    // lead: a call to `record` with a count as text (repaired), then a delegation, then the
    // answer; helper answers in between.
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "record",
        [r#"{"count": "3"}"#],
    )]))
    .push(MockResponse::tool_calls([MockToolCall::new(
        "call_2",
        "task",
        [r#"{"agent": "helper", "prompt": "check it"}"#],
    )]))
    .push(MockResponse::text(["checked"]))
    .push(MockResponse::text(["all ", "done"]));
    let ws = traced_workspace(&mock, &receiver.http_endpoint());
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let app = keel_server::router(runtime.clone());

    let request = Request::post("/api/requests")
        .header(header::CONTENT_TYPE, "application/json")
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .header("tracestate", "vendor=1")
        .body(Body::from(json!({"input": "go", "wait": true}).to_string()))
        .unwrap();
    let answer = tokio::spawn(send(app.clone(), request));
    // The call to `record` waits for a person.
    let approval = loop {
        let pending = runtime
            .approvals()
            .list(Some(ApprovalStatus::Pending))
            .await
            .unwrap();
        if let Some(first) = pending.into_iter().next() {
            break first;
        }
        assert!(!answer.is_finished(), "the run ended without asking");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    runtime
        .approvals()
        .decide(
            &approval.approval_id,
            true,
            ApprovalScope::Once,
            "ops@example.com",
            None,
        )
        .await
        .unwrap();
    let (status, _, body) = answer.await.unwrap();
    let run: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["output"], "all done");
    let id = keel::RequestId::from(run["requestId"].as_str().unwrap().to_owned());

    let spans = tokio::task::spawn_blocking(move || {
        let spans = receiver.wait_for_spans(
            "the lead's and the helper's runs",
            Duration::from_secs(60),
            |spans| {
                spans.iter().any(|s| s["name"] == "invoke_agent lead")
                    && spans.iter().any(|s| s["name"] == "invoke_agent helper")
            },
        );
        let metrics =
            receiver.wait_for_metrics("token usage", Duration::from_secs(60), |metrics| {
                metrics
                    .iter()
                    .any(|m| m["name"] == "gen_ai.client.token.usage")
            });
        (spans, metrics)
    });
    let (spans, metrics) = spans.await.unwrap();

    // The tree: the caller's span → the lead's run → its rounds and calls → the helper's run.
    let lead = one(&spans, "invoke_agent lead");
    assert!(
        spans.iter().all(|s| s["traceId"] == CALLER_TRACE),
        "{spans:#?}"
    );
    assert_eq!(lead["parentSpanId"], CALLER_SPAN);
    assert_eq!(lead["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(attr(lead, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(lead, "gen_ai.agent.name"), "lead");
    assert_eq!(attr(lead, "keel.request_id"), id.0.as_str());
    assert_eq!(lead["status"]["code"], "STATUS_CODE_UNSET");
    assert_eq!(lead["resource"]["service.name"], "keel");
    assert_eq!(lead["resource"]["deployment.environment"], "test");
    assert_eq!(lead["scope"]["name"], "keel");
    let lead_id = lead["spanId"].as_str().unwrap();

    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == format!("chat {}", keel_test_support::OPENAI_MOCK_MODEL))
        .collect();
    assert_eq!(
        chats.len(),
        4,
        "three rounds of the lead, one of the helper"
    );
    let lead_chats: Vec<&&Value> = chats
        .iter()
        .filter(|c| c["parentSpanId"] == lead_id)
        .collect();
    assert_eq!(lead_chats.len(), 3);
    let usage = recorded_usage(&runtime, &id).await;
    let mut lead_chats = lead_chats;
    lead_chats.sort_by_key(|c| c["startTimeUnixNano"].as_u64());
    for (chat, usage) in lead_chats.iter().zip(&usage) {
        assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.provider.name"), "openai");
        assert_eq!(
            attr(chat, "gen_ai.request.model"),
            keel_test_support::OPENAI_MOCK_MODEL
        );
        assert_eq!(
            attr(chat, "gen_ai.response.model"),
            keel_test_support::OPENAI_MOCK_MODEL
        );
        assert_eq!(attr(chat, "gen_ai.usage.input_tokens"), usage.prompt_tokens);
        assert_eq!(
            attr(chat, "gen_ai.usage.output_tokens"),
            usage.completion_tokens
        );
    }
    assert_eq!(
        attr(lead_chats[0], "gen_ai.response.finish_reasons"),
        &json!(["tool_call"])
    );
    assert_eq!(
        attr(lead_chats[2], "gen_ai.response.finish_reasons"),
        &json!(["stop"])
    );
    // The run's totals, its subagent's rounds included, as its record keeps them.
    let record = runtime.runs().get(&id).await.unwrap().unwrap();
    assert_eq!(
        attr(lead, "gen_ai.usage.input_tokens"),
        record.usage.prompt_tokens
    );
    assert_eq!(
        attr(lead, "gen_ai.usage.output_tokens"),
        record.usage.completion_tokens
    );
    assert_eq!(
        record.trace.as_ref().unwrap().trace_id.to_string(),
        CALLER_TRACE
    );

    // The repaired call asked for by policy: the hook and the approval are its children.
    let record = one(&spans, "execute_tool record");
    assert_eq!(record["parentSpanId"], lead_id);
    assert_eq!(attr(record, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(record, "gen_ai.tool.call.id"), "call_1");
    assert_eq!(attr(record, "gen_ai.tool.type"), "extension");
    assert_eq!(attr(record, "keel.gateway.decision"), "repaired");
    assert!(
        attr(record, "keel.gateway.repairs")[0]
            .as_str()
            .unwrap()
            .contains("/count"),
        "{record}"
    );
    assert_eq!(attr(record, "keel.policy.decision"), "ask");
    let record_id = record["spanId"].as_str().unwrap();
    let hook = one(&spans, "keel.hook audit");
    assert_eq!(hook["parentSpanId"], record_id);
    assert_eq!(attr(hook, "keel.hook.event"), "PreToolUse");
    assert_eq!(attr(hook, "keel.hook.outcome"), "no opinion");
    let wait = one(&spans, "keel.approval");
    assert_eq!(wait["parentSpanId"], record_id);
    assert_eq!(attr(wait, "keel.approval.status"), "approved");
    assert_eq!(attr(wait, "keel.approval.decided_by"), "ops@example.com");
    assert!(
        attr(wait, "keel.approval.wait_ms").as_u64().is_some(),
        "{wait}"
    );

    // The delegation: the helper's run is a child of the `task` call's span.
    let task = one(&spans, "execute_tool task");
    assert_eq!(task["parentSpanId"], lead_id);
    let helper = one(&spans, "invoke_agent helper");
    assert_eq!(helper["parentSpanId"], task["spanId"]);
    assert_eq!(attr(task, "keel.child.agent"), "helper");
    let helper_chat = chats.iter().find(|c| c["parentSpanId"] == helper["spanId"]);
    assert!(
        helper_chat.is_some(),
        "the helper's round is under its run: {spans:#?}"
    );

    // What the run sent names those spans.
    let parent_of =
        |span: &Value| format!("00-{CALLER_TRACE}-{}-01", span["spanId"].as_str().unwrap());
    let tool_saw = std::fs::read_to_string(ws.path().join("tool_traceparent.txt")).unwrap();
    assert_eq!(tool_saw, parent_of(record));
    let hook_saw = std::fs::read_to_string(ws.path().join("hook_traceparent.txt")).unwrap();
    assert_eq!(hook_saw, parent_of(record));
    let sent: BTreeSet<String> = mock
        .requests()
        .iter()
        .map(|r| {
            r.header("traceparent")
                .expect("every model request carries traceparent")
                .to_owned()
        })
        .collect();
    let expected: BTreeSet<String> = chats.iter().map(|c| parent_of(c)).collect();
    assert_eq!(sent, expected);

    // The GenAI client metrics, by token type.
    let kinds: BTreeSet<&str> = metrics
        .iter()
        .filter(|m| m["name"] == "gen_ai.client.token.usage")
        .filter_map(|m| m["attributes"]["gen_ai.token.type"].as_str())
        .collect();
    assert_eq!(kinds, BTreeSet::from(["input", "output"]));
    assert!(
        metrics
            .iter()
            .any(|m| m["name"] == "gen_ai.client.operation.duration" && m["unit"] == "s")
    );

    // The trace endpoint computes the same spans from the events.
    let (status, _, body) = send(
        app,
        request_with("GET", &format!("/api/requests/{id}/trace"), None, None),
    )
    .await;
    let view: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["traceId"], CALLER_TRACE);
    let computed: BTreeMap<String, String> = view["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["spanId"].as_str().unwrap().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let exported: BTreeMap<String, String> = spans
        .iter()
        .map(|s| {
            (
                s["spanId"].as_str().unwrap().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(computed, exported);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_collector_blocks_nothing_and_its_spans_are_counted_as_dropped() {
    // The collector takes requests and never answers; the export's timeout is far away.
    let receiver = OtlpReceiver::start_with(&["--stall"]);
    let ws = WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: assistant, observability: {{ otlp: {{ endpoint: \"{}\", \
             queueSize: 4, batchSize: 2, exportInterval: 10ms, timeout: 10m, metrics: false }} }} }}",
            receiver.http_endpoint()
        ))
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "Hello"}]}]}))
        .agent("assistant", "{ model: m }")
        .build();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let app = keel_server::router(runtime.clone());
    for _ in 0..20 {
        let (status, _, body) = send(
            app.clone(),
            post_json(
                &json!({"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    }
    // Every run ended while the first export still hangs: nothing waited for the collector.
    let stats = runtime.telemetry().unwrap();
    assert_eq!(
        stats
            .spans_exported
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        stats
            .exports_failed
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let (_, _, body) = send(app, request_with("GET", "/metrics", None, None)).await;
    let text = String::from_utf8(body).unwrap();
    let dropped: u64 = text
        .lines()
        .find(|l| l.starts_with("keel_otel_spans_dropped_total{reason=\"queue_full\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no dropped-span counter in:\n{text}"));
    // 20 runs of 2 spans each: at most the queue and the batch in flight were kept.
    assert!(dropped >= 20 * 2 - 4 - 2, "{dropped} dropped\n{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_go_over_grpc_when_the_workspace_says_so() {
    let receiver = OtlpReceiver::start();
    let ws = WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: assistant, observability: {{ otlp: {{ endpoint: \"{}\", \
             protocol: grpc, headers: {{ x-team: agents }}, exportInterval: 50ms }} }} }}",
            receiver.grpc_endpoint()
        ))
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello"}]}]}),
        )
        .agent("assistant", "{ model: m }")
        .build();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let app = keel_server::router(runtime.clone());
    let (status, _, body) = send(
        app,
        post_json(&json!({"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let spans = tokio::task::spawn_blocking(move || {
        receiver.wait_for_spans("the run over gRPC", Duration::from_secs(60), |spans| {
            spans.iter().any(|s| s["name"] == "invoke_agent assistant")
        })
    })
    .await
    .unwrap();
    let run = one(&spans, "invoke_agent assistant");
    assert_eq!(run["transport"], "grpc");
    assert_eq!(run["headers"]["x-team"], "agents");
    let chat = spans
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with("chat ")))
        .unwrap_or_else(|| panic!("no chat span: {spans:#?}"));
    assert_eq!(chat["parentSpanId"], run["spanId"]);
}
