//! Governance end to end, with real hook scripts, a mock model on loopback and the real
//! `keel` binary — the acceptance scenarios of the governance plan: a pre-call hook that
//! denies and one that asks (decided from a second process); a post-call hook that appends an
//! audit line while usage is recorded; a PromptSubmit hook whose context the model sees (and
//! `runtime.prompt.assembled` records as `hook_context`) and a
//! SessionStop hook that runs a summary script; plus policy rules and hook failures.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use keel_test_support::{
    CONFIG_FILE, Cli, MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder,
};
use serde_json::Value;

use crate::common::keel_in;

/// A workspace whose agent `a` has the `deploy` command tool (it appends to deployed.txt).
pub(crate) fn workspace(base_url: &str) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .openai_model_at("mock", base_url)
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }
            "#,
        )
        .agent("a", "{ model: mock, tools: [deploy, read_file] }")
}

/// The spec of a hook `name` on `event` running `hooks/{name}.sh` with `sh`.
fn sh_hook(name: &str, event: &str, extra: &str) -> String {
    format!(
        "event: {event}
handler: {{ kind: command, command: [\"sh\", \"hooks/{name}.sh\"] }}
{extra}"
    )
}

fn script(ws: &TempWorkspace, name: &str, body: &str) {
    ws.write_executable(format!("hooks/{name}"), body);
}

pub(crate) fn deploy_then_answer(mock: &MockLlm) {
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "deploy",
        [r#"{"service":"web"}"#],
    )]));
    mock.push(MockResponse::text(["Done."]));
}

/// The pending approvals of the workspace, newest first.
fn pending(keel: &Cli) -> Vec<Value> {
    keel.json_lines(["approvals", "list", "--json"])
}

/// Waits (up to 60 s) until some approval is pending; returns the pending ones.
pub(crate) async fn wait_for_pending(keel: &Cli) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = pending(keel);
        if !found.is_empty() {
            return found;
        }
        assert!(Instant::now() < deadline, "no approval was requested");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts `keel run "deploy web"` in the background and waits until its `deploy` call asks;
