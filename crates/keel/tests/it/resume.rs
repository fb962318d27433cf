//! Resume continues an interrupted run from its log. The log here is written the way a process
//! that died mid-run leaves it (the crash itself is exercised end to end in keel-cli's tests).

use keel_types::RunLog;
use std::sync::Arc;

use keel::{AdapterEvent, EventPayload, GuardDecision, ModelStopReason, RunLinks, ToolCall, Usage};
use keel::{Event, RequestId, RunRecord, RunStatus, Runtime};
use keel_store::SqliteStore;
use keel_test_support::{MockLlm, MockResponse};
use serde_json::json;

use crate::common::{self, assert_well_formed};

/// The spec of tool `bump`.
const COUNTER_TOOL: &str = r#"
description: Appends a line to counter.txt (not idempotent).
impl: { kind: command, command: ["sh", "-c", "echo x >> counter.txt; echo bumped"] }
"#;

/// A runtime on `ws` whose store the test can write to directly.
fn runtime_with_store(ws: &keel_test_support::TempWorkspace) -> (Arc<SqliteStore>, Runtime) {
    let store = Arc::new(SqliteStore::open(ws.path()).unwrap());
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .unwrap();
    (store, runtime)
}

/// The opening event of run `id` for `input`.
fn opened(id: &RequestId, input: &str, mode: Option<keel::PermissionMode>) -> Event {
    event(
        id,
        1,
        EventPayload::RequestStarted {
            input: input.into(),
            history: vec![],
            mode,
            metadata: Default::default(),
            params: Default::default(),
            output_schema: None,
            session_owner_overridden: None,
        },
    )
}

/// Stores `log` as the events of `record` and marks it interrupted, as a process that died
/// leaves a run.
async fn leave_interrupted(store: &SqliteStore, record: &mut RunRecord, log: &[Event]) {
    store.append(log).await.unwrap();
    record.status = RunStatus::Interrupted;
    store.update_run(record).await.unwrap();
}

fn event(id: &RequestId, seq: u64, payload: EventPayload) -> Event {
    Event {
        id: keel::EventId::generate(),
        seq,
        ts: keel_types::now_rfc3339(),
        request_id: id.clone(),
        session_id: None,
        agent_id: "assistant".into(),
        payload,
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn guard(id: &RequestId, seq: u64, call: &ToolCall) -> Event {
    event(
        id,
        seq,
        EventPayload::ToolGuard {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision: GuardDecision::Accepted,
            arguments: call.arguments.clone(),
            issues: vec![],
            repairs: vec![],
            resolved_tool: None,
            repaired_arguments: None,
        },
    )
}

fn start(id: &RequestId, seq: u64, call: &ToolCall) -> Event {
    event(
        id,
        seq,
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                adapter: "native".into(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: serde_json::from_str(&call.arguments).unwrap(),
            },
        },
    )
}

#[tokio::test]
async fn an_interrupted_run_resumes_rerunning_only_idempotent_calls() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Resumed and done."]));
    let ws = common::builder(&mock.base_url(), &["bump", "read_file", "list_dir"], "")
        .tool("bump", COUNTER_TOOL)
        .build();
    let (store, runtime) = runtime_with_store(&ws);

    // The log of a process that died while running three tool calls: `bump` (not idempotent)
    // and `read_file` (idempotent) had started, `list_dir` had not.
    let id = RequestId::generate();
    let mut record = RunRecord::new(id.clone(), None, "assistant", "Do three things");
    store.create_run(&record).await.unwrap();
    let bump = call("call_bump", "bump", "{}");
    let read = call("call_read", "read_file", r#"{"path":"README.md"}"#);
    let list = call("call_list", "list_dir", r#"{"path":"."}"#);
    let log = vec![
        opened(&id, "Do three things", None),
        event(
            &id,
            2,
            EventPayload::ModelStarted {
                step: 1,
                attempt: 1,
                model: "mock-model".into(),
                provider: "openai".into(),
                params: Default::default(),
            },
        ),
        event(
            &id,
            3,
            EventPayload::ModelCompleted {
                step: 1,
                stop_reason: ModelStopReason::ToolCalls,
                usage: Usage {
                    prompt_tokens: 5,
                    completion_tokens: 5,
                    total_tokens: 10,
                    ..Usage::default()
                },
                latency_ms: 3,
                content: String::new(),
                tool_calls: vec![bump.clone(), read.clone(), list.clone()],
                thinking: Vec::new(),
            },
        ),
        guard(&id, 4, &bump),
        guard(&id, 5, &read),
        guard(&id, 6, &list),
        start(&id, 7, &bump),
        start(&id, 8, &read),
    ];
    leave_interrupted(&store, &mut record, &log).await;

    let mut handle = runtime.resume(&id).await.unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.output.as_deref(), Some("Resumed and done."));
    assert_eq!(response.steps, 2, "the recorded round counts");
    assert!(
        !ws.join("counter.txt").exists(),
        "the non-idempotent call was not run again"
    );
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert_eq!(events[8].seq, 9);
    assert_eq!(
        events[8].payload,
        EventPayload::RequestResumed {
            reissued_round: false,
            rerun_calls: vec!["call_read".into()],
            abandoned_calls: vec!["call_bump".into()],
        }
    );
    // The model got one result per call, in call order.
    let sent = mock.requests()[0].messages().to_vec();
    let tool_messages: Vec<(&str, &str)> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tool_messages.len(), 3);
    assert_eq!(tool_messages[0].0, "call_bump");
    assert!(tool_messages[0].1.contains("outcome is unknown"));
    assert_eq!(tool_messages[1].0, "call_read");
    assert!(tool_messages[1].1.contains("Hello from the README."));
    assert_eq!(tool_messages[2].0, "call_list");
    assert!(tool_messages[2].1.contains("README.md"));
    let record = runtime.runs().get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(
        record.links,
        RunLinks {
            resumed: 1,
            ..Default::default()
        }
    );
    assert_eq!(record.usage.total_tokens, response.usage.total_tokens);
    assert!(json!(record).to_string().contains("resumed"));

    // A completed run cannot be resumed.
    let again = runtime.resume(&id).await;
    assert!(again.is_err());
}

