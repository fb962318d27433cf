//! SIGINT to `keel run` cancels the run: exit 130, `runtime.request.cancelled` recorded, and no
//! child process left running. SIGTERM (from `timeout`, systemd, a container stop) to `keel run`
//! or `keel tools call` does the same with exit 143, also while the run waits for approval.

use std::process::{Command, Stdio};

use keel_test_support::process::{read_pid, wait_gone};
use keel_test_support::{
    CliOutput, MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder,
};

use crate::common::keel_in;
use crate::governance::{signal, wait_for_pending, workspace};

/// Agent `a` on the mock with one tool, `slow`, whose spec is `slow_spec` (`$$$$` is the
/// shell's `$$` after interpolation).
fn slow_workspace(mock: &MockLlm, slow_spec: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .tool("slow", slow_spec)
        .agent("a", "{ model: mock, tools: [slow] }")
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_cancels_the_run_and_kills_tool_processes() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "slow",
        ["{}"],
    )]));
    let ws = slow_workspace(
        &mock,
        r#"
        description: Forks a grandchild and waits.
        impl:
          kind: command
          command: ["sh", "-c", "sleep 60 & echo $! > grandchild.pid; echo $$$$ > child.pid; wait"]
        policy: allow
        "#,
    );
    let keel = keel_in(&ws);

    let mut child = keel
        .command(["run", "be slow"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child_pid = read_pid(&ws.join("child.pid")).await;
    let grandchild_pid = read_pid(&ws.join("grandchild.pid")).await;
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::block_in_place(|| child.wait().unwrap());

    assert_eq!(exit.code(), Some(130));
    assert!(
        wait_gone(child_pid).await,
        "the tool process is still running"
    );
    assert!(
        wait_gone(grandchild_pid).await,
        "the forked grandchild is still running"
    );
    assert_eq!(keel.newest_run()["status"], "cancelled");
    let events = keel.newest_run_events();
    assert_eq!(events.last().unwrap()["type"], "runtime.request.cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_in_chat_cancels_the_turn_not_the_session() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| match request.last_role() {
        Some("user") if request.last_content_of("user") == Some("be slow") => {
            MockResponse::tool_calls([MockToolCall::new("c1", "slow", ["{}"])])
        }
        _ => MockResponse::text(["Still here."]),
    });
    let ws = slow_workspace(
        &mock,
        r#"
        description: Waits.
        impl: { kind: command, command: ["sh", "-c", "echo $$$$ > child.pid; sleep 60"] }
        policy: allow
        "#,
    );
    let keel = keel_in(&ws);

    let mut child = keel
        .command(["chat", "--session", "s1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"be slow\n").unwrap();
    let tool_pid = read_pid(&ws.join("child.pid")).await;
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        wait_gone(tool_pid).await,
        "the turn's tool process was killed"
    );
    // The session goes on: the next turn is answered.
    std::io::Write::write_all(&mut stdin, b"are you there?\n").unwrap();
    drop(stdin);
    let output = tokio::task::block_in_place(|| child.wait_with_output().unwrap());
    let output = CliOutput::from_output(&output);

    assert_eq!(output.code, Some(0));
    assert!(output.stdout.contains("Still here."), "{}", output.stdout);
    let statuses: Vec<String> = keel
        .json_lines(["runs", "list", "--session", "s1", "--json"])
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, vec!["completed", "cancelled"], "newest first");
}

/// Starts `keel ARGS`, waits until its run waits for approval, sends it SIGTERM and checks it
/// exits 143 with the run `cancelled` (its last event `runtime.request.cancelled`) and the
/// approval closed: it can no longer be approved, and the tool never ran.
async fn sigterm_while_waiting_for_approval(ws: &TempWorkspace, args: &[&str]) {
    let keel = keel_in(ws);
    let child = keel
        .command(args.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let approval = wait_for_pending(&keel).await.remove(0);
    assert_eq!(approval["tool"], "deploy");
    let waiting = keel.newest_run();
    assert_eq!(waiting["status"], "waiting_approval", "{waiting}");
    signal(&child, "-TERM");
    let output = tokio::task::block_in_place(|| child.wait_with_output().unwrap());
    let output = CliOutput::from_output(&output);

    assert_eq!(output.code, Some(143), "{}", output.stderr);
    let record = keel.newest_run();
    assert_eq!(record["status"], "cancelled", "{record}");
    let events = keel.newest_run_events();
    assert_eq!(events.last().unwrap()["type"], "runtime.request.cancelled");
    let id = approval["approvalId"].as_str().unwrap();
    let closed = keel.run(["approvals", "show", id]).json();
    assert_ne!(closed["status"], "pending", "{closed}");
    assert_ne!(keel.run(["approvals", "approve", id]).code, Some(0));
    assert!(!ws.exists("deployed.txt"), "the cancelled call never ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_cancels_a_run_waiting_for_approval_and_exits_143() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "deploy",
        [r#"{"service":"web"}"#],
    )]));
    let ws = workspace(&mock.base_url()).build();
    sigterm_while_waiting_for_approval(&ws, &["run", "--no-approve-here", "deploy web"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_cancels_a_direct_tool_call_waiting_for_approval_and_exits_143() {
    let mock = MockLlm::start().await;
    let ws = workspace(&mock.base_url()).build();
    sigterm_while_waiting_for_approval(
        &ws,
        &["tools", "call", "deploy", "--args", r#"{"service":"web"}"#],
    )
    .await;
}