/// returns the process and the pending approvals.
pub(crate) async fn deploy_waiting_for_approval(keel: &Cli) -> (Child, Vec<Value>) {
    let child = keel
        .command(["run", "deploy web"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let asked = wait_for_pending(keel).await;
    (child, asked)
}

/// Sends `signal` (`-KILL`, `-INT`, `-TERM`) to `child`.
pub(crate) fn signal(child: &Child, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {signal} failed");
}

fn event_types(keel: &Cli) -> Vec<String> {
    keel.newest_run_events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_call_hook_written_for_claude_code_denies_the_call() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .hook(
            "guard",
            r#"
            event: PreToolUse
            matcher: deploy
            handler: { kind: command, command: ["python3", "hooks/guard.py"] }
            "#,
        )
        .build();
    // As the Claude Code documentation writes a PreToolUse hook.
    script(
        &ws,
        "guard.py",
        r#"import json, sys
data = json.load(sys.stdin)
if data["tool_name"] == "deploy" and data["tool_input"].get("service") == "web":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no deploys on Fridays"}}))
sys.exit(0)
"#,
    );
    let keel = keel_in(&ws);
    let output = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    assert!(!ws.exists("deployed.txt"), "the tool never ran");
    let told = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(told.contains("no deploys on Fridays"), "{told}");
    let types = event_types(&keel);
    assert!(
        types.contains(&"runtime.hook.completed".to_owned()),
        "{types:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_2_blocks_with_stderr_and_exit_1_is_recorded_without_blocking() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .hook("gate", &sh_hook("gate", "PreToolUse", "onError: warn"))
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .build();
    let keel = keel_in(&ws);

    script(
        &ws,
        "gate.sh",
        "echo 'frozen: release in progress' >&2\nexit 2\n",
    );
    let blocked = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(blocked.code, Some(0), "{}", blocked.stderr);
    assert!(!ws.exists("deployed.txt"));
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("frozen: release in progress")
    );

    script(&ws, "gate.sh", "echo 'oops' >&2\nexit 1\n");
    let warned = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(warned.code, Some(0), "{}", warned.stderr);
    assert!(ws.exists("deployed.txt"), "exit 1 does not block");
    let failed: Vec<Value> = keel
        .newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == "runtime.hook.failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["onError"], "warn");
    assert!(failed[0]["error"].as_str().unwrap().contains("oops"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_that_asks_waits_for_a_human_deciding_from_another_process() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .hook(
            "review",
            &sh_hook("review", "PreAbilityCall", "matcher: deploy\n"),
        )
        .build();
    script(
        &ws,
        "review.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"deploys need a human\"}}'\n",
    );
    let keel = keel_in(&ws);
    let runner = keel
        .command(["run", "deploy web"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // A second process finds the pending approval and approves it.
    let approval = wait_for_pending(&keel).await.remove(0);
    assert_eq!(approval["tool"], "deploy");
    assert_eq!(approval["askedBy"], "hook");
    let runs = keel.run(["runs", "list", "--json"]).stdout;
    assert!(runs.contains("\"waiting_approval\""), "{runs}");
    let id = approval["approvalId"].as_str().unwrap();
    let approved = keel.run(["approvals", "approve", id, "--reason", "ship it"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);

    let output = tokio::task::block_in_place(|| runner.wait_with_output().unwrap());
    assert_eq!(output.status.code(), Some(0));
    assert!(ws.exists("deployed.txt"), "the approved call ran");
    let types = event_types(&keel);
    let requested = types
        .iter()
        .position(|t| t == "runtime.approval.requested")
        .unwrap();
    let resolved = types
        .iter()
        .position(|t| t == "runtime.approval.resolved")
        .unwrap();
    assert!(requested < resolved);
    assert_eq!(keel.newest_run()["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn post_call_audit_prompt_context_and_session_summary() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .hook(
            "audit",
            r#"
            event: PostToolUse
            handler: { kind: command, command: ["python3", "hooks/audit.py"] }
            "#,
        )
        .hook("context", &sh_hook("context", "UserPromptSubmit", ""))
        .hook("summary", &sh_hook("summary", "Stop", ""))
        .build();
    script(
        &ws,
        "audit.py",
        "import json, sys\nd = json.load(sys.stdin)\nopen('audit.log', 'a').write(json.dumps({'tool': d['tool_name'], 'input': d['tool_input'], 'response': d['tool_response']}) + '\\n')\n",
    );
    script(
        &ws,
        "context.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"UserPromptSubmit\", \"additionalContext\": \"The release train leaves at 5pm.\"}}'\n",
    );
    script(
        &ws,
        "summary.sh",
        "cat > /dev/null\necho \"session ended\" > summary.txt\n",
    );
    let keel = keel_in(&ws);

    let output = tokio::task::block_in_place(|| keel.run(["run", "--session", "s1", "deploy web"]));
    assert_eq!(output.code, Some(0), "{}", output.stderr);

    let audit = ws.read("audit.log");
    let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(line["tool"], "deploy");
    assert_eq!(line["input"]["service"], "web");
    assert!(line["response"].to_string().contains("deployed"));
    let stats = keel.run(["tools", "stats", "--json"]).stdout;
    assert!(stats.contains("\"tool\":\"deploy\",\"calls\":1"), "{stats}");

    let first = mock.requests()[0].messages().to_vec();
    assert!(
        first
            .iter()
            .any(|m| m["role"] == "system" && m["content"] == "The release train leaves at 5pm."),
        "{first:?}"
    );
    // The record of the first round's prompt names the hook's context, right before the input.
    let id = keel.newest_run_id();
    let events = keel.json_lines(["runs", "events", &id, "--json"]);
    let prompt = events
        .iter()
        .find(|e| e["type"] == "runtime.prompt.assembled")
        .unwrap();
    assert_eq!(prompt["sessionId"], "s1");
    let sections: Vec<&str> = prompt["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let context = sections.iter().position(|s| *s == "hook_context").unwrap();
    assert_eq!(sections[context + 1], "input", "{sections:?}");
    assert_eq!(prompt["sections"][context]["messages"], 1);
    assert_eq!(ws.read("summary.txt"), "session ended\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_rule_denies_and_a_timeout_denies_an_unanswered_ask() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .policy(
            "p",
            r#"
            rules:
              - { tool: deploy, args: { service: "web*" }, decision: deny, reason: "web is frozen" }
            "#,
        )
        .build();
    let keel = keel_in(&ws);
    let denied = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(denied.code, Some(0), "{}", denied.stderr);
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("web is frozen")
    );
    assert!(!ws.exists("deployed.txt"));

    // Without a rule, a tool with side effects asks; nobody answers within the timeout.
    ws.write(
        CONFIG_FILE,
        workspace(&mock.base_url())
            .runtime("{ limits: { approvalTimeout: 300ms } }")
            .config_yaml(),
    );
    let expired = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(expired.code, Some(0), "{}", expired.stderr);
    assert!(!ws.exists("deployed.txt"));
    let all = keel.run(["approvals", "list", "--status", "expired", "--json"]);
    assert_eq!(all.stdout.lines().count(), 1, "{}", all.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_waiting_for_approval_survives_its_process_and_waits_again_when_resumed() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url()).build();
    let keel = keel_in(&ws);
    // `deploy` has side effects and no rule: it asks. Kill the process while it waits.
    let (mut first, asked) = deploy_waiting_for_approval(&keel).await;
    signal(&first, "-KILL");
    tokio::task::block_in_place(|| first.wait().unwrap());

    let record = keel.newest_run();
    assert_eq!(record["status"], "interrupted");
    let id = record["requestId"].as_str().unwrap().to_owned();

    let resumed = keel
        .command(["runs", "resume", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Back to waiting — on the same approval, not a second one.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let runs = keel.run(["runs", "list", "--json"]).stdout;
        if runs.contains("\"waiting_approval\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the resumed run never waited: {runs}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = pending(&keel);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["approvalId"], asked[0]["approvalId"]);
    let approval_id = again[0]["approvalId"].as_str().unwrap();
    assert_eq!(
        keel.run(["approvals", "approve", approval_id]).code,
        Some(0)
    );

    let output = tokio::task::block_in_place(|| resumed.wait_with_output().unwrap());
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(ws.exists("deployed.txt"));
    let record = keel.run(["runs", "show", &id, "--json"]).json();
    assert_eq!(record["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_can_be_answered_on_the_terminal_of_keel_run() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url()).build();
    let keel = keel_in(&ws);
    let answer =
        |text: &'static [u8]| keel.run_with_stdin(["run", "--approve-here", "deploy web"], text);

    let denied = tokio::task::block_in_place(|| answer(b"n\n"));
    assert_eq!(denied.code, Some(0), "{}", denied.stderr);
    assert!(
        denied.stderr.contains("Approve deploy"),
        "{}",
        denied.stderr
    );
    assert!(!ws.exists("deployed.txt"));

    let approved = tokio::task::block_in_place(|| answer(b"y\n"));
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    assert!(ws.exists("deployed.txt"));
    let statuses: Vec<String> = keel
        .json_lines(["approvals", "list", "--status", "all", "--json"])
        .iter()
        .map(|a| a["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, vec!["approved", "denied"], "newest first");
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_mode_runs_nothing_with_side_effects_and_a_hook_rewrite_is_rechecked() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .hook(
            "retarget",
            &sh_hook("retarget", "PreToolUse", "matcher: deploy\n"),
        )
        .build();
    let keel = keel_in(&ws);
    script(&ws, "retarget.sh", "cat > /dev/null\n");

    let planned = tokio::task::block_in_place(|| keel.run(["run", "--mode", "plan", "deploy web"]));
    assert_eq!(planned.code, Some(0), "{}", planned.stderr);
    assert!(!ws.exists("deployed.txt"), "plan mode ran a side effect");
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("permission mode plan")
    );

    // The hook sends the deploy to staging instead: the rewrite passes the gateway again.
    script(
        &ws,
        "retarget.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"updatedInput\": {\"service\": \"staging\"}}}'\n",
    );
    let rewritten = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(rewritten.code, Some(0), "{}", rewritten.stderr);
    let deployed = ws.read("deployed.txt");
    assert!(
        deployed.contains("staging") && !deployed.contains("web"),
        "{deployed}"
    );

    // A rewrite that breaks the schema is blocked like any invalid call.
    std::fs::remove_file(ws.join("deployed.txt")).unwrap();
    script(
        &ws,
        "retarget.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"updatedInput\": {\"service\": [1, 2]}}}'\n",
    );
    let broken = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(broken.code, Some(0), "{}", broken.stderr);
    assert!(!ws.exists("deployed.txt"));
    assert_eq!(keel.run(["run", "--mode", "sideways", "x"]).code, Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_asks_for_approval_in_the_conversation() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url()).build();
    let keel = keel_in(&ws);
    // The turn, then the answer to the approval question it raises.
    let output = tokio::task::block_in_place(|| {
        keel.run_with_stdin(["chat", "--session", "ops"], b"deploy web\ny\n")
    });

    assert_eq!(output.code, Some(0), "{}", output.stderr);
    assert!(
        output.stderr.contains("Approve deploy"),
        "{}",
        output.stderr
    );
    assert!(ws.exists("deployed.txt"));
    assert!(output.stdout.contains("Done."));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_failed_hook_of_parallel_calls_names_its_call() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "deploy", [r#"{"service":"web"}"#]),
        MockToolCall::new("c2", "deploy", [r#"{"service":"db"}"#]),
    ]));
    mock.push(MockResponse::text(["Done."]));
    let ws = workspace(&mock.base_url())
        .hook("gate", &sh_hook("gate", "PreToolUse", "onError: warn"))
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .build();
    script(&ws, "gate.sh", "cat > /dev/null\necho 'oops' >&2\nexit 1\n");
    let keel = keel_in(&ws);
    let output = tokio::task::block_in_place(|| keel.run(["run", "deploy web and db"]));
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    let mut calls: Vec<String> = keel
        .newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == "runtime.hook.failed")
        .map(|e| e["callId"].as_str().unwrap_or("(none)").to_owned())
        .collect();
    calls.sort();
    assert_eq!(calls, ["c1", "c2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_hook_stays_in_the_workspace_and_does_not_run() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }
            hooks: { preCall: [bound] }
            "#,
        )
        .agent("a", "{ model: mock, tools: [deploy] }")
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .hook(
            "gate",
            &sh_hook("gate", "PreToolUse", "onError: deny\nenabled: false"),
        )
        .hook(
            "bound",
            &sh_hook("bound", "PreToolUse", "onError: deny\nenabled: false"),
        )
        .build();
    // Either hook would block the call if it ran.
    script(&ws, "gate.sh", "echo 'blocked by gate' >&2\nexit 2\n");
    script(&ws, "bound.sh", "echo 'blocked by bound' >&2\nexit 2\n");
    let keel = keel_in(&ws);
    let validated = keel.run(["validate"]);
    assert_eq!(validated.code, Some(0), "{}", validated.stderr);
    let output = tokio::task::block_in_place(|| keel.run(["run", "deploy web"]));
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    assert!(
        ws.exists("deployed.txt"),
        "no disabled hook blocked the call"
    );
    let types = event_types(&keel);
    assert!(
        !types.iter().any(|t| t.starts_with("runtime.hook.")),
        "{types:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_decided_while_no_process_waits_counts_when_the_run_resumes() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let ws = workspace(&mock.base_url())
        .runtime("{ limits: { approvalTimeout: 60s } }")
        .build();
    let keel = keel_in(&ws);
    // `deploy` asks; the process dies while it waits, and a person approves meanwhile.
    let (mut first, asked) = deploy_waiting_for_approval(&keel).await;
    signal(&first, "-KILL");
    tokio::task::block_in_place(|| first.wait().unwrap());
    let approval_id = asked[0]["approvalId"].as_str().unwrap();
    let approved = keel.run(["approvals", "approve", approval_id]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    let id = keel.newest_run()["requestId"].as_str().unwrap().to_owned();

    // The resumed run takes the decision: it neither asks again nor waits.
    let resumed = tokio::task::block_in_place(|| keel.run(["runs", "resume", &id]));
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    assert!(ws.exists("deployed.txt"));
    let all = keel.json_lines(["approvals", "list", "--status", "all", "--json"]);
    assert_eq!(all.len(), 1, "a second approval was asked: {all:?}");
    assert_eq!(all[0]["status"], "approved");
    let record = keel.run(["runs", "show", &id, "--json"]).json();
    assert_eq!(record["status"], "completed");
    let resolved: Vec<_> = keel
        .json_lines(["runs", "events", &id, "--json"])
        .into_iter()
        .filter(|e| e["type"] == "runtime.approval.resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["status"], "approved");
}
