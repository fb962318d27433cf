//! Hook scripts written in the style of Claude Code's hook documentation work unchanged: one
//! Python script serves every event, branching on `hook_event_name` (Claude Code's names:
//! `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`, `SessionEnd`), and reads the
//! common fields (`session_id`, `cwd`, `permission_mode`). It denies, blocks with exit 2,
//! asks, rewrites, adds context and writes a stop summary; each decision is in the run's log
//! with its reason.

use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

/// One script for every event, as the Claude Code documentation writes hooks.
const HOOK: &str = r#"import json, sys
data = json.load(sys.stdin)
with open("inputs.log", "a") as log:
    log.write(json.dumps(data) + "\n")
event = data["hook_event_name"]
if event == "UserPromptSubmit":
    if "forbidden" in data["prompt"]:
        print("prompts about forbidden things are refused", file=sys.stderr)
        sys.exit(2)
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
        "additionalContext": "The release train leaves at 5pm."}}))
elif event == "PreToolUse":
    service = data["tool_input"].get("service")
    if service == "prod":
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "prod deploys need a change ticket"}}))
    elif service == "db":
        print("database deploys are frozen", file=sys.stderr)
        sys.exit(2)
    elif service == "old":
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "allow", "updatedInput": {"service": "staging"}}}))
    elif service == "web":
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "ask", "permissionDecisionReason": "web deploys need a human"}}))
elif event == "PostToolUse":
    with open("audit.log", "a") as audit:
        audit.write(data["tool_name"] + " " + json.dumps(data["tool_input"]) + "\n")
elif event == "Stop":
    with open("summary.txt", "a") as summary:
        summary.write("turn ended (stop_hook_active=%s)\n" % data["stop_hook_active"])
elif event == "SessionEnd":
    with open("ended.log", "a") as ended:
        ended.write(data["session_id"] + " " + data["reason"] + "\n")
sys.exit(0)
"#;

/// Agent `a` with the `deploy` tool (allowed by policy), and the script above declared for
/// every event — by Keel's names and by Claude Code's, which the `event:` field accepts alike.
fn workspace(base_url: &str) -> TempWorkspace {
    let mut builder = WorkspaceBuilder::new()
        .openai_model_at("mock", base_url)
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }
            "#,
        )
        .agent("a", "{ model: mock, tools: [deploy] }")
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        // A file per run, which hooks get as `transcript_path`.
        .runtime("{ store: { mirror: perRun } }");
    for (name, event) in [
        ("prompt", "UserPromptSubmit"),
        ("pre", "PreToolUse"),
        ("post", "PostToolUse"),
        ("stop", "SessionStop"),
        ("end", "SessionEnd"),
    ] {
        builder = builder.hook(
            name,
            &format!(
                "event: {event}\nhandler: {{ kind: command, command: [\"python3\", \"hooks/cc.py\"] }}\n"
            ),
        );
    }
    let ws = builder.build();
    ws.write_executable("hooks/cc.py", HOOK);
    ws
}

