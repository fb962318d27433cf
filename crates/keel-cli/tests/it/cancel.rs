//! SIGINT to `keel run` cancels the run: exit 130, `runtime.request.cancelled` recorded, and no
//! child process left running.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::Value;

use crate::common::{keel, run, stdout};

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()
        .filter(|t| t.ends_with('\n'))?
        .trim()
        .parse()
        .ok()
}

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
    let mut pids = (0, 0);
    tokio::task::block_in_place(|| {
        wait_until("the tool to start", || {
            match (
                read_pid(&ws.join("child.pid")),
                read_pid(&ws.join("grandchild.pid")),
            ) {
                (Some(c), Some(g)) => {
                    pids = (c, g);
                    true
                }
                _ => false,
            }
        });
    });
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::block_in_place(|| child.wait().unwrap());

    assert_eq!(exit.code(), Some(130));
    tokio::task::block_in_place(|| {
        wait_until("the tool process to die", || process_gone(pids.0));
        wait_until("the forked grandchild to die", || process_gone(pids.1));
    });
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
