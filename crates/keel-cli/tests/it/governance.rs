//! Governance end to end, with real hook scripts, a mock model on loopback and the real
//! `keel` binary — the acceptance scenarios of the governance plan: a pre-call hook that
//! denies and one that asks (decided from a second process); a post-call hook that appends an
//! audit line while usage is recorded; a PromptSubmit hook whose context the model sees and a
//! SessionStop hook that runs a summary script; plus policy rules and hook failures.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::Value;

use crate::common::{keel, run, stderr, stdout};

/// A workspace whose agent `a` has the `deploy` command tool (it appends to deployed.txt),
/// plus `extra` YAML documents.
fn workspace(base_url: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
    std::fs::write(
        dir.path().join("config/all.yaml"),
        format!(
            r#"apiVersion: keel/v1
kind: Model
metadata: {{ name: mock }}
spec: {{ provider: openai, baseUrl: "{base_url}", model: mock-model }}
---
apiVersion: keel/v1
kind: Tool
metadata: {{ name: deploy }}
spec:
  description: Deploys a service.
  schema: {{ type: object, properties: {{ service: {{ type: string }} }}, required: [service] }}
  impl: {{ kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }}
---
apiVersion: keel/v1
kind: Agent
metadata: {{ name: a }}
spec: {{ model: mock, tools: [deploy, read_file] }}
{extra}"#
        ),
    )
    .unwrap();
    dir
}

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join("hooks").join(name);
    std::fs::write(&path, body).unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status();
}

fn deploy_then_answer(mock: &MockLlm) {
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "deploy",
        [r#"{"service":"web"}"#],
    )]));
    mock.push(MockResponse::text(["Done."]));
}

