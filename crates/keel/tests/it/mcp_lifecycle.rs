//! A server that dies in the middle of a run's call: its crash is in the events of that run
//! (`runtime.mcp.lifecycle` `down`, with the signal), before the failed call's result — not
//! only in the next run that uses the server.

use keel::AdapterEvent;
use keel::{EventPayload, RunStatus, ServerState};
use serde_json::json;

use crate::mcp_faults::{eventually, finish, one_server, pid_in, script, server, sigkill, start};

#[tokio::test]
async fn a_crash_mid_call_is_recorded_in_the_run_it_interrupted() {
    let script = script(&[
        ("slow", &[("mcp__f__slow", json!({ "ms": 600_000 }))]),
        ("echo", &[("mcp__f__echo", json!({ "text": "again" }))]),
    ]);
    let (ws, runtime) = one_server(&["--pid-file", "server.pid"], &script);

    let handle = start(&runtime, "slow").await;
    let pid = pid_in(&ws.join("server.pid")).await;
    sigkill(pid);
    let (response, _) = finish(handle).await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    // The stored log says it, and says it before the call's result.
    let events = runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap();
    let down = events
        .iter()
        .position(|e| {
            matches!(&e.payload, EventPayload::McpLifecycle { server, lifecycle, detail, .. }
                if server == "f" && lifecycle.as_str() == "down"
                    && detail.as_deref().is_some_and(|d| d.contains("signal: 9")))
        })
        .unwrap_or_else(|| panic!("no `down` of `f` in the run it interrupted: {events:#?}"));
    let result = events
        .iter()
        .position(|e| {
            matches!(
                &e.payload,
                EventPayload::Adapter {
                    event: AdapterEvent::ToolResult { ok: false, .. }
                }
            )
        })
        .unwrap();
    assert!(
        down < result,
        "down at {down}, the call's result at {result}"
    );

    // The restart is recorded too: in this run or, when it came after, in the next one.
    eventually("server `f` ready again", || {
        let status = server(&runtime, "f");
        match status.state == ServerState::Ready && status.restarts >= 1 {
            true => Ok(()),
            false => Err(format!("{status:?}")),
        }
    })
    .await;
    let handle = start(&runtime, "echo").await;
    let (next, _) = finish(handle).await;
    let mut all: Vec<String> = Vec::new();
    for id in [&response.request_id, &next.request_id] {
        for event in runtime.runs().events(id, 0).await.unwrap() {
            if let EventPayload::McpLifecycle { lifecycle, .. } = event.payload {
                all.push(lifecycle.as_str().to_owned());
            }
        }
    }
    assert!(all.iter().any(|k| k == "restarting"), "{all:?}");
    runtime.stop_mcp().await;
}
