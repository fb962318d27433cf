//! Command tools run as real processes: JSON in and out, failures, timeouts, cancellation
//! and the environment they see.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use keel_test_support::TempWorkspace;
use keel_test_support::process::{read_pid, wait_gone as gone};
use keel_tools::command::{CommandTool, looks_secret};
use keel_types::{Tool, ToolError};
use keel_workspace::{ToolImpl, ToolSpecDoc};
use serde_json::json;

use crate::{ctx, ctx_with_cap};

fn doc(command: &[&str], timeout: Option<Duration>, env: &[(&str, &str)]) -> ToolSpecDoc {
    ToolSpecDoc {
        sandbox: Default::default(),
        description: "a test tool".to_owned(),
        schema: json!({"type": "object"}),
        implementation: ToolImpl::Command {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            timeout: timeout.map(keel_workspace::Duration),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        },
        policy: None,
        idempotent: false,
        gateway: Default::default(),
        hooks: Default::default(),
        double_check_on_run: false,
    }
}

fn sh(script: &str, root: &Path) -> CommandTool {
    CommandTool::new("t", &doc(&["sh", "-c", script], None, &[]), root)
}

fn sh_with_timeout(script: &str, root: &Path, timeout: Duration) -> CommandTool {
    CommandTool::new("t", &doc(&["sh", "-c", script], Some(timeout), &[]), root)
}

/// A script that forks a long sleeper, records both pids, and waits.
const FORKING: &str = "sleep 30 & echo $! > grandchild.pid; echo $$ > child.pid; wait";

#[test]
fn the_spec_comes_from_the_document() {
    let ws = TempWorkspace::new();
    let tool = sh("true", ws.path());
    assert_eq!(tool.spec().name, "t");
    assert_eq!(tool.spec().description, "a test tool");
    assert_eq!(tool.spec().parameters, json!({"type": "object"}));
    assert!(!tool.read_only());
    assert_eq!(tool.timeout(), Duration::from_secs(30));
}

#[tokio::test]
async fn json_arguments_round_trip_through_stdin_and_stdout() {
    let ws = TempWorkspace::new();
    let tool = sh(
        r#"read -r args; printf '{ "received" : %s, "ok": true }\n' "$args""#,
        ws.path(),
    );
    let args = json!({"city": "Zürich", "days": 3, "tags": ["a", "b"]});
    let out = tool.call(&ctx(ws.path()), args.clone()).await.unwrap();
    // Valid JSON comes back compact.
    assert_eq!(
        out.content,
        json!({"received": args, "ok": true}).to_string()
    );
}

#[tokio::test]
async fn json_round_trip_through_python() {
    let ws = TempWorkspace::new();
    let script =
        "import json, sys; a = json.load(sys.stdin); print(json.dumps({'sum': a['x'] + a['y']}))";
    let tool = CommandTool::new(
        "add",
        &doc(&["python3", "-c", script], None, &[]),
        ws.path(),
    );
    // python3 is a documented requirement of the test suite (.ci/run checks for it).
    let out = tool
        .call(&ctx(ws.path()), json!({"x": 2, "y": 40}))
        .await
        .unwrap();
    assert_eq!(out.content, r#"{"sum":42}"#);
}

#[tokio::test]
async fn text_output_is_returned_as_is() {
    let ws = TempWorkspace::new();
    let tool = sh("printf 'hello\\n  world\\n'", ws.path());
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    assert_eq!(out.content, "hello\n  world\n");
}

#[tokio::test]
async fn a_command_that_ignores_large_input_still_finishes() {
    let ws = TempWorkspace::new();
    let tool = sh("echo done", ws.path());
    let big = "x".repeat(1 << 20);
    let out = tool
        .call(&ctx(ws.path()), json!({"big": big}))
        .await
        .unwrap();
    assert_eq!(out.content, "done\n");
}

#[tokio::test]
async fn non_zero_exit_fails_with_stderr() {
    let ws = TempWorkspace::new();
    let tool = sh(
        "echo partial; echo '  city not found  ' >&2; exit 3",
        ws.path(),
    );
    let err = tool.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed("command exited with status 3: city not found".into())
    );
    let quiet = sh("exit 1", ws.path());
    let err = quiet.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed("command exited with status 1".into())
    );
}

#[tokio::test]
async fn stdout_comes_back_whole_up_to_the_capture_bound_and_stderr_is_bounded() {
    let ws = TempWorkspace::new();
    // Output over the model's limit comes back whole: the runtime stores it as an artifact
    // and shows the model a preview. Only MAX_CAPTURE_BYTES bounds it.
    let tool = sh("head -c 200000 /dev/zero | tr '\\0' a", ws.path());
    let out = tool
        .call(&ctx_with_cap(ws.path(), 1000), json!({}))
        .await
        .unwrap();
    assert_eq!(out.content, "a".repeat(200_000));
    let noisy = sh(
        "head -c 100000 /dev/zero | tr '\\0' e >&2; exit 2",
        ws.path(),
    );
    let ToolError::Failed(message) = noisy.call(&ctx(ws.path()), json!({})).await.unwrap_err()
    else {
        panic!("expected Failed");
    };
    assert!(message.len() < 9 * 1024, "{} bytes", message.len());
    assert!(message.ends_with(" […]"));
}

