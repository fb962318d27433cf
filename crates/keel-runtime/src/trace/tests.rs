use keel_types::trace::{attempt_key, call_key, span_id};
use keel_types::{
    AdapterEvent, Event, EventId, EventPayload, FinishReason, GuardDecision, HookEvent,
    ModelParams, ModelStopReason, RequestId, RunRecord, RunTrace, TraceParent, Usage,
};
use serde_json::Value;

use super::*;

fn event(seq: u64, ms: u64, payload: EventPayload) -> Event {
    let ts = time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(1_800_000_000_000u64 + ms) * 1_000_000,
    )
    .unwrap()
    .format(&time::format_description::well_known::Rfc3339)
    .unwrap();
    Event {
        id: EventId::generate(),
        seq,
        ts,
        request_id: RequestId("run-1".into()),
        session_id: None,
        agent_id: "helper".into(),
        payload,
    }
}

fn started() -> EventPayload {
    EventPayload::RequestStarted {
        input: "hi".into(),
        history: Vec::new(),
        mode: None,
        metadata: Default::default(),
        params: ModelParams::default(),
        output_schema: None,
        session_owner_overridden: None,
    }
}

fn model_started(step: u32) -> EventPayload {
    EventPayload::ModelStarted {
        step,
        attempt: 1,
        model: "gpt-4o".into(),
        provider: "openai".into(),
        params: ModelParams {
            temperature: Some(0.2),
            ..ModelParams::default()
        },
    }
}

fn model_completed(step: u32, stop: ModelStopReason, usage: Usage) -> EventPayload {
    EventPayload::ModelCompleted {
        step,
        stop_reason: stop,
        usage,
        latency_ms: 5,
        content: String::new(),
        tool_calls: Vec::new(),
        thinking: Vec::new(),
    }
}

