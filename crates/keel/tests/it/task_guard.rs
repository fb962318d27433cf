//! Tasks follow the task lifecycle of the governance plan: `create` runs the whole guard —
//! gateway, policy and `PreToolUse` hooks — and answers `allow | deny | needs_approval` with
//! the reasons; `run` re-checks policy and runs the hooks again only with `doubleCheckOnRun`.
//! The acceptance scenarios: a guard hook denying at create, and a task needing a human. The
//! hook is a real Python script written as the Claude Code documentation writes them.

use keel::{
    ApprovalScope, EventPayload, PermissionMode, Runtime, TaskDecision, TaskRequest, TaskStatus,
};
use keel_test_support::TempWorkspace;
use serde_json::Value;

use crate::common;

/// A guard in Claude Code's style: it logs every input, denies prod deploys and asks a human
/// about web deploys.
const GUARD: &str = r#"import json, sys
data = json.load(sys.stdin)
with open("guard.log", "a") as log:
    log.write(json.dumps(data) + "\n")
if data["hook_event_name"] != "PreToolUse":
    sys.exit(0)
service = data["tool_input"].get("service")
if service == "prod":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "prod deploys need a change ticket"}}))
elif service == "web":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "ask", "permissionDecisionReason": "web deploys need a human"}}))
sys.exit(0)
"#;

/// Tools `deploy` and `deploy_twice` (whose Tool document says `doubleCheckOnRun: true`), both
/// appending their input to deployed.txt, guarded by the script above.
fn workspace() -> TempWorkspace {
    let deploy = |extra: &str| {
        format!(
            r#"
            description: Deploys a service.
            schema: {{ type: object, properties: {{ service: {{ type: string }} }}, required: [service] }}
            impl: {{ kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }}
            {extra}
            "#
        )
    };
    let ws = common::agent_and_model("http://127.0.0.1:9/v1", &["deploy", "deploy_twice"], "")
        .runtime("{ defaultAgent: assistant }")
        .tool("deploy", &deploy(""))
        .tool("deploy_twice", &deploy("doubleCheckOnRun: true"))
        .policy("p", "{ rules: [{ tool: \"deploy*\", decision: allow }] }")
        .hook(
            "guard",
            r#"
            event: PreToolUse
            matcher: "deploy.*"
            handler: { kind: command, command: ["python3", "hooks/guard.py"] }
            "#,
        )
        .build();
    ws.write_executable("hooks/guard.py", GUARD);
    ws
}

