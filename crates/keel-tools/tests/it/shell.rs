//! `shell` runs real processes: string and argv commands, exit codes as results, `cwd`,
//! environment, bounded output, and timeouts and cancellation that kill the whole process
//! group.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use keel_test_support::TempWorkspace;
use keel_test_support::process::{alive, read_pid, wait_gone};
use keel_tools::builtin::Shell;
use keel_tools::command::looks_secret;
use keel_types::{Tool, ToolError};
use keel_workspace::ShellSettings;
use serde_json::{Value, json};

use crate::{ctx, ctx_with_cap, write};

/// A command that forks a long sleeper, records both pids, and waits.
const FORKING: &str = "sleep 60 & echo $! > gc.pid; echo $$ > c.pid; wait";

fn shell() -> Shell {
    Shell::new(&ShellSettings::default())
}

fn shell_with(timeout: u64, max_timeout: u64) -> Shell {
    Shell::new(&ShellSettings {
        timeout: keel_workspace::Duration::from_secs(timeout),
        max_timeout: keel_workspace::Duration::from_secs(max_timeout),
    })
}

async fn run(root: &Path, args: Value) -> Value {
    let out = shell().call(&ctx(root), args.clone()).await;
    let out = out.unwrap_or_else(|e| panic!("shell {args} failed: {e:?}"));
    serde_json::from_str(&out.content).unwrap()
}