#[tokio::test]
async fn missing_program_is_named() {
    let ws = TempWorkspace::new();
    let tool = CommandTool::new(
        "t",
        &doc(&["keel-no-such-program-xyz", "--flag"], None, &[]),
        ws.path(),
    );
    let err = tool.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed("cannot run `keel-no-such-program-xyz`: program not found".into())
    );
    let empty = CommandTool::new("t", &doc(&[], None, &[]), ws.path());
    let err = empty.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed("tool `t` has an empty command".into())
    );
}

#[tokio::test]
async fn relative_programs_run_from_the_workspace_in_the_workspace() {
    use std::os::unix::fs::PermissionsExt;
    let ws = TempWorkspace::new();
    let script = ws.path().join("tools/where.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\npwd\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tool = CommandTool::new("where", &doc(&["tools/where.sh"], None, &[]), ws.path());
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    let real = ws.path().canonicalize().unwrap();
    assert_eq!(Path::new(out.content.trim()).canonicalize().unwrap(), real);
}

#[tokio::test]
async fn the_environment_has_keel_variables_and_declared_env_but_no_inherited_secrets() {
    let ws = TempWorkspace::new();
    let tool = CommandTool::new(
        "envtool",
        &doc(
            &["env"],
            None,
            &[("GREETING", "hi"), ("SERVICE_TOKEN", "declared")],
        ),
        ws.path(),
    );
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    let env: BTreeMap<&str, &str> = out
        .content
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    assert_eq!(env["GREETING"], "hi");
    assert_eq!(env["SERVICE_TOKEN"], "declared");
    assert_eq!(env["KEEL_TOOL_NAME"], "envtool");
    assert_eq!(env["KEEL_REQUEST_ID"], "run_test");
    assert_eq!(
        Path::new(env["KEEL_WORKSPACE"]).canonicalize().unwrap(),
        ws.path().canonicalize().unwrap()
    );
    // Harmless variables are inherited...
    if let Ok(path) = std::env::var("PATH") {
        assert_eq!(env["PATH"], path);
    }
    // ...secret-looking ones are not, unless the tool declares them.
    for name in env.keys().filter(|n| looks_secret(n)) {
        assert_eq!(*name, "SERVICE_TOKEN");
    }
}

#[tokio::test]
async fn timeout_kills_the_command() {
    let ws = TempWorkspace::new();
    let tool = sh_with_timeout(
        "echo $$ > child.pid; exec sleep 30",
        ws.path(),
        Duration::from_secs(1),
    );
    let err = tool.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
    let pid = read_pid(&ws.path().join("child.pid")).await;
    assert!(gone(pid).await, "pid {pid} survived the timeout");
}

#[tokio::test]
async fn timeout_kills_forked_grandchildren() {
    let ws = TempWorkspace::new();
    let tool = sh_with_timeout(FORKING, ws.path(), Duration::from_secs(1));
    let err = tool.call(&ctx(ws.path()), json!({})).await.unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
    let child = read_pid(&ws.path().join("child.pid")).await;
    let grandchild = read_pid(&ws.path().join("grandchild.pid")).await;
    assert!(gone(child).await, "child {child} survived the timeout");
    assert!(
        gone(grandchild).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_whole_process_group() {
    let ws = TempWorkspace::new();
    let tool = sh(FORKING, ws.path());
    let context = ctx(ws.path());
    let call = tool.call(&context, json!({}));
    let started = async {
        let child = read_pid(&ws.path().join("child.pid")).await;
        let grandchild = read_pid(&ws.path().join("grandchild.pid")).await;
        (child, grandchild)
    };
    // The call future is dropped when the pids are known, as the runtime does on cancel.
    let (child, grandchild) = tokio::select! {
        result = call => panic!("the call finished: {result:?}"),
        pids = started => pids,
    };
    assert!(gone(child).await, "child {child} survived cancellation");
    assert!(
        gone(grandchild).await,
        "grandchild {grandchild} survived cancellation"
    );
}

#[tokio::test]
async fn a_background_process_holding_stdout_does_not_hold_the_call() {
    let ws = TempWorkspace::new();
    // The sleeper inherits stdout; the call still ends when `sh` does, well before the timeout.
    let tool = sh_with_timeout(
        "sleep 30 & echo $! > grandchild.pid; echo finished",
        ws.path(),
        Duration::from_secs(20),
    );
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    assert_eq!(out.content, "finished\n");
    let grandchild = read_pid(&ws.path().join("grandchild.pid")).await;
    assert!(
        gone(grandchild).await,
        "grandchild {grandchild} outlived the call"
    );
}

#[tokio::test]
async fn background_processes_do_not_outlive_a_finished_call() {
    let ws = TempWorkspace::new();
    let tool = sh(
        "sleep 30 >/dev/null 2>&1 & echo $! > grandchild.pid; echo finished",
        ws.path(),
    );
    let out = tool.call(&ctx(ws.path()), json!({})).await.unwrap();
    assert_eq!(out.content, "finished\n");
    let grandchild = read_pid(&ws.path().join("grandchild.pid")).await;
    assert!(
        gone(grandchild).await,
        "grandchild {grandchild} outlived the call"
    );
}