fn runtime(ws: &TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

fn request(tool: &str, service: &str, double_check_on_run: bool) -> TaskRequest {
    TaskRequest {
        agent: None,
        tool: tool.to_owned(),
        arguments: format!(r#"{{"service":"{service}"}}"#),
        double_check_on_run,
        mode: None,
    }
}

/// The inputs the guard was given, in order.
fn guard_inputs(ws: &TempWorkspace) -> Vec<Value> {
    if !ws.exists("guard.log") {
        return Vec::new();
    }
    ws.read("guard.log")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guard_hook_denies_a_task_at_create_with_its_reason() {
    let ws = workspace();
    let runtime = runtime(&ws);

    let task = runtime
        .tasks()
        .create(request("deploy", "prod", false))
        .await
        .unwrap();

    assert_eq!(task.decision, TaskDecision::Deny);
    assert_eq!(
        task.reason.as_deref(),
        Some("prod deploys need a change ticket")
    );
    assert_eq!(task.hooks.len(), 1, "{task:?}");
    assert_eq!(task.hooks[0].hook, "guard");
    assert_eq!(task.hooks[0].outcome, "deny");
    assert_eq!(
        task.hooks[0].reason.as_deref(),
        Some("prod deploys need a change ticket")
    );
    // The hook saw a Claude Code input: the task stands for the session and the call.
    let inputs = guard_inputs(&ws);
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0]["hook_event_name"], "PreToolUse");
    assert_eq!(inputs[0]["tool_name"], "deploy");
    assert_eq!(inputs[0]["session_id"], task.task_id.as_str());
    assert_eq!(
        inputs[0]["tool_use_id"],
        format!("call_{}", task.task_id).as_str()
    );
    assert_eq!(inputs[0]["permission_mode"], "default");
    assert_eq!(inputs[0]["cwd"], ws.path_str());

    let refused = runtime.tasks().run(&task.task_id).await.err().unwrap();
    assert!(refused.to_string().contains("cannot run"), "{refused}");
    assert!(!ws.exists("deployed.txt"), "the tool never ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_a_hook_asks_about_needs_a_human_and_its_hook_runs_once() {
    let ws = workspace();
    let runtime = runtime(&ws);

    let task = runtime
        .tasks()
        .create(request("deploy", "web", false))
        .await
        .unwrap();
    assert_eq!(task.decision, TaskDecision::NeedsApproval);
    assert_eq!(task.reason.as_deref(), Some("web deploys need a human"));
    assert_eq!(task.hooks[0].outcome, "ask");

    // The run does not ask the hook again, but the human its answer called for.
    let handle = runtime.tasks().run(&task.task_id).await.unwrap();
    let approval = common::wait_for_pending(&runtime).await;
    assert_eq!(approval.asked_by, "hook");
    assert_eq!(
        approval.ask_reason.as_deref(),
        Some("web deploys need a human")
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
    assert_eq!(response.status, keel::RunStatus::Completed, "{response:?}");
    assert!(ws.read("deployed.txt").contains("web"));
    assert_eq!(guard_inputs(&ws).len(), 1, "the hook ran at create only");
    let done = runtime.tasks().get(&task.task_id).await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn double_check_on_run_runs_the_hooks_again_from_the_request_or_the_tool() {
    let ws = workspace();
    let runtime = runtime(&ws);

    for (tool, asked) in [("deploy", true), ("deploy_twice", false)] {
        let before = guard_inputs(&ws).len();
        let task = runtime
            .tasks()
            .create(request(tool, "api", asked))
            .await
            .unwrap();
        assert_eq!(task.decision, TaskDecision::Allow, "{task:?}");
        assert!(task.double_check_on_run, "{tool}");
        let handle = runtime.tasks().run(&task.task_id).await.unwrap();
        let response = handle.wait().await.unwrap();
        assert_eq!(response.status, keel::RunStatus::Completed, "{response:?}");

        let inputs = guard_inputs(&ws);
        assert_eq!(inputs.len(), before + 2, "at create and at run ({tool})");
        let call_id = format!("call_{}", task.task_id);
        assert_eq!(inputs[before + 1]["tool_use_id"], call_id.as_str());
        // At run the hook's answer is in the run's log, with the call it was about.
        let events = common::stored(&runtime, &response).await;
        let recorded = events.iter().any(|e| {
            matches!(&e.payload, keel::EventPayload::HookCompleted { hook, call_id: Some(id), .. }
                if hook == "guard" && *id == call_id)
        });
        assert!(recorded, "{:?}", common::types(&events));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_checked_under_its_permission_mode_at_create_and_at_run() {
    let ws = workspace();
    let runtime = runtime(&ws);

    // Under `plan`, a tool with side effects is refused at create, as in a run: policy's
    // rule allowing `deploy*` does not count, and no hook is asked.
    let planned = runtime
        .tasks()
        .create(TaskRequest {
            mode: Some(PermissionMode::Plan),
            ..request("deploy", "api", false)
        })
        .await
        .unwrap();
    assert_eq!(planned.decision, TaskDecision::Deny, "{planned:?}");
    assert_eq!(
        planned.reason.as_deref(),
        Some("plan mode runs no tool that changes anything")
    );
    assert_eq!(planned.issues[0].found, "permission mode plan");
    assert_eq!(planned.mode, Some(PermissionMode::Plan));
    assert!(guard_inputs(&ws).is_empty(), "no hook was asked");
    let refused = runtime.tasks().run(&planned.task_id).await;
    assert!(refused.is_err(), "a denied task does not run");

    // Under `acceptEdits` the same call is allowed; the hooks see the task's mode, and its
    // run is checked under it too (recorded in the run's opening event).
    let accepted = runtime
        .tasks()
        .create(TaskRequest {
            mode: Some(PermissionMode::AcceptEdits),
            ..request("deploy", "api", false)
        })
        .await
        .unwrap();
    assert_eq!(accepted.decision, TaskDecision::Allow, "{accepted:?}");
    assert_eq!(guard_inputs(&ws)[0]["permission_mode"], "acceptEdits");
    let handle = runtime.tasks().run(&accepted.task_id).await.unwrap();
    let id = handle.request_id().clone();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, keel::RunStatus::Completed, "{response:?}");
    let events = runtime.runs().events(&id, 0).await.unwrap();
    assert!(
        matches!(
            &events[0].payload,
            EventPayload::RequestStarted {
                mode: Some(PermissionMode::AcceptEdits),
                ..
            }
        ),
        "{:?}",
        events[0].payload
    );
}