#[tokio::test]
async fn a_string_runs_in_sh_and_a_non_zero_exit_is_a_result() {
    let ws = TempWorkspace::new();
    let out = run(
        ws.path(),
        json!({"command": "echo hi | tr a-z A-Z; echo oops >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        out,
        json!({"exit_code": 3, "stdout": "HI\n", "stderr": "oops\n", "truncated": false})
    );
}

#[tokio::test]
async fn an_array_runs_the_program_directly_without_a_shell() {
    let ws = TempWorkspace::new();
    let out = run(
        ws.path(),
        json!({"command": ["printf", "%s|", "a b", "$HOME", "*"]}),
    )
    .await;
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["stdout"], "a b|$HOME|*|");
}

#[tokio::test]
async fn a_missing_program_is_named() {
    let ws = TempWorkspace::new();
    let err = shell()
        .call(&ctx(ws.path()), json!({"command": ["no-such-program-xyz"]}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed("cannot run `no-such-program-xyz`: program not found".to_owned())
    );
}

#[tokio::test]
async fn cwd_is_a_directory_inside_the_workspace() {
    let ws = TempWorkspace::new();
    write(ws.path(), "src/nested/f.txt", "x");
    let out = run(ws.path(), json!({"command": "pwd", "cwd": "src/nested"})).await;
    let real = ws.path().join("src/nested").canonicalize().unwrap();
    assert_eq!(
        Path::new(out["stdout"].as_str().unwrap().trim())
            .canonicalize()
            .unwrap(),
        real
    );
    let out = run(ws.path(), json!({"command": "ls"})).await;
    assert_eq!(out["stdout"], "src\n");
    let err = shell()
        .call(
            &ctx(ws.path()),
            json!({"command": "pwd", "cwd": "src/nested/f.txt"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::Io("`cwd` `src/nested/f.txt` is not a directory".to_owned())
    );
}

#[tokio::test]
async fn the_environment_is_cleaned_and_extended() {
    let ws = TempWorkspace::new();
    let out = run(
        ws.path(),
        json!({"command": ["env"], "env": {"GREETING": "hi", "MY_TOKEN": "mine"}}),
    )
    .await;
    let stdout = out["stdout"].as_str().unwrap();
    let env: BTreeMap<&str, &str> = stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    assert_eq!(env["GREETING"], "hi");
    assert_eq!(env["KEEL_TOOL_NAME"], "shell");
    assert_eq!(env["KEEL_REQUEST_ID"], "run_test");
    assert_eq!(
        Path::new(env["KEEL_WORKSPACE"]).canonicalize().unwrap(),
        ws.path().canonicalize().unwrap()
    );
    if let Ok(path) = std::env::var("PATH") {
        assert_eq!(env["PATH"], path);
    }
    // Secret-looking variables come only from the call itself.
    for name in env.keys().filter(|n| looks_secret(n)) {
        assert_eq!(*name, "MY_TOKEN");
    }
}

#[tokio::test]
async fn stdin_is_empty_so_readers_do_not_hang() {
    let ws = TempWorkspace::new();
    let out = run(ws.path(), json!({"command": "cat; echo done"})).await;
    assert_eq!(out["stdout"], "done\n");
}

#[tokio::test]
async fn output_is_bounded_with_a_note() {
    let ws = TempWorkspace::new();
    let out = shell()
        .call(
            &ctx_with_cap(ws.path(), 4096),
            json!({"command": "head -c 200000 /dev/zero | tr '\\0' x; head -c 50000 /dev/zero | tr '\\0' e >&2"}),
        )
        .await
        .unwrap();
    assert!(out.content.len() <= 4096 + 512, "{}", out.content.len());
    let out: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(out["truncated"], true);
    assert_eq!(out["exit_code"], 0);
    let stdout = out["stdout"].as_str().unwrap();
    let stderr = out["stderr"].as_str().unwrap();
    assert!(stdout.starts_with("xxxx"), "{stdout}");
    assert!(
        stdout.contains("[stdout truncated: first ") && stdout.contains(" of 200000 bytes shown"),
        "{stdout}"
    );
    assert!(stderr.starts_with("eeee"), "{stderr}");
    assert!(stderr.contains(" of 50000 bytes shown"), "{stderr}");
}

#[tokio::test]
async fn a_signal_is_reported_as_a_result() {
    let ws = TempWorkspace::new();
    let out = run(ws.path(), json!({"command": "kill -9 $$"})).await;
    assert_eq!(out["exit_code"], Value::Null);
    assert_eq!(out["error"], "the command was killed by signal 9");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let ws = TempWorkspace::new();
    let err = shell()
        .call(&ctx(ws.path()), json!({"command": FORKING, "timeout": 1}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
    let child = read_pid(&ws.path().join("c.pid")).await;
    let grandchild = read_pid(&ws.path().join("gc.pid")).await;
    assert!(wait_gone(child).await, "child {child} survived the timeout");
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived the timeout"
    );
}

#[tokio::test]
async fn the_requested_timeout_is_capped_by_max_timeout() {
    let ws = TempWorkspace::new();
    let err = shell_with(60, 1)
        .call(
            &ctx(ws.path()),
            json!({"command": FORKING, "timeout": "1h"}),
        )
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
    let grandchild = read_pid(&ws.path().join("gc.pid")).await;
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn the_default_timeout_comes_from_the_settings() {
    let ws = TempWorkspace::new();
    let err = shell_with(1, 600)
        .call(&ctx(ws.path()), json!({"command": "exec sleep 60"}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout(Duration::from_secs(1)));
}

#[tokio::test]
async fn dropping_the_call_kills_the_whole_process_group() {
    let ws = TempWorkspace::new();
    let tool = shell();
    let context = ctx(ws.path());
    let call = tool.call(&context, json!({"command": FORKING}));
    let started = async {
        let child = read_pid(&ws.path().join("c.pid")).await;
        let grandchild = read_pid(&ws.path().join("gc.pid")).await;
        (child, grandchild)
    };
    // The call future is dropped once the pids are known, as the runtime does on cancel.
    let (child, grandchild) = tokio::select! {
        result = call => panic!("the call finished: {result:?}"),
        pids = started => pids,
    };
    assert!(
        wait_gone(child).await,
        "child {child} survived cancellation"
    );
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} survived cancellation"
    );
    assert!(!alive(grandchild));
}

#[tokio::test]
async fn background_processes_do_not_outlive_the_call() {
    let ws = TempWorkspace::new();
    let out = run(
        ws.path(),
        json!({"command": "sleep 60 & echo $! > gc.pid; echo started"}),
    )
    .await;
    assert_eq!(out["stdout"], "started\n");
    let grandchild = read_pid(&ws.path().join("gc.pid")).await;
    assert!(
        wait_gone(grandchild).await,
        "grandchild {grandchild} outlived the call"
    );
}

#[test]
fn check_reports_bad_timeouts_and_env_names() {
    let ws = TempWorkspace::new();
    let tool = shell();
    let issues = tool.check(
        &ctx(ws.path()),
        &json!({"command": "true", "timeout": "soon", "env": {"A=B": "x"}}),
    );
    let paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["/timeout", "/env/A=B"], "{issues:?}");
    assert!(
        tool.check(
            &ctx(ws.path()),
            &json!({"command": "true", "timeout": "90s"})
        )
        .is_empty()
    );
    assert!(!tool.read_only());
}