#[tokio::test]
async fn a_cut_off_model_round_is_asked_again() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Second try."]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let (store, runtime) = runtime_with_store(&ws);
    let id = RequestId::generate();
    let mut record = RunRecord::new(id.clone(), None, "assistant", "Hi");
    store.create_run(&record).await.unwrap();
    store
        .append(&[
            event(
                &id,
                1,
                EventPayload::RequestStarted {
                    input: "Hi".into(),
                    history: vec![],
                    mode: None,
                    metadata: Default::default(),
                    params: Default::default(),
                    output_schema: None,
                    session_owner_overridden: None,
                },
            ),
            event(
                &id,
                2,
                EventPayload::ModelStarted {
                    step: 1,
                    attempt: 1,
                    model: "mock-model".into(),
                    provider: "openai".into(),
                    params: Default::default(),
                },
            ),
            event(
                &id,
                3,
                EventPayload::Adapter {
                    event: AdapterEvent::OutputDelta {
                        adapter: "native".into(),
                        step: 1,
                        text: "Fir".into(),
                    },
                },
            ),
        ])
        .await
        .unwrap();
    record.status = RunStatus::Interrupted;
    store.update_run(&record).await.unwrap();

    let mut handle = runtime.resume(&id).await.unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Completed);
    assert_eq!(response.output.as_deref(), Some("Second try."));
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert!(matches!(
        events[3].payload,
        EventPayload::RequestResumed {
            reissued_round: true,
            ..
        }
    ));
    let model_started: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ModelStarted { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(
        model_started,
        vec![1, 1],
        "the cut-off round 1 is asked again"
    );
}

#[tokio::test]
async fn a_pending_file_write_whose_contents_the_log_digested_is_blocked_on_resume() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["I will write it again later."]));
    let ws = common::builder(&mock.base_url(), &["write_file"], "").build();
    let (store, runtime) = runtime_with_store(&ws);

    // The log keeps a written file's size and sha256, never its contents (docs/events.md).
    let id = RequestId::generate();
    let mut record = RunRecord::new(id.clone(), None, "assistant", "Write out.txt");
    store.create_run(&record).await.unwrap();
    let write = call(
        "call_write",
        "write_file",
        r#"{"path":"out.txt","content":{"size":5,"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}"#,
    );
    let log = vec![
        opened(&id, "Write out.txt", None),
        event(
            &id,
            2,
            EventPayload::ModelCompleted {
                step: 1,
                stop_reason: ModelStopReason::ToolCalls,
                usage: Usage::default(),
                latency_ms: 3,
                content: String::new(),
                tool_calls: vec![write],
                thinking: Vec::new(),
            },
        ),
    ];
    leave_interrupted(&store, &mut record, &log).await;

    let mut handle = runtime.resume(&id).await.unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert!(!ws.join("out.txt").exists(), "a digest is never written");
    let sent = mock.requests()[0].messages().to_vec();
    let result = sent
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_write")
        .unwrap();
    assert!(
        result["content"].as_str().unwrap().contains("/content"),
        "the model is told which argument to send again: {result}"
    );
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::ToolGuard {
            decision: GuardDecision::Blocked,
            ..
        }
    )));
}