/// The pending approvals of the workspace, newest first.
fn pending(ws: &str) -> Vec<Value> {
    stdout(&run(&["approvals", "list", "-w", ws, "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits (up to 20 s) until some approval is pending; returns the pending ones.
async fn wait_for_pending(ws: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = pending(ws);
        if !found.is_empty() {
            return found;
        }
        assert!(Instant::now() < deadline, "no approval was requested");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn events(ws: &str) -> Vec<Value> {
    let listed = stdout(&run(&["runs", "list", "-w", ws, "--json", "--limit", "1"]));
    let record: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    stdout(&run(&[
        "runs",
        "events",
        "-w",
        ws,
        record["requestId"].as_str().unwrap(),
        "--json",
    ]))
    .lines()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_call_hook_written_for_claude_code_denies_the_call() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let dir = workspace(
        &mock.base_url(),
        "---\napiVersion: keel/v1\nkind: Hook\nmetadata: { name: guard }\nspec:\n  event: PreToolUse\n  matcher: deploy\n  handler: { kind: command, command: [\"python3\", \"hooks/guard.py\"] }\n",
    );
    // As the Claude Code documentation writes a PreToolUse hook.
    script(
        dir.path(),
        "guard.py",
        r#"import json, sys
data = json.load(sys.stdin)
if data["tool_name"] == "deploy" and data["tool_input"].get("service") == "web":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no deploys on Fridays"}}))
sys.exit(0)
"#,
    );
    let ws = dir.path().to_str().unwrap();
    let output = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        !dir.path().join("deployed.txt").exists(),
        "the tool never ran"
    );
    let told = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(told.contains("no deploys on Fridays"), "{told}");
    let types: Vec<String> = events(ws)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
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
    let hook = |name: &str, on_error: &str| {
        format!(
            "---\napiVersion: keel/v1\nkind: Hook\nmetadata: {{ name: {name} }}\nspec:\n  event: PreToolUse\n  handler: {{ kind: command, command: [\"sh\", \"hooks/{name}.sh\"] }}\n  onError: {on_error}\n"
        )
    };
    let dir = workspace(
        &mock.base_url(),
        &format!(
            "{}---\napiVersion: keel/v1\nkind: Policy\nmetadata: {{ name: p }}\nspec: {{ rules: [{{ tool: deploy, decision: allow }}] }}\n",
            hook("gate", "warn")
        ),
    );
    let ws = dir.path().to_str().unwrap();

    script(
        dir.path(),
        "gate.sh",
        "echo 'frozen: release in progress' >&2\nexit 2\n",
    );
    let blocked = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(blocked.status.code(), Some(0), "{}", stderr(&blocked));
    assert!(!dir.path().join("deployed.txt").exists());
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("frozen: release in progress")
    );

    script(dir.path(), "gate.sh", "echo 'oops' >&2\nexit 1\n");
    let warned = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(warned.status.code(), Some(0), "{}", stderr(&warned));
    assert!(
        dir.path().join("deployed.txt").exists(),
        "exit 1 does not block"
    );
    let failed: Vec<Value> = events(ws)
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
    let dir = workspace(
        &mock.base_url(),
        "---\napiVersion: keel/v1\nkind: Hook\nmetadata: { name: review }\nspec:\n  event: PreAbilityCall\n  matcher: deploy\n  handler: { kind: command, command: [\"sh\", \"hooks/review.sh\"] }\n",
    );
    script(
        dir.path(),
        "review.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"deploys need a human\"}}'\n",
    );
    let ws = dir.path().to_str().unwrap().to_owned();
    let runner = keel()
        .args(["run", "-w", &ws, "deploy web"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // A second process finds the pending approval and approves it.
    let approval = wait_for_pending(&ws).await.remove(0);
    assert_eq!(approval["tool"], "deploy");
    assert_eq!(approval["askedBy"], "hook");
    let runs = stdout(&run(&["runs", "list", "-w", &ws, "--json"]));
    assert!(runs.contains("\"waiting_approval\""), "{runs}");
    let id = approval["approvalId"].as_str().unwrap();
    let approved = run(&["approvals", "approve", "-w", &ws, id, "--reason", "ship it"]);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));

    let output = tokio::task::block_in_place(|| runner.wait_with_output().unwrap());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        dir.path().join("deployed.txt").exists(),
        "the approved call ran"
    );
    let types: Vec<String> = events(&ws)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    let requested = types
        .iter()
        .position(|t| t == "runtime.approval.requested")
        .unwrap();
    let resolved = types
        .iter()
        .position(|t| t == "runtime.approval.resolved")
        .unwrap();
    assert!(requested < resolved);
    let record: Value = serde_json::from_str(
        stdout(&run(&["runs", "list", "-w", &ws, "--json"]))
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn post_call_audit_prompt_context_and_session_summary() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let dir = workspace(
        &mock.base_url(),
        r#"---
apiVersion: keel/v1
kind: Policy
metadata: { name: p }
spec: { rules: [{ tool: deploy, decision: allow }] }
---
apiVersion: keel/v1
kind: Hook
metadata: { name: audit }
spec:
  event: PostToolUse
  handler: { kind: command, command: ["python3", "hooks/audit.py"] }
---
apiVersion: keel/v1
kind: Hook
metadata: { name: context }
spec:
  event: UserPromptSubmit
  handler: { kind: command, command: ["sh", "hooks/context.sh"] }
---
apiVersion: keel/v1
kind: Hook
metadata: { name: summary }
spec:
  event: Stop
  handler: { kind: command, command: ["sh", "hooks/summary.sh"] }
"#,
    );
    script(
        dir.path(),
        "audit.py",
        "import json, sys\nd = json.load(sys.stdin)\nopen('audit.log', 'a').write(json.dumps({'tool': d['tool_name'], 'input': d['tool_input'], 'response': d['tool_response']}) + '\\n')\n",
    );
    script(
        dir.path(),
        "context.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"UserPromptSubmit\", \"additionalContext\": \"The release train leaves at 5pm.\"}}'\n",
    );
    script(
        dir.path(),
        "summary.sh",
        "cat > /dev/null\necho \"session ended\" > summary.txt\n",
    );
    let ws = dir.path().to_str().unwrap();

    let output =
        tokio::task::block_in_place(|| run(&["run", "-w", ws, "--session", "s1", "deploy web"]));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(line["tool"], "deploy");
    assert_eq!(line["input"]["service"], "web");
    assert!(line["response"].to_string().contains("deployed"));
    let stats = stdout(&run(&["tools", "stats", "-w", ws, "--json"]));
    assert!(stats.contains("\"tool\":\"deploy\",\"calls\":1"), "{stats}");

    let first = mock.requests()[0].messages().to_vec();
    assert!(
        first
            .iter()
            .any(|m| m["role"] == "system" && m["content"] == "The release train leaves at 5pm."),
        "{first:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("summary.txt")).unwrap(),
        "session ended\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_rule_denies_and_a_timeout_denies_an_unanswered_ask() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let dir = workspace(
        &mock.base_url(),
        "---\napiVersion: keel/v1\nkind: Policy\nmetadata: { name: p }\nspec:\n  rules:\n    - { tool: deploy, args: { service: \"web*\" }, decision: deny, reason: \"web is frozen\" }\n",
    );
    let ws = dir.path().to_str().unwrap();
    let denied = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("web is frozen")
    );
    assert!(!dir.path().join("deployed.txt").exists());

    // Without a rule, a tool with side effects asks; nobody answers within the timeout.
    std::fs::write(
        dir.path().join("config/limits.yaml"),
        "apiVersion: keel/v1\nkind: Runtime\nmetadata: { name: default }\nspec: { limits: { approvalTimeout: 300ms } }\n",
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("config/all.yaml")).ok();
    let again = workspace(&mock.base_url(), "");
    std::fs::copy(
        again.path().join("config/all.yaml"),
        dir.path().join("config/all.yaml"),
    )
    .unwrap();
    let expired = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(expired.status.code(), Some(0), "{}", stderr(&expired));
    assert!(!dir.path().join("deployed.txt").exists());
    let all = stdout(&run(&[
        "approvals",
        "list",
        "-w",
        ws,
        "--status",
        "expired",
        "--json",
    ]));
    assert_eq!(all.lines().count(), 1, "{all}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_waiting_for_approval_survives_its_process_and_waits_again_when_resumed() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let dir = workspace(&mock.base_url(), "");
    let ws = dir.path().to_str().unwrap().to_owned();
    // `deploy` has side effects and no rule: it asks. Kill the process while it waits.
    let mut first = keel()
        .args(["run", "-w", &ws, "deploy web"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let asked = wait_for_pending(&ws).await;
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &first.id().to_string()])
        .status();
    tokio::task::block_in_place(|| first.wait().unwrap());

    let record: Value = serde_json::from_str(
        stdout(&run(&["runs", "list", "-w", &ws, "--json"]))
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["status"], "interrupted");
    let id = record["requestId"].as_str().unwrap().to_owned();

    let resumed = keel()
        .args(["runs", "resume", "-w", &ws, &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Back to waiting — on the same approval, not a second one.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let runs = stdout(&run(&["runs", "list", "-w", &ws, "--json"]));
        if runs.contains("\"waiting_approval\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the resumed run never waited: {runs}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = pending(&ws);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["approvalId"], asked[0]["approvalId"]);
    let approval_id = again[0]["approvalId"].as_str().unwrap();
    assert_eq!(
        run(&["approvals", "approve", "-w", &ws, approval_id])
            .status
            .code(),
        Some(0)
    );

    let output = tokio::task::block_in_place(|| resumed.wait_with_output().unwrap());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(dir.path().join("deployed.txt").exists());
    let record: Value =
        serde_json::from_str(&stdout(&run(&["runs", "show", "-w", &ws, &id, "--json"]))).unwrap();
    assert_eq!(record["status"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_can_be_answered_on_the_terminal_of_keel_run() {
    use std::io::Write;

    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let dir = workspace(&mock.base_url(), "");
    let ws = dir.path().to_str().unwrap().to_owned();
    let answer = |text: &'static [u8]| {
        let mut child = keel()
            .args(["run", "-w", &ws, "--approve-here", "deploy web"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(text).unwrap();
        child.wait_with_output().unwrap()
    };

    let denied = tokio::task::block_in_place(|| answer(b"n\n"));
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    assert!(
        stderr(&denied).contains("Approve deploy"),
        "{}",
        stderr(&denied)
    );
    assert!(!dir.path().join("deployed.txt").exists());

    let approved = tokio::task::block_in_place(|| answer(b"y\n"));
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert!(dir.path().join("deployed.txt").exists());
    let decided = stdout(&run(&[
        "approvals",
        "list",
        "-w",
        &ws,
        "--status",
        "all",
        "--json",
    ]));
    let statuses: Vec<String> = decided
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["status"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(statuses, vec!["approved", "denied"], "newest first");
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_mode_runs_nothing_with_side_effects_and_a_hook_rewrite_is_rechecked() {
    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    deploy_then_answer(&mock);
    let dir = workspace(
        &mock.base_url(),
        r#"---
apiVersion: keel/v1
kind: Policy
metadata: { name: p }
spec: { rules: [{ tool: deploy, decision: allow }] }
---
apiVersion: keel/v1
kind: Hook
metadata: { name: retarget }
spec:
  event: PreToolUse
  matcher: deploy
  handler: { kind: command, command: ["sh", "hooks/retarget.sh"] }
"#,
    );
    let ws = dir.path().to_str().unwrap();
    script(dir.path(), "retarget.sh", "cat > /dev/null\n");

    let planned =
        tokio::task::block_in_place(|| run(&["run", "-w", ws, "--mode", "plan", "deploy web"]));
    assert_eq!(planned.status.code(), Some(0), "{}", stderr(&planned));
    assert!(
        !dir.path().join("deployed.txt").exists(),
        "plan mode ran a side effect"
    );
    assert!(
        mock.requests()[1]
            .last_content_of("tool")
            .unwrap()
            .contains("permission mode plan")
    );

    // The hook sends the deploy to staging instead: the rewrite passes the gateway again.
    script(
        dir.path(),
        "retarget.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"updatedInput\": {\"service\": \"staging\"}}}'\n",
    );
    let rewritten = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(rewritten.status.code(), Some(0), "{}", stderr(&rewritten));
    let deployed = std::fs::read_to_string(dir.path().join("deployed.txt")).unwrap();
    assert!(
        deployed.contains("staging") && !deployed.contains("web"),
        "{deployed}"
    );

    // A rewrite that breaks the schema is blocked like any invalid call.
    std::fs::remove_file(dir.path().join("deployed.txt")).unwrap();
    script(
        dir.path(),
        "retarget.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"updatedInput\": {\"service\": [1, 2]}}}'\n",
    );
    let broken = tokio::task::block_in_place(|| run(&["run", "-w", ws, "deploy web"]));
    assert_eq!(broken.status.code(), Some(0), "{}", stderr(&broken));
    assert!(!dir.path().join("deployed.txt").exists());
    assert_eq!(
        run(&["run", "-w", ws, "--mode", "sideways", "x"])
            .status
            .code(),
        Some(2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_asks_for_approval_in_the_conversation() {
    use std::io::Write;

    let mock = MockLlm::start().await;
    deploy_then_answer(&mock);
    let dir = workspace(&mock.base_url(), "");
    let ws = dir.path().to_str().unwrap().to_owned();
    let mut child = keel()
        .args(["chat", "-w", &ws, "--session", "ops"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The turn, then the answer to the approval question it raises.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"deploy web\ny\n")
        .unwrap();
    let output = tokio::task::block_in_place(|| child.wait_with_output().unwrap());

    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Approve deploy"),
        "{}",
        stderr(&output)
    );
    assert!(dir.path().join("deployed.txt").exists());
    assert!(stdout(&output).contains("Done."));
}
