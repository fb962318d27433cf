//! Workflows end to end through the SDK: a map over ten items, a condition on a typed field,
//! an approval node and a nested workflow; the other branch skipped; the side-effect log
//! written once per node; spec-driven phases with gates; loops with a bound.

use keel::EventPayload;
use keel::{ApprovalScope, RunStatus, Runtime};
use keel_test_support::workflows::triage_workspace;
use keel_test_support::{MockLlm, MockResponse, OPENAI_MOCK_MODEL, WorkspaceBuilder};
use serde_json::json;

use crate::common::{self, assert_well_formed, types};

/// Runs workflow `name` with `input` to its end.
async fn finish(runtime: &Runtime, name: &str, input: &str) -> keel::RunResponse {
    let handle = runtime.run_workflow(name, input, None).await.unwrap();
    handle.wait().await.unwrap()
}

#[tokio::test]
async fn a_workflow_maps_branches_waits_for_approval_and_nests() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text([r#"{"severity": "high"}"#]));
    let ws = triage_workspace(&mock.base_url()).build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = runtime
        .run_workflow("triage", r#"{"ticket": "T-1"}"#, None)
        .await
        .unwrap();
    let id = handle.request_id().clone();

    let approval = common::pending_approval(&runtime).await;
    assert_eq!(approval.request_id, id);
    assert_eq!(
        approval.ask_reason.as_deref(),
        Some("Ship the high fix for T-1?")
    );
    assert_eq!(
        runtime.runs().get(&id).await.unwrap().unwrap().status,
        RunStatus::WaitingApproval
    );
    runtime
        .approvals()
        .decide(
            &approval.approval_id,
            true,
            ApprovalScope::Once,
            "ops",
            None,
        )
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    // The single sink `done` joined what reached it: the nested workflow's output.
    assert_eq!(response.value, Some(json!({"notify": {"recorded": true}})));
    let effects = std::fs::read_to_string(ws.join("effects.log")).unwrap();
    let mut lines: Vec<&str> = effects.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (1..=10)
        .map(|i| format!(r#"{{"entry":"item {i}"}}"#))
        .chain([r#"{"entry":"notify T-1"}"#.to_owned()])
        .collect();
    expected.sort_unstable();
    assert_eq!(lines, expected, "each side effect exactly once");

    let events = runtime.runs().events(&id, 0).await.unwrap();
    assert_well_formed(&events);
    let names = types(&events);
    assert_eq!(names[1], "runtime.workflow.started");
    assert!(names.contains(&"runtime.approval.requested"));
    assert!(names.contains(&"runtime.workflow.completed"));
    let skipped: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::NodeSkipped(s) => Some(s.node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(skipped, ["low"]);
    let items = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::NodeCompleted(c) if c.node == "each" && c.key.item.is_some()))
        .count();
    assert_eq!(items, 10);

    let tree = runtime.run_tree(&id).await.unwrap().unwrap();
    // Agent and workflow nodes are child runs (classify, notify); tool calls are in the
    // workflow's own log.
    assert_eq!(tree.children.len(), 2);
    let nested = tree
        .children
        .iter()
        .find(|c| c.run.agent == "workflow/notify")
        .unwrap();
    assert_eq!(nested.run.links.root_id.as_ref(), Some(&id));
    let calls = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::DirectCompleted { ok: true, .. }))
        .count();
    assert_eq!(
        calls, 11,
        "plan and ten items, each a governed call in the log"
    );
}

#[tokio::test]
async fn the_other_branch_runs_when_the_typed_field_differs() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text([r#"{"severity": "low"}"#]));
    let ws = triage_workspace(&mock.base_url()).build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = finish(&runtime, "triage", r#"{"ticket": "T-2"}"#).await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        response.value,
        Some(json!({"low": {"classify": {"severity": "low"}}}))
    );
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    let skipped: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::NodeSkipped(s) => Some(s.node.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(skipped, ["gate", "notify"]);
    assert!(
        !std::fs::read_to_string(ws.join("effects.log"))
            .unwrap()
            .contains("notify")
    );
}

#[tokio::test]
async fn a_bad_input_is_refused_before_the_run_starts() {
    let mock = MockLlm::start().await;
    let ws = triage_workspace(&mock.base_url()).build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let error = runtime
        .run_workflow("triage", r#"{"ticket": 7}"#, None)
        .await
        .err()
        .unwrap();
    assert!(
        error
            .to_string()
            .contains("does not match its schema at `/ticket`"),
        "{error}"
    );
    let error = runtime.run_workflow("nope", "", None).await.err().unwrap();
    assert!(
        error.to_string().contains("unknown workflow `nope`"),
        "{error}"
    );
}

/// A spec-driven workflow: `spec` writes a file, `implement` runs once the `spec` phase's
/// command gate saw it; `verify`'s agent verdict decides.
fn phased(mock: &MockLlm, gate_file: &str) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: {OPENAI_MOCK_MODEL}, timeout: 5s }}",
                mock.base_url()
            ),
        )
        .agent(
            "reviewer",
            "  model: mock\n  instructions: You review.\n  output:\n    schema: { type: object, properties: { pass: { type: boolean } }, required: [pass] }\n",
        )
        .tool(
            "write_spec",
            "description: Writes the spec.\nschema: { type: object }\nimpl: { kind: command, command: [\"sh\", \"-c\", \"cat > /dev/null; echo spec > spec.md; echo written\"] }\npolicy: allow\n",
        )
        .yaml(&format!(
            r#"
apiVersion: keel/v1
kind: Workflow
metadata: {{ name: feature }}
spec:
  nodes:
    - {{ id: spec, kind: tool, tool: write_spec }}
    - {{ id: implement, kind: tool, tool: write_spec }}
  edges:
    - {{ from: spec, to: implement }}
  phases:
    - name: spec
      nodes: [spec]
      gate: {{ kind: command, command: ["test", "-f", "{gate_file}"] }}
    - name: implement
      nodes: [implement]
      gate: {{ kind: agent, agent: reviewer, input: "Review {{{{ outputs.implement }}}}", pass: {{ path: /pass, equals: true }} }}
"#
        ))
}

#[tokio::test]
async fn phases_pass_their_gates_in_order() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text([r#"{"pass": true}"#]));
    let ws = phased(&mock, "spec.md").build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = finish(&runtime, "feature", "").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    let phases: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::PhaseStarted(p) => Some(format!("started {}", p.phase)),
            EventPayload::PhaseCompleted(p) => Some(format!("completed {}", p.phase)),
            EventPayload::PhaseVerified(p) => Some(format!("verified {}", p.phase)),
            EventPayload::PhaseBlocked(p) => Some(format!("blocked {}", p.phase)),
            _ => None,
        })
        .collect();
    assert_eq!(
        phases,
        [
            "started spec",
            "completed spec",
            "verified spec",
            "started implement",
            "completed implement",
            "verified implement"
        ]
    );
    assert!(
        mock.requests()[0]
            .last_content_of("user")
            .unwrap()
            .contains("Review written")
    );
}