fn record() -> RunRecord {
    let mut record = RunRecord::new(RequestId("run-1".into()), None, "helper", "hi");
    record.trace = Some(RunTrace::remote(
        TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap(),
        None,
    ));
    record
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span `{name}` in {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

#[test]
fn a_run_with_a_tool_call_an_approval_and_a_hook_is_a_tree() {
    let run = RequestId("run-1".into());
    let events = vec![
        event(1, 0, started()),
        event(2, 10, model_started(1)),
        event(
            3,
            30,
            model_completed(1, ModelStopReason::ToolCalls, Usage::new(100, 20)),
        ),
        event(
            4,
            31,
            EventPayload::ToolGuard {
                call_id: "c1".into(),
                tool: "write".into(),
                decision: GuardDecision::Repaired,
                arguments: "{}".into(),
                issues: Vec::new(),
                repairs: Vec::new(),
                resolved_tool: None,
                repaired_arguments: None,
            },
        ),
        event(
            5,
            40,
            EventPayload::HookCompleted {
                hook: "audit".into(),
                event: HookEvent::PreToolUse,
                call_id: Some("c1".into()),
                outcome: "no opinion".into(),
                reason: None,
                duration_ms: 8,
                sandbox: None,
            },
        ),
        event(
            6,
            50,
            EventPayload::Adapter {
                event: AdapterEvent::ToolStart {
                    adapter: "keel".into(),
                    call_id: "c1".into(),
                    tool: "write".into(),
                    arguments: Value::Null,
                },
            },
        ),
        event(
            7,
            70,
            EventPayload::Adapter {
                event: AdapterEvent::ToolResult {
                    adapter: "keel".into(),
                    call_id: "c1".into(),
                    tool: "write".into(),
                    ok: true,
                    output: "done".into(),
                    error: None,
                    duration_ms: 20,
                },
            },
        ),
        event(8, 80, model_started(2)),
        event(
            9,
            95,
            model_completed(2, ModelStopReason::Stop, Usage::new(130, 5)),
        ),
        event(
            10,
            96,
            EventPayload::RequestCompleted {
                output: "ok".into(),
                value: None,
                finish_reason: FinishReason::Completed,
                usage: Usage::new(230, 25),
                steps: 2,
                duration_ms: 96,
            },
        ),
    ];
    let spans = spans_of(&record(), &events, false);
    assert_eq!(spans.len(), 5, "{spans:#?}");
    let root = named(&spans, "invoke_agent helper");
    assert_eq!(root.span_id, span_id(&run, &attempt_key(1)));
    assert_eq!(root.parent_span_id.unwrap().to_string(), "00f067aa0ba902b7");
    assert!(root.remote_parent);
    assert_eq!(root.duration_ms(), Some(96));
    assert_eq!(root.attributes["gen_ai.usage.input_tokens"], 230);
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name == "chat gpt-4o").collect();
    assert_eq!(chats.len(), 2);
    assert!(
        chats
            .iter()
            .all(|c| c.parent_span_id == Some(root.span_id) && c.kind == SpanKind::Client)
    );
    assert_eq!(chats[0].span_id, span_id(&run, "chat@2"));
    assert_eq!(chats[1].span_id, span_id(&run, "chat@8"));
    assert_eq!(chats[0].attributes["gen_ai.usage.output_tokens"], 20);
    assert_eq!(chats[0].attributes["gen_ai.request.temperature"], 0.2);
    assert_eq!(
        chats[0].attributes["gen_ai.response.finish_reasons"][0],
        "tool_call"
    );
    let tool = named(&spans, "execute_tool write");
    assert_eq!(tool.span_id, span_id(&run, &call_key("c1")));
    assert_eq!(tool.attributes["keel.gateway.decision"], "repaired");
    assert_eq!(tool.duration_ms(), Some(39));
    let hook = named(&spans, "keel.hook audit");
    assert_eq!(hook.parent_span_id, Some(tool.span_id));
    assert_eq!(hook.duration_ms(), Some(8));
    assert_eq!(hook.attributes["keel.hook.event"], "PreToolUse");
    assert!(
        spans
            .iter()
            .all(|s| s.trace_id.to_string() == "4bf92f3577b34da6a3ce929d0e0e4736")
    );
}

#[test]
fn a_resumed_attempt_links_to_the_first_and_a_live_builder_agrees() {
    let run = RequestId("run-1".into());
    let resumed = EventPayload::RequestResumed {
        reissued_round: true,
        rerun_calls: Vec::new(),
        abandoned_calls: Vec::new(),
    };
    let done = EventPayload::RequestCompleted {
        output: "ok".into(),
        value: None,
        finish_reason: FinishReason::Completed,
        usage: Usage::new(1, 1),
        steps: 1,
        duration_ms: 1,
    };
    // The first process died during its model round (no end event).
    let events = vec![
        event(1, 0, started()),
        event(2, 10, model_started(1)),
        event(3, 5_000, resumed.clone()),
        event(4, 5_010, model_started(1)),
        event(
            5,
            5_020,
            model_completed(1, ModelStopReason::Stop, Usage::new(1, 1)),
        ),
        event(6, 5_021, done.clone()),
    ];
    let spans = spans_of(&record(), &events, false);
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("invoke_agent"))
        .collect();
    assert_eq!(roots.len(), 2);
    let (first, second) = (roots[0], roots[1]);
    assert_eq!(first.status.code, "error");
    assert_eq!(
        first.end_unix_nanos,
        Some(first.start_unix_nanos + 10_000_000)
    );
    assert_eq!(second.span_id, span_id(&run, &attempt_key(3)));
    assert_eq!(second.links[0].span_id, first.span_id);
    assert_eq!(second.links[0].trace_id, first.trace_id);
    // The resumed process sees the log from the resumption on, and builds the same span.
    let mut live = TraceBuilder::new(&record(), 2, false);
    for e in &events[2..] {
        live.push(e);
    }
    let live_spans = live.take_finished();
    let live_root = live_spans
        .iter()
        .find(|s| s.name.starts_with("invoke_agent"))
        .unwrap();
    assert_eq!(live_root.span_id, second.span_id);
    assert_eq!(live_root.links, second.links);
}