/// The inputs the script was given, in order.
fn inputs(ws: &TempWorkspace) -> Vec<Value> {
    ws.read("inputs.log")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_hook_scripts_deny_block_rewrite_add_context_and_summarise() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "deploy", [r#"{"service":"prod"}"#]),
        MockToolCall::new("c2", "deploy", [r#"{"service":"db"}"#]),
        MockToolCall::new("c3", "deploy", [r#"{"service":"old"}"#]),
    ]));
    mock.push(MockResponse::text(["Done."]));
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);

    let output = tokio::task::block_in_place(|| keel.run(["run", "deploy everything"]));
    assert_eq!(output.code, Some(0), "{}", output.stderr);

    // Deny and exit 2 refused their calls; the rewrite sent the third to staging.
    assert_eq!(ws.read("deployed.txt").trim(), r#"{"service":"staging"}"#);
    let second = &mock.requests()[1];
    let told: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        told[0].contains("prod deploys need a change ticket"),
        "{told:?}"
    );
    assert!(told[1].contains("database deploys are frozen"), "{told:?}");
    // The context reached the model; the post-call hook audited the call as it ran.
    let first = mock.requests()[0].messages().to_vec();
    assert!(
        first
            .iter()
            .any(|m| m["role"] == "system" && m["content"] == "The release train leaves at 5pm."),
        "{first:?}"
    );
    assert_eq!(ws.read("audit.log"), "deploy {\"service\": \"staging\"}\n");
    assert_eq!(
        ws.read("summary.txt"),
        "turn ended (stop_hook_active=False)\n"
    );

    // Every input names its event as Claude Code does and carries the common fields; without
    // a session, `session_id` is the run's id.
    let run_id = keel.newest_run_id();
    let seen = inputs(&ws);
    let names: Vec<&str> = seen
        .iter()
        .map(|i| i["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "UserPromptSubmit",
            "PreToolUse",
            "PreToolUse",
            "PreToolUse",
            "PostToolUse",
            "Stop"
        ]
    );
    for input in &seen {
        assert_eq!(input["session_id"], run_id.as_str(), "{input}");
        assert_eq!(input["cwd"], ws.path_str(), "{input}");
        assert_eq!(input["permission_mode"], "default", "{input}");
        let transcript = input["transcript_path"].as_str().unwrap();
        assert!(
            transcript.ends_with(&format!("{run_id}/events.jsonl")),
            "{input}"
        );
    }
    assert_eq!(seen[1]["tool_use_id"], "c1");

    // Each decision is in the log with the call it was about and the hook's reason.
    let decisions: Vec<(Value, Value, Value)> = keel
        .newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == "runtime.hook.completed" && e["hook"] == "pre")
        .map(|e| {
            (
                e["callId"].clone(),
                e["outcome"].clone(),
                e["reason"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (
                "c1".into(),
                "deny".into(),
                "prod deploys need a change ticket".into()
            ),
            (
                "c2".into(),
                "block: database deploys are frozen".into(),
                "database deploys are frozen".into()
            ),
            ("c3".into(), "allow, input rewritten".into(), Value::Null),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_hooks_run_after_a_failed_turn() {
    let mock = MockLlm::start().await;
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);

    let output = tokio::task::block_in_place(|| keel.run(["run", "something forbidden"]));

    assert_ne!(output.code, Some(0));
    assert!(
        output
            .stderr
            .contains("prompts about forbidden things are refused"),
        "{}",
        output.stderr
    );
    assert_eq!(keel.newest_run()["status"], "failed");
    assert!(mock.requests().is_empty(), "the model was never asked");
    assert_eq!(
        ws.read("summary.txt"),
        "turn ended (stop_hook_active=False)\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_asks_in_chat_and_session_end_runs_when_chat_exits_and_when_deleted() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "deploy",
        [r#"{"service":"web"}"#],
    )]));
    mock.push(MockResponse::text(["Done."]));
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);

    // The turn, then the answer to the approval question the hook's ask raises.
    let output = tokio::task::block_in_place(|| {
        keel.run_with_stdin(["chat", "--session", "ops"], b"deploy web\ny\n")
    });
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    assert!(
        output.stderr.contains("web deploys need a human"),
        "{}",
        output.stderr
    );
    assert!(ws.read("deployed.txt").contains("web"));
    assert_eq!(ws.read("ended.log"), "ops prompt_input_exit\n");
    let pre = inputs(&ws)
        .into_iter()
        .find(|i| i["hook_event_name"] == "PreToolUse")
        .unwrap();
    assert_eq!(pre["session_id"], "ops");

    let deleted = keel.run(["sessions", "delete", "ops"]);
    assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);
    assert_eq!(ws.read("ended.log"), "ops prompt_input_exit\nops deleted\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn task_create_on_the_command_line_answers_the_hooks_decision() {
    let mock = MockLlm::start().await;
    let ws = workspace(&mock.base_url());
    let keel = keel_in(&ws);

    let denied = keel.run([
        "tasks",
        "create",
        "deploy",
        "--args",
        r#"{"service":"prod"}"#,
    ]);
    assert_eq!(denied.code, Some(1));
    assert!(
        denied
            .stderr
            .contains("is denied: prod deploys need a change ticket"),
        "{}",
        denied.stderr
    );
    let task: Value = serde_json::from_str(&denied.stdout).unwrap();
    assert_eq!(task["decision"], "deny");
    assert_eq!(task["hooks"][0]["hook"], "pre");

    let asks = keel.run([
        "tasks",
        "create",
        "deploy",
        "--args",
        r#"{"service":"web"}"#,
        "--double-check-on-run",
    ]);
    assert_eq!(asks.code, Some(1));
    assert!(
        asks.stderr
            .contains("needs a human's approval when it runs: web deploys need a human"),
        "{}",
        asks.stderr
    );
    let task: Value = serde_json::from_str(&asks.stdout).unwrap();
    assert_eq!(task["decision"], "needs_approval");
    assert_eq!(task["doubleCheckOnRun"], true);
    assert!(mock.requests().is_empty(), "no model is involved");
}