#[tokio::test]
async fn a_resumed_run_may_change_a_file_it_read_before_the_interruption() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        keel_test_support::MockToolCall::new(
            "call_write",
            "write_file",
            [r##"{"path": "README.md", "content": "# Rewritten\n"}"##],
        ),
    ]));
    mock.push(MockResponse::text(["Rewritten."]));
    let ws = common::workspace(&mock.base_url(), &["read_file", "write_file"], "");
    let (store, runtime) = runtime_with_store(&ws);

    // The log of a run that read README.md, then died before its next model round.
    let id = RequestId::generate();
    let mut record = RunRecord::new(id.clone(), None, "assistant", "Rewrite the README");
    store.create_run(&record).await.unwrap();
    let read = call("call_read", "read_file", r#"{"path":"./README.md"}"#);
    let log = vec![
        opened(
            &id,
            "Rewrite the README",
            Some(keel::PermissionMode::AcceptEdits),
        ),
        event(
            &id,
            2,
            EventPayload::ModelCompleted {
                step: 1,
                stop_reason: ModelStopReason::ToolCalls,
                usage: Usage::default(),
                latency_ms: 1,
                content: String::new(),
                tool_calls: vec![read.clone()],
                thinking: Vec::new(),
            },
        ),
        guard(&id, 3, &read),
        start(&id, 4, &read),
        event(
            &id,
            5,
            EventPayload::Adapter {
                event: AdapterEvent::ToolResult {
                    adapter: "native".into(),
                    call_id: read.id.clone(),
                    tool: read.name.clone(),
                    ok: true,
                    output: "# Test workspace\nHello from the README.\n".into(),
                    error: None,
                    duration_ms: 1,
                },
            },
        ),
    ];
    leave_interrupted(&store, &mut record, &log).await;

    let mut handle = runtime.resume(&id).await.unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let result = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(result.starts_with("wrote "), "{result}");
    let on_disk = std::fs::read_to_string(ws.join("README.md")).unwrap();
    assert_eq!(on_disk, "# Rewritten\n");
}

/// A run whose record says `interrupted` while this process still runs it (a replica that
/// lost its store lease and took the run back itself): resume is refused and stops that
/// launch, so two launches never continue one log; once it has ended, the run resumes.
#[tokio::test]
async fn a_run_still_live_here_is_stopped_before_it_resumes() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Too late."]).delay(std::time::Duration::from_secs(600)));
    mock.push(MockResponse::text(["Resumed."]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let (store, runtime) = runtime_with_store(&ws);
    let mut live = runtime
        .request(keel::RequestOptions {
            input: "Hi".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = live.request_id().clone();
    while let Some(event) = live.next_event().await {
        if matches!(event.payload, EventPayload::ModelStarted { .. }) {
            break;
        }
    }
    let mut record = store.get_run(&id).await.unwrap().unwrap();
    record.status = RunStatus::Interrupted;
    store.update_run(&record).await.unwrap();

    let Err(refused) = runtime.resume(&id).await else {
        panic!("a second launch of a run live here");
    };
    assert!(
        matches!(
            refused,
            keel::Error::Runtime(keel::RuntimeError::Conflict(_))
        ),
        "{refused}"
    );
    while live.next_event().await.is_some() {}
    assert_eq!(live.wait().await.unwrap().status, RunStatus::Interrupted);

    let mut handle = runtime.resume(&id).await.unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    assert_eq!(response.output.as_deref(), Some("Resumed."));
    // One log: the first launch up to its stop, then the resumed one.
    let events = common::stored(&runtime, &response).await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let types: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(
        types,
        [
            "runtime.request.started",
            "runtime.prompt.assembled",
            "runtime.model.started",
            "runtime.request.interrupted",
            "runtime.request.resumed",
            "runtime.prompt.assembled",
            "runtime.model.started",
            "runtime.adapter.event",
            "runtime.model.completed",
            "runtime.request.completed",
        ]
    );
}
