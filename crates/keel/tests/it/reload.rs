//! `Runtime::reload` keeps the MCP servers whose documents did not change — the same process,
//! its tools in the new gateway at once — and starts the changed ones afresh, stopping their
//! old process (no run uses it any more). Real processes: the fault server of
//! keel-test-support with a child in its process group.

use std::time::{Duration, Instant};

use keel::Runtime;
use keel_test_support::WorkspaceBuilder;
use keel_test_support::process::alive;
use keel_test_support::test_clients::mcp_fault_server;

/// How long a condition may take to come true on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn server(pid_file: &str, extra: &str) -> String {
    let command = serde_json::json!([
        "python3",
        mcp_fault_server().display().to_string(),
        "--fork-child",
        pid_file
    ]);
    format!("transport: stdio\ncommand: {command}\n{extra}")
}

/// The pid of the process that wrote `file`'s child pid (the server), once it is there and
/// differs from `not`.
async fn server_pid(ws: &std::path::Path, file: &str, not: Option<u32>) -> u32 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let child: Option<u32> = std::fs::read_to_string(ws.join(file))
            .ok()
            .and_then(|text| text.trim().parse().ok());
        let parent = child.and_then(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(") ")?;
            rest.split_whitespace().nth(1)?.parse::<u32>().ok()
        });
        if let Some(pid) = parent.filter(|pid| Some(*pid) != not) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no new server pid in {file}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_reload_keeps_unchanged_mcp_servers_and_restarts_changed_ones() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model("m", &serde_json::json!({"conversations": []}))
        .agent(
            "assistant",
            "{ model: m, tools: [\"mcp__kept__*\", \"mcp__changed__*\"] }",
        )
        .document("McpServer", "kept", &server("kept.pid", ""))
        .document("McpServer", "changed", &server("changed.pid", ""))
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    runtime.settle_mcp().await;
    let kept = server_pid(ws.path(), "kept.pid", None).await;
    let changed = server_pid(ws.path(), "changed.pid", None).await;

    // Only `changed`'s document changes.
    let path = ws.path().join("config/keel.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let old = "\"changed.pid\"]\n";
    assert!(text.contains(old), "{text}");
    std::fs::write(
        &path,
        text.replace(old, "\"changed.pid\"]\n  callTimeout: 200s\n"),
    )
    .unwrap();
    std::fs::remove_file(ws.path().join("changed.pid")).unwrap();
    let report = runtime.reload(None).await.unwrap();
    assert_eq!(
        report.changes,
        ["McpServer/changed (changed)"],
        "{report:?}"
    );
    assert_eq!(report.mcp_kept, ["kept"], "{report:?}");
    assert_eq!(report.mcp_restarted, ["changed"], "{report:?}");

    // The kept server's tools are in the new gateway at once, from the same process.
    let tools = runtime.tools().specs(None).unwrap();
    assert!(
        tools.iter().any(|t| t.name.starts_with("mcp__kept__")),
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    runtime.settle_mcp().await;
    let restarted = server_pid(ws.path(), "changed.pid", Some(changed)).await;
    assert_ne!(restarted, changed);
    assert!(alive(kept), "the unchanged server kept running");
    let deadline = Instant::now() + PATIENCE;
    while alive(changed) {
        assert!(
            Instant::now() < deadline,
            "the changed server's old process still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    runtime.stop_mcp().await;
}
