//! Subagents and structured output: `task` calls run child runs in parallel and their answers
//! reach the parent; a child has no more permission than its parent; runs nest only so deep;
//! cancelling a parent stops its children's tools; a child's approval names the root; an
//! agent with `output.schema` is asked again until its answer matches.

use keel::{AdapterEvent, ErrorCode, EventPayload, FinishReason};
use keel::{RequestOptions, RunStatus, Runtime};
use keel_test_support::process::{alive, read_pid, wait_gone};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, OPENAI_MOCK_MODEL, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::{self, assert_well_formed, types};

/// The system prompt of a recorded model request.
fn system(messages: &[Value]) -> String {
    messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The tool results a request carries, in order.
fn tool_results(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn task(id: &str, agent: &str, prompt: &str) -> MockToolCall {
    MockToolCall::new(
        id,
        "task",
        [json!({"agent": agent, "prompt": prompt}).to_string()],
    )
}

/// Model `mock` at `mock`'s URL, agent `lead` (instructions `You are lead.`) with `lead_spec`,
/// and a runtime whose default agent is `lead`.
fn workspace(mock: &MockLlm, lead_spec: &str) -> WorkspaceBuilder {
    workspace_with(mock, "{ defaultAgent: lead }", lead_spec)
}

fn workspace_with(mock: &MockLlm, runtime: &str, lead_spec: &str) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: {OPENAI_MOCK_MODEL}, timeout: 5s }}",
                mock.base_url()
            ),
        )
        .runtime(runtime)
        .agent(
            "lead",
            &format!("  model: mock\n  instructions: You are lead.\n{lead_spec}"),
        )
}

fn agent(name: &str, extra: &str) -> String {
    format!("  model: mock\n  instructions: You are {name}.\n{extra}")
}

async fn start(runtime: &Runtime, input: &str) -> keel::RunHandle {
    runtime
        .request(RequestOptions {
            input: input.into(),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn run(runtime: &Runtime, input: &str) -> keel::RunResponse {
    start(runtime, input).await.wait().await.unwrap()
}

#[tokio::test]
async fn parallel_task_calls_run_two_subagents_and_both_answers_reach_the_parent() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let system = system(messages);
        if system.contains("You are lead.") {
            let results = tool_results(messages);
            return match results.is_empty() {
                true => MockResponse::tool_calls([
                    task("t1", "researcher", "Find the facts."),
                    task("t2", "writer", "Write the intro."),
                ]),
                false => MockResponse::text([format!("Report: {}", results.join(" | "))]),
            };
        }
        if system.contains("You are researcher.") {
            return MockResponse::text(["facts: water is wet"]);
        }
        MockResponse::text(["intro: once upon a time"])
    });
    let ws = workspace(&mock, "  subagents: [researcher, writer]\n")
        .agent("researcher", &agent("researcher", ""))
        .agent("writer", &agent("writer", ""))
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = run(&runtime, "Write a report").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        response.output.as_deref(),
        Some("Report: facts: water is wet | intro: once upon a time")
    );
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    assert_well_formed(&events);
    let handoffs: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::Handoff {
                        agent,
                        child_request_id,
                        ..
                    },
            } => Some((agent.clone(), child_request_id.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(handoffs.len(), 2, "{:?}", types(&events));
    let tree = runtime
        .run_tree(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tree.children.len(), 2);
    for child in &tree.children {
        assert_eq!(child.run.status, RunStatus::Completed);
        assert_eq!(
            child.run.links.parent_id.as_ref(),
            Some(&response.request_id)
        );
        assert_eq!(child.run.links.root_id.as_ref(), Some(&response.request_id));
        assert!(
            handoffs
                .iter()
                .any(|(_, id)| *id == child.run.request_id.to_string())
        );
        let child_events = runtime
            .runs()
            .events(&child.run.request_id, 0)
            .await
            .unwrap();
        assert_well_formed(&child_events);
    }
    // The children's tokens are in the parent's usage, and a tree counts once in the sums.
    let children: u64 = tree.children.iter().map(|c| c.run.usage.total_tokens).sum();
    assert!(children > 0 && response.usage.total_tokens > children);
    let rows = runtime
        .runs()
        .usage(keel::UsageBy::Agent, &keel::RunFilter::default())
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].group.as_str(), rows[0].runs), ("lead", 1));
    assert_eq!(rows[0].usage, response.usage);
    // The two children ran at the same time: each started before the other ended.
    let (a, b) = (&tree.children[0].run, &tree.children[1].run);
    assert!(
        a.started_at <= b.ended_at.clone().unwrap() && b.started_at <= a.ended_at.clone().unwrap()
    );
    // Their usage counts into the parent's.
    let children_tokens: u64 = tree.children.iter().map(|c| c.run.usage.total_tokens).sum();
    assert!(
        response.usage.total_tokens > children_tokens,
        "{:?}",
        response.usage
    );
}

