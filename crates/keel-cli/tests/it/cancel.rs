//! SIGINT to `keel run` cancels the run: exit 130, `runtime.request.cancelled` recorded, and no
//! child process left running.

use std::process::{Command, Stdio};

use keel_test_support::process::{read_pid, wait_gone};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::Value;

use crate::common::{keel, run, stdout};

#[tokio::test(flavor = "multi_thread")]
async fn sigint_cancels_the_run_and_kills_tool_processes() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "slow",
        ["{}"],
    )]));
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::write(
        ws.join("config/all.yaml"),
        format!(
            r#"apiVersion: keel/v1
kind: Model
metadata: {{ name: mock }}
spec: {{ provider: openai, baseUrl: "{}", model: mock-model }}
---
apiVersion: keel/v1
kind: Tool
metadata: {{ name: slow }}
spec:
  description: Forks a grandchild and waits.
  impl:
    kind: command
    command: ["sh", "-c", "sleep 60 & echo $! > grandchild.pid; echo $$$$ > child.pid; wait"]
  policy: allow
---
apiVersion: keel/v1
kind: Agent
metadata: {{ name: a }}
spec: {{ model: mock, tools: [slow] }}
"#,
            mock.base_url()
        ),
    )
    .unwrap();

    let mut child = keel()
        .args(["run", "-w", ws.to_str().unwrap(), "be slow"])
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
    let listed = run(&["runs", "list", "-w", ws.to_str().unwrap(), "--json"]);
    let record: Value = serde_json::from_str(stdout(&listed).lines().next().unwrap()).unwrap();
    assert_eq!(record["status"], "cancelled");
    let events = run(&[
        "runs",
        "events",
        "-w",
        ws.to_str().unwrap(),
        record["requestId"].as_str().unwrap(),
        "--json",
    ]);
    let last: Value = serde_json::from_str(stdout(&events).lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "runtime.request.cancelled");
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
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::write(
        ws.join("config/all.yaml"),
        format!(
            r#"apiVersion: keel/v1
kind: Model
metadata: {{ name: mock }}
spec: {{ provider: openai, baseUrl: "{}", model: mock-model }}
---
apiVersion: keel/v1
kind: Tool
metadata: {{ name: slow }}
spec:
  description: Waits.
  impl: {{ kind: command, command: ["sh", "-c", "echo $$$$ > child.pid; sleep 60"] }}
  policy: allow
---
apiVersion: keel/v1
kind: Agent
metadata: {{ name: a }}
spec: {{ model: mock, tools: [slow] }}
"#,
            mock.base_url()
        ),
    )
    .unwrap();

    let mut child = keel()
        .args(["chat", "-w", ws.to_str().unwrap(), "--session", "s1"])
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

    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains("Still here."),
        "{}",
        stdout(&output)
    );
    let runs = run(&[
        "runs",
        "list",
        "-w",
        ws.to_str().unwrap(),
        "--session",
        "s1",
        "--json",
    ]);
    let statuses: Vec<String> = stdout(&runs)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["status"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(statuses, vec!["completed", "cancelled"], "newest first");
}
