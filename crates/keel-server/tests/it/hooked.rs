//! The routes that run hooks: `POST /api/tasks` answers the whole guard's decision — with the
//! reason and each `PreToolUse` hook's answer — and `DELETE /api/sessions/{id}` runs the
//! session's `SessionEnd` hooks. The hook is a real shell script branching on
//! `hook_event_name`, as Claude Code's documentation writes them.

use super::*;

/// Asks about every `deploy`; logs the end of a session.
const HOOK: &str = r#"input=$(cat)
case "$input" in
  *'"hook_event_name":"PreToolUse"'*)
    echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"deploys need a human"}}' ;;
  *'"hook_event_name":"SessionEnd"'*)
    echo "$input" >> ended.log ;;
esac
exit 0
"#;

fn hooked_app() -> (TempWorkspace, Router) {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hi"}]}]}),
        )
        .agent("assistant", "{ model: m, tools: [deploy] }")
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } } }
            policy: allow
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt"] }
            "#,
        )
        .hook(
            "guard",
            "event: PreToolUse\nhandler: { kind: command, command: [sh, hooks/guard.sh] }\n",
        )
        .hook(
            "end",
            "event: SessionEnd\nhandler: { kind: command, command: [sh, hooks/guard.sh] }\n",
        )
        .build();
    ws.write_executable("hooks/guard.sh", HOOK);
    let app = app(&ws);
    (ws, app)
}

#[tokio::test(flavor = "multi_thread")]
async fn task_create_answers_the_hooks_decision_with_its_reason() {
    let (_ws, app) = hooked_app();
    let body = json!({"tool": "deploy", "arguments": {"service": "web"}, "doubleCheckOnRun": true});
    let (status, _, bytes) = send(app, request_with("POST", "/api/tasks", None, Some(&body))).await;
    let task: Value = serde_json::from_slice(&bytes).unwrap();

    assert_eq!(status, StatusCode::CREATED, "{task}");
    assert_eq!(task["decision"], "needs_approval");
    assert_eq!(task["reason"], "deploys need a human");
    assert_eq!(task["hookDecision"], "ask");
    assert_eq!(task["doubleCheckOnRun"], true);
    assert_eq!(
        task["hooks"],
        json!([{"hook": "guard", "outcome": "ask", "reason": "deploys need a human"}])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_session_runs_its_session_end_hooks() {
    let (ws, app) = hooked_app();
    let request = Request::post("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .header("X-Keel-Session", "s-1")
        .body(Body::from(
            json!({"model": "assistant", "messages": [{"role": "user", "content": "hi"}]})
                .to_string(),
        ))
        .unwrap();
    let (status, _, _) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!ws.exists("ended.log"), "the session has not ended yet");

    let (status, _, _) = send(app, request_with("DELETE", "/api/sessions/s-1", None, None)).await;

    assert_eq!(status, StatusCode::OK);
    let ended: Value = serde_json::from_str(ws.read("ended.log").trim()).unwrap();
    assert_eq!(ended["session_id"], "s-1");
    assert_eq!(ended["reason"], "deleted");
    assert_eq!(ended["agent"], "assistant");
}
