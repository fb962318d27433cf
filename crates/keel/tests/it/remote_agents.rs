//! `RemoteAgent`s: an agent of another system reached over A2A is a subagent (`task`) and a
//! workflow's agent node like any other. Its run is a child run whose events mirror the
//! remote task (its id, its states, the answer's text); a remote failure fails the child run
//! and the parent goes on; cancelling the parent cancels the remote task. The remote side is
//! a real A2A server written with the official Python SDK (`a2a_echo_server.py`).

use std::time::Duration;

use keel::{AdapterEvent, ErrorCode, EventPayload, RequestOptions, RunStatus, Runtime};
use keel_test_support::a2a_server::A2aEchoServer;
use keel_test_support::{MockLlm, MockResponse, MockToolCall, OPENAI_MOCK_MODEL, WorkspaceBuilder};
use serde_json::{Value, json};

const KEY: &str = "remote-key-1";

/// `lead` delegates to `remote` (a `RemoteAgent` at `server`, its key from `.env`); the mock
/// asks `task` for `prompt` first, then quotes the tool's result.
fn workspace(
    mock: &MockLlm,
    server: &A2aEchoServer,
    prompt: &'static str,
) -> keel_test_support::TempWorkspace {
    workspace_deciding(mock, server, prompt, "allow")
}

/// [`workspace`] with policy deciding calls of the remote agent as `decision` (by default a
/// call with side effects is asked of a human; these tests trust the remote agent).
fn workspace_deciding(
    mock: &MockLlm,
    server: &A2aEchoServer,
    prompt: &'static str,
    decision: &str,
) -> keel_test_support::TempWorkspace {
    mock.respond_with(move |request| match request.last_role() {
        Some("tool") => MockResponse::text([
            "The remote said: ",
            request.last_content_of("tool").unwrap_or_default(),
        ]),
        _ => MockResponse::tool_calls([MockToolCall::new(
            "t1",
            "task",
            [json!({"agent": "remote", "prompt": prompt}).to_string()],
        )]),
    });
    WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: {OPENAI_MOCK_MODEL}, timeout: 5s }}",
                mock.base_url()
            ),
        )
        .runtime("{ defaultAgent: lead }")
        .agent("lead", "{ model: mock, instructions: You are lead., subagents: [remote] }")
        .document(
            "RemoteAgent",
            "remote",
            &format!(
                "{{ url: \"{}\", headers: {{ Authorization: \"Bearer ${{REMOTE_KEY}}\" }}, description: Echoes what it is asked. }}",
                server.url()
            ),
        )
        .yaml(
            r#"
apiVersion: keel/v1
kind: Workflow
metadata: { name: relay }
spec:
  nodes:
    - { id: ask, kind: agent, agent: remote, input: "echo {{ input }}" }
"#,
        )
        .policy(
            "remote-calls",
            &format!("rules: [{{ tool: remote, decision: {decision} }}]"),
        )
        .file(".env", format!("REMOTE_KEY={KEY}\n"))
        .build()
}

fn runtime(ws: &keel_test_support::TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

/// `lead`'s run, to its end.
async fn ask(runtime: &Runtime) -> keel::RunResponse {
    let options = RequestOptions {
        input: "Ask the remote.".into(),
        ..Default::default()
    };
    runtime
        .request(options)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap()
}

/// The child run a parent delegated to.
async fn child_of(runtime: &Runtime, parent: &keel::RequestId) -> keel::RequestId {
    let events = runtime.runs().events(parent, 0).await.unwrap();
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::Handoff {
                        child_request_id, ..
                    },
            } => Some(child_request_id.clone()),
            _ => None,
        })
        .expect("a handoff")
}

/// The remote task id a run recorded.
fn remote_task(events: &[keel::Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.payload {
        EventPayload::Adapter {
            event:
                AdapterEvent::Progress {
                    adapter,
                    kind,
                    data,
                },
        } if adapter == "a2a" && kind == "event" => data["remoteTask"].as_str().map(str::to_owned),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_delegates_to_a_remote_agent_and_its_child_run_mirrors_the_task() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&["--require-key", KEY]));
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, &server, "echo hello there");
    let runtime = runtime(&ws);
    let response = ask(&runtime).await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert!(
        response
            .output
            .as_deref()
            .unwrap_or_default()
            .contains("echo: hello there"),
        "{response:?}"
    );
    let child = child_of(&runtime, &response.request_id).await;
    let record = runtime.runs().get(&child).await.unwrap().unwrap();
    assert_eq!(record.agent, "remote");
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.output.as_deref(), Some("echo: hello there"));
    let events = runtime.runs().events(&child, 0).await.unwrap();
    let task = remote_task(&events).expect("the remote task's id is recorded");
    let states: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event: AdapterEvent::Progress { kind, data, .. },
            } if kind == "progress" => data["state"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED"),
        "{states:?}"
    );
    let streamed: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { adapter, text, .. },
            } if adapter == "a2a" => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "echo: hello there");
    // The remote got the key and the protocol version, and one task.
    let sent = server.calls_of("SendStreamingMessage");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["headers"]["authorization"], format!("Bearer {KEY}"));
    assert_eq!(sent[0]["headers"]["a2a-version"], "1.0");
    assert!(!task.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_node_calls_a_remote_agent() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&[]));
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, &server, "unused");
    let runtime = runtime(&ws);
    let response = runtime
        .run_workflow("relay", "from the workflow", None)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let value = response.value.clone().unwrap_or(Value::Null);
    assert!(
        value.to_string().contains("echo: from the workflow"),
        "{response:?}"
    );
    assert!(mock.requests().is_empty(), "no model of Keel's was asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_failure_fails_the_child_run_and_the_parent_goes_on() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&[]));
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, &server, "fail please");
    let runtime = runtime(&ws);
    let response = ask(&runtime).await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let output = response.output.unwrap_or_default();
    assert!(output.contains("failed on purpose"), "{output}");
    let child = child_of(&runtime, &response.request_id).await;
    let record = runtime.runs().get(&child).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error.unwrap().code, ErrorCode::RemoteAgentFailed);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_parent_cancels_the_remote_task() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&[]));
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, &server, "slow work");
    let runtime = runtime(&ws);
    let mut handle = runtime
        .request(RequestOptions {
            input: "Ask the remote.".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // Wait until the remote task has started (its id is recorded in the child run).
    let mut child = None;
    while let Some(event) = handle.next_event().await {
        if let EventPayload::Adapter {
            event: AdapterEvent::Handoff {
                child_request_id, ..
            },
        } = &event.payload
        {
            child = Some(child_request_id.clone());
            break;
        }
    }
    let child = child.expect("a handoff");
    wait_for(|| async {
        let events = runtime.runs().events(&child, 0).await.unwrap();
        remote_task(&events).is_some()
    })
    .await;
    handle.cancel();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Cancelled, "{response:?}");
    wait_for(|| async { !server.calls_of("CancelTask").is_empty() }).await;
    let events = runtime.runs().events(&child, 0).await.unwrap();
    let task = remote_task(&events).unwrap();
    assert_eq!(server.calls_of("CancelTask")[0]["id"], task);
}