#[tokio::test]
async fn a_child_cannot_call_a_tool_its_parents_policy_denies() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let results = tool_results(messages);
        if system(messages).contains("You are lead.") {
            return match results.is_empty() {
                true => MockResponse::tool_calls([task("t1", "helper", "Touch the marker.")]),
                false => MockResponse::text([format!("lead saw: {}", results[0])]),
            };
        }
        match results.is_empty() {
            true => MockResponse::tool_calls([MockToolCall::new(
                "s1",
                "shell",
                [r#"{"command": "touch marker"}"#],
            )]),
            false => MockResponse::text([format!("helper saw: {}", results[0])]),
        }
    });
    let ws = workspace(&mock, "  subagents: [helper]\n  tools: [read_file]\n")
        .agent("helper", &agent("helper", "  tools: [shell]\n"))
        .policy("lead-rules", "agents: [lead]\nrules: [{ tool: shell, decision: deny, reason: the lead never runs commands }]")
        .policy("helper-rules", "agents: [helper]\nrules: [{ tool: shell, decision: allow }]")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let response = run(&runtime, "Delegate").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert!(
        !ws.join("marker").exists(),
        "the child ran a command its parent may not"
    );
    let tree = runtime
        .run_tree(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    let child = &tree.children[0].run;
    let child_events = runtime.runs().events(&child.request_id, 0).await.unwrap();
    let denied = child_events.iter().find_map(|e| match &e.payload {
        EventPayload::PolicyDecided {
            decision, source, ..
        } => Some((*decision, source.clone())),
        _ => None,
    });
    let (decision, source) = denied.expect("the child's call was decided by policy");
    assert_eq!(decision, keel::PolicyDecision::Deny);
    assert!(source.starts_with("narrowing["), "{source}");

    // The helper's own policy allows it: asked directly, it runs the command.
    let direct = runtime
        .request(RequestOptions {
            input: "Touch it".into(),
            agent: Some("helper".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(direct.status, RunStatus::Completed, "{direct:?}");
    assert!(ws.join("marker").exists());
}

#[tokio::test]
async fn runs_nest_only_as_deep_as_the_limit() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let results = tool_results(messages);
        let system = system(messages);
        let next = match () {
            _ if system.contains("You are lead.") => "middle",
            _ if system.contains("You are middle.") => "leaf",
            _ => return MockResponse::text(["leaf answer"]),
        };
        match results.is_empty() {
            true => MockResponse::tool_calls([task("t", next, "Go deeper.")]),
            false => MockResponse::text([format!("got: {}", results[0])]),
        }
    });
    let ws = workspace_with(
        &mock,
        "{ defaultAgent: lead, limits: { maxDepth: 1 } }",
        "  subagents: [middle]\n",
    )
    .agent("middle", &agent("middle", "  subagents: [leaf]\n"))
    .agent("leaf", &agent("leaf", ""))
    .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = run(&runtime, "Nest").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let output = response.output.unwrap();
    assert!(output.contains("runs may nest only 1 deep"), "{output}");
    let tree = runtime
        .run_tree(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tree.children.len(), 1);
    assert!(tree.children[0].children.is_empty(), "no run at depth 2");
}

/// Tool `slow`: records its pid, then sleeps.
const SLOW_TOOL: &str = r#"
description: Sleeps for a while.
schema: { type: object }
impl:
  kind: command
  command: ["sh", "-c", "echo $$$$ > child.pid; exec sleep 30"]
  timeout: 60s
policy: allow
"#;

#[tokio::test]
async fn cancelling_the_parent_kills_a_childs_running_tool() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        match system(messages).contains("You are lead.") {
            true => MockResponse::tool_calls([task("t", "helper", "Be slow.")]),
            false => MockResponse::tool_calls([MockToolCall::new("s", "slow", ["{}"])]),
        }
    });
    let ws = workspace(&mock, "  subagents: [helper]\n")
        .agent("helper", &agent("helper", "  tools: [slow]\n"))
        .tool("slow", SLOW_TOOL)
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = start(&runtime, "Delegate something slow").await;
    let parent = handle.request_id().clone();
    let pid = read_pid(&ws.join("child.pid")).await;
    assert!(alive(pid));
    assert!(runtime.cancel(&parent).await.unwrap());
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Cancelled);
    assert!(
        wait_gone(pid).await,
        "the child's tool process {pid} still runs"
    );
    let tree = runtime.run_tree(&parent).await.unwrap().unwrap();
    let child = &tree.children[0].run;
    // The child records its end once its task notices; wait for it.
    let mut status = child.status;
    for _ in 0..2000 {
        if status.is_terminal() {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        status = runtime
            .runs()
            .get(&child.request_id)
            .await
            .unwrap()
            .unwrap()
            .status;
    }
    assert_eq!(status, RunStatus::Cancelled);
}

