//! A direct call's run says honestly how it ended: `completed` only when the tool ran and
//! succeeded; `tool_blocked` when the gateway blocked it, `tool_denied` when policy refused
//! it, `tool_failed` when the tool ran and failed (`docs/events.md`).

use keel::FinishReason;
use keel::{RunStatus, Runtime};

use crate::common;

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_calls_finish_reason_says_how_it_ended() {
    let tool = |command: &str| {
        format!(
            r#"
            description: A command.
            schema: {{ type: object, properties: {{ n: {{ type: integer }} }}, required: [n] }}
            impl: {{ kind: command, command: ["sh", "-c", "{command}"] }}
            "#
        )
    };
    let ws = common::agent_and_model("http://127.0.0.1:9/v1", &["ok", "boom", "forbidden"], "")
        .runtime("{ defaultAgent: assistant }")
        .tool("ok", &tool("echo fine"))
        .tool("boom", &tool("echo broken >&2; exit 3"))
        .tool("forbidden", &tool("echo ran > ran.txt"))
        .policy(
            "p",
            r#"{ rules: [{ tool: forbidden, decision: deny, reason: "not today" }, { tool: "*", decision: allow }] }"#,
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let end = |tool: &'static str, arguments: &'static str| {
        let runtime = runtime.clone();
        async move {
            let handle = runtime.tools().call(None, tool, arguments).await.unwrap();
            handle.wait().await.unwrap()
        }
    };

    let done = end("ok", r#"{"n": 1}"#).await;
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.finish_reason, FinishReason::Completed);

    let blocked = end("no_such_tool", r#"{"n": 1}"#).await;
    assert_eq!(blocked.status, RunStatus::Failed, "{blocked:?}");
    assert_eq!(blocked.finish_reason, FinishReason::ToolBlocked);

    let denied = end("forbidden", r#"{"n": 1}"#).await;
    assert_eq!(denied.status, RunStatus::Failed, "{denied:?}");
    assert_eq!(denied.finish_reason, FinishReason::ToolDenied);
    assert!(denied.error.unwrap().message.contains("not today"));
    assert!(!ws.exists("ran.txt"));

    let failed = end("boom", r#"{"n": 1}"#).await;
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    assert_eq!(failed.finish_reason, FinishReason::ToolFailed);

    // The run's record says the same.
    let record = runtime
        .runs()
        .get(&failed.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.finish_reason, Some(FinishReason::ToolFailed));
}
