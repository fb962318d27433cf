//! `SessionStop` hooks (Claude Code's `Stop`) run after every turn that ended, a cancelled one
//! too; the hook is a real shell script that records its input.

use std::time::{Duration, Instant};

use keel::{ApprovalStatus, RunStatus, Runtime};
use serde_json::Value;

use crate::common;

#[tokio::test(flavor = "multi_thread")]
async fn stop_hooks_run_after_a_cancelled_turn() {
    // `deploy` has side effects and no policy: a call waits for a human, where it is cancelled.
    let ws = common::agent_and_model("http://127.0.0.1:9/v1", &["deploy"], "")
        .runtime("{ defaultAgent: assistant }")
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } } }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt"] }
            "#,
        )
        .hook(
            "summary",
            "event: Stop\nhandler: { kind: command, command: [sh, -c, \"cat > stop.json\"] }\n",
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = runtime
        .tools()
        .call(None, "deploy", r#"{"service":"web"}"#)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while runtime
        .approvals()
        .list(Some(ApprovalStatus::Pending))
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "no approval was requested");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    handle.cancel();
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Cancelled);
    assert!(!ws.exists("deployed.txt"));
    let input: Value = serde_json::from_str(&ws.read("stop.json")).unwrap();
    assert_eq!(input["hook_event_name"], "Stop");
    assert_eq!(input["stop_hook_active"], false);
    assert_eq!(input["session_id"], response.request_id.as_str());
}