#[tokio::test]
async fn a_gate_that_refuses_blocks_its_phase_and_fails_the_run() {
    let mock = MockLlm::start().await;
    let ws = phased(&mock, "missing.md").build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = finish(&runtime, "feature", "").await;
    assert_eq!(response.status, RunStatus::Failed);
    let error = response.error.unwrap();
    assert!(
        error
            .message
            .contains("phase `spec` is blocked by its command gate"),
        "{}",
        error.message
    );
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    assert_well_formed(&events);
    let names = types(&events);
    assert!(names.contains(&"runtime.specDriven.phase.blocked"));
    // `implement` never ran.
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.payload, EventPayload::NodeStarted(s) if s.node == "implement"))
    );
}

#[tokio::test]
async fn a_loop_runs_again_until_its_condition_stops_holding() {
    let mock = MockLlm::start().await;
    // The reviewer fails the first two drafts.
    mock.push(MockResponse::text([r#"{"pass": false}"#]));
    mock.push(MockResponse::text([r#"{"pass": false}"#]));
    mock.push(MockResponse::text([r#"{"pass": true}"#]));
    let ws = phased(&mock, "spec.md")
        .yaml(
            r#"
apiVersion: keel/v1
kind: Workflow
metadata: { name: drafts }
spec:
  nodes:
    - { id: draft, kind: tool, tool: write_spec }
    - { id: review, kind: agent, agent: reviewer, input: "Review the draft. Last verdict: {{ outputs.review.pass if outputs.review is defined else 'none' }}" }
  edges:
    - { from: draft, to: review }
    - { from: review, to: draft, when: { path: /pass, equals: false }, maxIterations: 3 }
"#,
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = finish(&runtime, "drafts", "").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.value, Some(json!({"pass": true})));
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    let reviews: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::NodeCompleted(c) if c.node == "review" => Some(c.key.iteration),
            _ => None,
        })
        .collect();
    assert_eq!(reviews, [1, 2, 3]);
    // While a loop runs again, templates see the outputs of the iteration before.
    let prompts: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.last_content_of("user").unwrap_or_default().to_owned())
        .collect();
    assert!(prompts[0].ends_with("Last verdict: none"), "{prompts:?}");
    assert!(prompts[1].ends_with("Last verdict: False"), "{prompts:?}");
}

#[tokio::test]
async fn a_failed_attempt_is_retried_and_a_slow_one_times_out() {
    let mock = MockLlm::start().await;
    let ws = WorkspaceBuilder::new()
        .tool(
            "flaky",
            "description: Fails the first time.\nschema: { type: object }\nimpl: { kind: command, command: [\"sh\", \"-c\", \"cat > /dev/null; if [ -f once ]; then echo '{\\\"ok\\\": true}'; else touch once; echo broken >&2; exit 1; fi\"] }\npolicy: allow\n",
        )
        .tool(
            "sleepy",
            "description: Takes long.\nschema: { type: object }\nimpl: { kind: command, command: [\"sleep\", \"30\"], timeout: 60s }\npolicy: allow\n",
        )
        .yaml(
            r#"
apiVersion: keel/v1
kind: Workflow
metadata: { name: flaky }
spec:
  nodes:
    - { id: try, kind: tool, tool: flaky, retry: { maxAttempts: 2, backoff: 10ms } }
---
apiVersion: keel/v1
kind: Workflow
metadata: { name: sleepy }
spec:
  nodes:
    - { id: wait, kind: tool, tool: sleepy, timeout: 300ms }
"#,
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let response = finish(&runtime, "flaky", "").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.value, Some(json!({"ok": true})));
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    let failed: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::NodeFailed(f) => Some((f.attempt, f.will_retry)),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [(1, true)]);

    let response = finish(&runtime, "sleepy", "").await;
    assert_eq!(response.status, RunStatus::Failed);
    let error = response.error.unwrap();
    assert!(
        error
            .message
            .contains("node `wait`: the attempt took longer than its timeout of 300ms"),
        "{}",
        error.message
    );
    drop(mock);
}