#[tokio::test]
async fn a_childs_approval_names_the_root_request() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let results = tool_results(messages);
        if system(messages).contains("You are lead.") {
            return match results.is_empty() {
                true => MockResponse::tool_calls([task("t", "helper", "Write it.")]),
                false => MockResponse::text(["lead done"]),
            };
        }
        match results.is_empty() {
            true => MockResponse::tool_calls([MockToolCall::new(
                "w",
                "write_file",
                [r#"{"path": "out.txt", "content": "hi"}"#],
            )]),
            false => MockResponse::text(["helper done"]),
        }
    });
    let ws = workspace(&mock, "  subagents: [helper]\n")
        .agent("helper", &agent("helper", "  tools: [write_file]\n"))
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = start(&runtime, "Delegate a write").await;
    let root = handle.request_id().clone();
    let pending = common::pending_approval(&runtime).await;
    assert_ne!(pending.request_id, root, "the child asks");
    assert_eq!(pending.root_request_id.as_ref(), Some(&root));
    runtime
        .approvals()
        .decide(
            &pending.approval_id,
            true,
            keel::ApprovalScope::Once,
            "ops",
            None,
        )
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "hi");
}

const VERDICT: &str = "  output:\n    schema: { type: object, properties: { severity: { enum: [low, high] } }, required: [severity] }\n    maxRetries: 1\n";

#[tokio::test]
async fn structured_output_is_asked_again_with_the_issues_and_stored() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["It is urgent!"]));
    mock.push(MockResponse::text([
        "```json\n{\"severity\": \"high\"}\n```",
    ]));
    let ws = workspace(&mock, VERDICT).build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = run(&runtime, "Classify").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.value, Some(json!({"severity": "high"})));
    let record = runtime
        .runs()
        .get(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.value, Some(json!({"severity": "high"})));
    let requests = mock.requests();
    assert!(system(requests[0].messages()).contains("valid against this JSON Schema"));
    let reask = requests[1].last_content_of("user").unwrap();
    assert!(reask.contains("not JSON"), "{reask}");
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    assert_well_formed(&events);
    assert!(types(&events).contains(&"runtime.output.rejected"));
}

#[tokio::test]
async fn an_answer_that_never_matches_fails_the_run_with_the_issues() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text([r#"{"severity": "urgent"}"#]));
    mock.push(MockResponse::text([r#"{"severity": "critical"}"#]));
    let ws = workspace(&mock, VERDICT).build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = run(&runtime, "Classify").await;
    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::InvalidOutput);
    let error = response.error.unwrap();
    assert_eq!(error.code, ErrorCode::OutputInvalid);
    assert!(error.message.contains("/severity"), "{}", error.message);
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn a_shutdown_interrupts_parent_and_child_and_resuming_the_parent_resumes_the_child() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let results = tool_results(messages);
        match (system(messages).contains("You are lead."), results.first()) {
            (true, None) => MockResponse::tool_calls([task("t", "helper", "Be slow.")]),
            (true, Some(result)) => MockResponse::text([format!("lead got: {result}")]),
            (false, None) => MockResponse::tool_calls([MockToolCall::new("s", "slow", ["{}"])]),
            (false, Some(_)) => MockResponse::text(["helper resumed"]),
        }
    });
    let ws = workspace(&mock, "  subagents: [helper]\n")
        .agent("helper", &agent("helper", "  tools: [slow]\n"))
        .tool("slow", SLOW_TOOL)
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = start(&runtime, "Delegate something slow").await;
    let parent = handle.request_id().clone();
    let pid = read_pid(&ws.join("child.pid")).await;
    let report = runtime
        .shutdown(std::time::Duration::from_millis(100))
        .await;
    assert_eq!(report.interrupted, 2, "the parent and its child");
    assert_eq!(handle.wait().await.unwrap().status, RunStatus::Interrupted);
    assert!(wait_gone(pid).await);
    let tree = runtime.run_tree(&parent).await.unwrap().unwrap();
    let child = tree.children[0].run.clone();
    assert_eq!(child.status, RunStatus::Interrupted);

    // A restarted process resumes the parent, which resumes the same child (not a new one).
    let restarted = Runtime::builder().workspace(ws.path()).build().unwrap();
    let resumed = restarted
        .resume(&parent)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Completed, "{resumed:?}");
    assert_eq!(resumed.output.as_deref(), Some("lead got: helper resumed"));
    let tree = restarted.run_tree(&parent).await.unwrap().unwrap();
    assert_eq!(tree.children.len(), 1, "no second child");
    assert_eq!(tree.children[0].run.request_id, child.request_id);
    assert_eq!(tree.children[0].run.status, RunStatus::Completed);
    assert_eq!(tree.children[0].run.links.resumed, 1);
    for id in [&parent, &child.request_id] {
        assert_well_formed_resumed(&restarted.runs().events(id, 0).await.unwrap());
    }
}

/// Dense from 1, opened by `runtime.request.started`, interrupted once, resumed, completed.
fn assert_well_formed_resumed(events: &[keel::Event]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1);
    }
    let names = types(events);
    assert_eq!(names[0], "runtime.request.started");
    assert!(names.contains(&"runtime.request.interrupted"), "{names:?}");
    assert!(names.contains(&"runtime.request.resumed"), "{names:?}");
    assert_eq!(
        names.last(),
        Some(&"runtime.request.completed"),
        "{names:?}"
    );
}