#[test]
fn a_refused_call_ends_with_its_last_event_and_a_later_hook_stays_under_its_call() {
    let guard = |seq, ms, call: &str, decision| {
        event(
            seq,
            ms,
            EventPayload::ToolGuard {
                call_id: call.into(),
                tool: "write".into(),
                decision,
                arguments: "{}".into(),
                issues: Vec::new(),
                repairs: Vec::new(),
                resolved_tool: None,
                repaired_arguments: None,
            },
        )
    };
    let hook = |seq, ms, call: &str, when| {
        event(
            seq,
            ms,
            EventPayload::HookCompleted {
                hook: "audit".into(),
                event: when,
                call_id: Some(call.into()),
                outcome: "no opinion".into(),
                reason: None,
                duration_ms: 1,
                sandbox: None,
            },
        )
    };
    let result = |seq, ms, call: &str| {
        event(
            seq,
            ms,
            EventPayload::Adapter {
                event: AdapterEvent::ToolResult {
                    adapter: "keel".into(),
                    call_id: call.into(),
                    tool: "write".into(),
                    ok: true,
                    output: "done".into(),
                    error: None,
                    duration_ms: 1,
                },
            },
        )
    };
    let start = |seq, ms, call: &str| {
        event(
            seq,
            ms,
            EventPayload::Adapter {
                event: AdapterEvent::ToolStart {
                    adapter: "keel".into(),
                    call_id: call.into(),
                    tool: "write".into(),
                    arguments: Value::Null,
                },
            },
        )
    };
    let events = vec![
        event(1, 0, started()),
        event(2, 1, model_started(1)),
        event(
            3,
            2,
            model_completed(1, ModelStopReason::ToolCalls, Usage::new(1, 1)),
        ),
        guard(4, 3, "blocked", GuardDecision::Blocked),
        guard(5, 3, "ok", GuardDecision::Accepted),
        start(6, 4, "ok"),
        result(7, 9, "ok"),
        hook(8, 12, "ok", HookEvent::PostToolUse),
        event(9, 500, model_started(2)),
    ];
    let spans = spans_of(&record(), &events, false);
    let blocked = spans
        .iter()
        .find(|s| s.attributes.get("gen_ai.tool.call.id") == Some(&Value::from("blocked")))
        .unwrap();
    assert_eq!(
        blocked.duration_ms(),
        Some(0),
        "it ended with its guard, not the next round"
    );
    assert_eq!(blocked.status.code, "error");
    let ok = spans
        .iter()
        .find(|s| {
            s.name == "execute_tool write"
                && s.attributes.get("gen_ai.tool.call.id") == Some(&Value::from("ok"))
        })
        .unwrap();
    let post = named(&spans, "keel.hook audit");
    assert_eq!(post.parent_span_id, Some(ok.span_id));
}

#[test]
fn the_schema_url_names_the_pinned_version() {
    assert!(SCHEMA_URL.ends_with(&format!("/{SEMCONV_VERSION}")));
}

#[test]
fn an_mcp_tool_names_its_server() {
    let attributes = super::attrs::tool_attributes("mcp__fs__read_text", "c1");
    assert_eq!(attributes["keel.mcp.server"], "fs");
    assert_eq!(attributes["keel.mcp.tool"], "read_text");
    assert!(
        super::attrs::tool_attributes("read_file", "c2")
            .get("keel.mcp.server")
            .is_none()
    );
}

#[test]
fn contents_are_on_spans_only_when_asked_for() {
    let events = vec![
        event(1, 0, started()),
        event(2, 1, model_started(1)),
        event(
            3,
            2,
            EventPayload::ModelCompleted {
                step: 1,
                stop_reason: ModelStopReason::Stop,
                usage: Usage::new(1, 1),
                latency_ms: 1,
                content: "the answer".into(),
                tool_calls: Vec::new(),
                thinking: Vec::new(),
            },
        ),
    ];
    let quiet = spans_of(&record(), &events, false);
    assert!(
        quiet
            .iter()
            .all(|s| !s.attributes.contains_key("gen_ai.output.messages")
                && !s.attributes.contains_key("gen_ai.input.messages"))
    );
    let told = spans_of(&record(), &events, true);
    let chat = told.iter().find(|s| s.name == "chat gpt-4o").unwrap();
    let output: Value =
        serde_json::from_str(chat.attributes["gen_ai.output.messages"].as_str().unwrap()).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["content"], "the answer");
    assert_eq!(output[0]["finish_reason"], "stop");
    let root = told
        .iter()
        .find(|s| s.name == "invoke_agent helper")
        .unwrap();
    let input: Value =
        serde_json::from_str(root.attributes["gen_ai.input.messages"].as_str().unwrap()).unwrap();
    assert_eq!(input[0]["parts"][0]["content"], "hi");
}