/// Waits until `ready` holds (checked again every 20 ms; 30 s at most, for a loaded machine).
async fn wait_for<F, Fut>(ready: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !ready().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the condition never held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_reattaches_to_its_remote_task() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&[]));
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, &server, "unused");
    let first = runtime(&ws);
    let handle = first
        .request(RequestOptions {
            input: "slow and steady".into(),
            agent: Some("remote".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = handle.request_id().clone();
    wait_for(|| async {
        let events = first.runs().events(&id, 0).await.unwrap();
        remote_task(&events).is_some()
    })
    .await;
    // The runtime stops: the run is interrupted and the remote task left running.
    first.shutdown(Duration::ZERO).await;
    let record = first.runs().get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Interrupted);
    drop(handle);
    drop(first);
    assert!(
        server.calls_of("CancelTask").is_empty(),
        "an interruption does not cancel"
    );

    let second = runtime(&ws);
    let resumed = second.resume(&id).await.unwrap();
    wait_for(|| async { !server.calls_of("SubscribeToTask").is_empty() }).await;
    let events = second.runs().events(&id, 0).await.unwrap();
    let task = remote_task(&events).unwrap();
    assert_eq!(
        server.calls_of("SendStreamingMessage").len(),
        1,
        "no second task"
    );
    assert_eq!(server.calls_of("SubscribeToTask")[0]["id"], task);
    resumed.cancel();
    let response = resumed.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Cancelled, "{response:?}");
    wait_for(|| async { !server.calls_of("CancelTask").is_empty() }).await;
    assert_eq!(server.calls_of("CancelTask")[0]["id"], task);
}

#[tokio::test(flavor = "multi_thread")]
async fn calling_a_remote_agent_is_governed_like_a_call_with_side_effects() {
    let server = tokio::task::block_in_place(|| A2aEchoServer::start(&[]));
    let mock = MockLlm::start().await;
    let ws = workspace_deciding(&mock, &server, "unused", "ask");
    let runtime = runtime(&ws);
    for approve in [true, false] {
        let handle = runtime
            .request(RequestOptions {
                input: "echo governed".into(),
                agent: Some("remote".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let id = handle.request_id().clone();
        // Policy asked a human: nothing reached the remote agent yet.
        let mut pending = Vec::new();
        wait_for(|| async {
            let list = runtime
                .approvals()
                .list(Some(keel::ApprovalStatus::Pending))
                .await
                .unwrap();
            !list.is_empty()
        })
        .await;
        pending.extend(
            runtime
                .approvals()
                .list(Some(keel::ApprovalStatus::Pending))
                .await
                .unwrap(),
        );
        assert_eq!(pending[0].request_id, id);
        assert_eq!(pending[0].tool, "remote");
        assert_eq!(pending[0].arguments["input"], "echo governed");
        let sent_before = server.calls_of("SendStreamingMessage").len();
        runtime
            .approvals()
            .decide(
                &pending[0].approval_id,
                approve,
                Default::default(),
                "test",
                None,
            )
            .await
            .unwrap();
        let response = handle.wait().await.unwrap();
        let sent = server.calls_of("SendStreamingMessage").len() - sent_before;
        if approve {
            assert_eq!(response.status, RunStatus::Completed, "{response:?}");
            assert_eq!(response.output.as_deref(), Some("echo: governed"));
            assert_eq!(sent, 1);
        } else {
            assert_eq!(response.status, RunStatus::Failed, "{response:?}");
            assert_eq!(response.error.unwrap().code, ErrorCode::ToolBlocked);
            assert_eq!(sent, 0, "a denied call never reaches the remote agent");
        }
    }
    // In plan mode a call with side effects is refused without asking.
    let response = runtime
        .request(RequestOptions {
            input: "echo planned".into(),
            agent: Some("remote".into()),
            mode: Some(keel::PermissionMode::Plan),
            ..Default::default()
        })
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Failed, "{response:?}");
}
