//! `keel acp` driven by the official ACP TypeScript SDK (`@agentclientprotocol/sdk`, the
//! client Zed's protocol ships): `fixtures/acp_client.mjs` plays an editor — sessions,
//! prompts with streamed updates and tool calls, permission questions answered allow, deny
//! and allow always, cancel, load — against a workspace on the mock model. Bad input is
//! checked with raw lines: each is answered with a JSON-RPC error naming what is wrong, and
//! stdout carries nothing else.

use std::io::Write;
use std::process::{Command, Stdio};

use keel_test_support::test_clients::protocol_clients_js;
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::{keel_in, readme_workspace};

const CLIENT: &str = include_str!("fixtures/acp_client.mjs");

/// Runs scenario `args[0]` of the client against `keel acp -w ws`, with `env` added; returns
/// its report.
fn editor(ws: &TempWorkspace, args: &[&str], env: &[(&str, &str)]) -> Value {
    let modules = protocol_clients_js().join("node_modules");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acp_client.mjs"), CLIENT).unwrap();
    std::os::unix::fs::symlink(modules, dir.path().join("node_modules")).unwrap();
    let mut command = Command::new("node");
    command
        .arg(dir.path().join("acp_client.mjs"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KEEL_LOG", "error")
        .env("KEEL_BIN", env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_WS", ws.path());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n--- stderr\n{stderr}"))
}

/// The `update`s of a report's `session/update` notifications.
fn updates(seen: &Value) -> Vec<Value> {
    seen["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["update"].clone())
        .collect()
}

/// The agent's text, joined, from `updates`.
fn agent_text(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

/// A run's stored status.
fn run_status(ws: &TempWorkspace, id: &str) -> String {
    let runs = keel_in(ws).json_lines(["runs", "list", "--json"]);
    let run = runs
        .iter()
        .find(|r| r["requestId"] == id)
        .unwrap_or_else(|| panic!("no run {id}: {runs:?}"));
    run["status"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_streams_its_tool_call_and_answer_and_the_next_prompt_sees_it() {
    let mock = MockLlm::start().await;
    let ws = readme_workspace(&mock, None);
    let report = tokio::task::block_in_place(|| {
        editor(
            &ws,
            &["turns", "What does the README say?", "Say it again."],
            &[],
        )
    });

    assert_eq!(report["init"]["protocolVersion"], 1);
    assert_eq!(report["init"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(report["init"]["agentInfo"]["name"], "keel");
    assert_eq!(report["exit"], 0);
    let answers = report["answers"].as_array().unwrap();
    for answer in answers {
        assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    }
    let first_run = answers[0]["_meta"]["keel"]["requestId"].as_str().unwrap();
    assert_eq!(run_status(&ws, first_run), "completed");

    // The first turn's updates, in order: the call announced, running, done with its output,
    // then the answer.
    let updates = updates(&report["seen"]);
    let call_id = format!("{first_run}/c1");
    let of_call: Vec<&Value> = updates
        .iter()
        .filter(|u| u["toolCallId"] == call_id.as_str())
        .collect();
    assert_eq!(of_call.len(), 3, "{of_call:?}");
    assert_eq!(of_call[0]["sessionUpdate"], "tool_call");
    assert_eq!(of_call[0]["title"], "read_file README.md");
    assert_eq!(of_call[0]["kind"], "read");
    assert_eq!(of_call[0]["status"], "pending");
    assert_eq!(of_call[0]["rawInput"], json!({"path": "README.md"}));
    assert_eq!(
        of_call[0]["locations"][0]["path"],
        ws.path().join("README.md").display().to_string()
    );
    assert_eq!(of_call[1]["sessionUpdate"], "tool_call_update");
    assert_eq!(of_call[1]["status"], "in_progress");
    assert_eq!(of_call[2]["status"], "completed");
    assert_eq!(
        of_call[2]["content"][0],
        json!({"type": "content", "content": {"type": "text", "text": "hello from the workspace\n"}})
    );
    let said = "The README says: hello from the workspace";
    assert_eq!(agent_text(&updates), format!("{said}{said}"));
    let sessions: Vec<&str> = report["seen"]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["sessionId"].as_str().unwrap())
        .collect();
    assert!(sessions.iter().all(|s| *s == report["sessionId"]));

    // The second prompt is a turn of the same Keel session: the model gets the first turn.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let second_turn = requests[2].body["messages"].to_string();
    assert!(
        second_turn.contains("What does the README say?") && second_turn.contains(said),
        "{second_turn}"
    );
    let shown = keel_in(&ws).run(["sessions", "show", report["sessionId"].as_str().unwrap()]);
    assert!(shown.success(), "{}", shown.stderr);
}

/// Agent `a` on the mock with `deploy`, a tool with effects and no policy rule: each call
/// asks a person. The model deploys the last word of each prompt, then reports the result.
fn deploy_workspace(mock: &MockLlm) -> TempWorkspace {
    mock.respond_with(|request| match request.last_role() {
        Some("user") => {
            let service = request
                .last_content_of("user")
                .and_then(|text| text.split_whitespace().last())
                .unwrap_or_default()
                .to_owned();
            MockResponse::tool_calls([MockToolCall::new(
                "c1",
                "deploy",
                [format!(r#"{{"service":"{service}"}}"#)],
            )])
        }
        _ => MockResponse::text([format!(
            "Result: {}",
            request.last_content_of("tool").unwrap_or_default().trim()
        )]),
    });
    WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo >> deployed.txt; echo deployed"] }
            "#,
        )
        .agent("a", "{ model: mock, tools: [deploy] }")
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn permission_questions_decide_approvals_allow_deny_and_allow_for_the_session() {
    let mock = MockLlm::start().await;
    let ws = deploy_workspace(&mock);
    let report = tokio::task::block_in_place(|| {
        editor(
            &ws,
            &["turns", "deploy a", "deploy b", "deploy c", "deploy d"],
            &[("ACP_ANSWERS", "allow_once,reject_once,allow_always")],
        )
    });

    // Every turn ends normally: a denied call is the model's to handle.
    let answers = report["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 4);
    for answer in answers {
        assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    }
    // Asked three times: `d` ran under c's "allow always" without a question.
    let asked = report["seen"]["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 3, "{asked:?}");
    for (question, service) in asked.iter().zip(["a", "b", "c"]) {
        assert_eq!(question["sessionId"], report["sessionId"]);
        assert_eq!(
            question["toolCall"]["rawInput"],
            json!({ "service": service })
        );
        assert_eq!(question["toolCall"]["title"], "deploy");
        let kinds: Vec<&str> = question["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    }
    let deployed = std::fs::read_to_string(ws.join("deployed.txt")).unwrap();
    let services: Vec<&str> = deployed.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        services,
        [
            r#"{"service":"a"}"#,
            r#"{"service":"c"}"#,
            r#"{"service":"d"}"#
        ]
    );

    // The denied call ended failed, saying who denied it; the others completed.
    let updates = updates(&report["seen"]);
    let run_of = |i: usize| answers[i]["_meta"]["keel"]["requestId"].as_str().unwrap();
    let last_status = |i: usize| {
        let id = format!("{}/c1", run_of(i));
        updates
            .iter()
            .rev()
            .find(|u| u["toolCallId"] == id.as_str())
            .unwrap()
            .clone()
    };
    assert_eq!(last_status(0)["status"], "completed");
    let denied = last_status(1);
    assert_eq!(denied["status"], "failed");
    assert_eq!(
        denied["content"][0]["content"]["text"],
        "denied by test-editor@acp"
    );
    assert_eq!(last_status(2)["status"], "completed");
    assert_eq!(last_status(3)["status"], "completed");
    assert!(agent_text(&updates).contains("Result: deployed"));

    // The decisions are Keel approvals, recorded with their scope and who decided.
    let approvals = keel_in(&ws).json_lines(["approvals", "list", "--status", "all", "--json"]);
    let mut decided: Vec<(String, String, String)> = approvals
        .iter()
        .map(|a| {
            (
                a["arguments"]["service"].as_str().unwrap().to_owned(),
                a["status"].as_str().unwrap().to_owned(),
                a["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    decided.sort();
    assert_eq!(
        decided,
        [
            ("a".into(), "approved".into(), "once".into()),
            ("b".into(), "denied".into(), "once".into()),
            ("c".into(), "approved".into(), "session".into()),
        ]
    );
    assert!(
        approvals
            .iter()
            .all(|a| a["decidedBy"] == "test-editor@acp")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subagents_approval_is_asked_of_the_editor_too() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let messages = request.messages();
        let system = messages[0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let result = request.last_content_of("tool").map(str::to_owned);
        match (system.contains("You are lead."), result) {
            (true, None) => MockResponse::tool_calls([MockToolCall::new(
                "t1",
                "task",
                [json!({"agent": "ops", "prompt": "deploy web"}).to_string()],
            )]),
            (true, Some(result)) => MockResponse::text([format!("Lead: {}", result.trim())]),
            (false, None) => MockResponse::tool_calls([MockToolCall::new(
                "d1",
                "deploy",
                [r#"{"service":"web"}"#],
            )]),
            (false, Some(result)) => MockResponse::text([format!("ops: {}", result.trim())]),
        }
    });
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .runtime("{ defaultAgent: lead }")
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo deployed"] }
            "#,
        )
        .agent(
            "lead",
            "{ model: mock, instructions: You are lead., subagents: [ops] }",
        )
        .agent(
            "ops",
            "{ model: mock, instructions: You are ops., tools: [deploy] }",
        )
        .build();
    let report = tokio::task::block_in_place(|| {
        editor(&ws, &["turns", "ship it"], &[("ACP_ANSWERS", "allow_once")])
    });

    assert_eq!(report["answers"][0]["stopReason"], "end_turn");
    let asked = report["seen"]["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["toolCall"]["rawInput"], json!({"service": "web"}));
    assert_eq!(
        std::fs::read_to_string(ws.join("deployed.txt"))
            .unwrap()
            .trim(),
        r#"{"service":"web"}"#
    );
    // The subagent's call shows in the session, announced before the question, then done.
    let updates = updates(&report["seen"]);
    let id = asked[0]["toolCall"]["toolCallId"].as_str().unwrap();
    let of_call: Vec<&Value> = updates.iter().filter(|u| u["toolCallId"] == id).collect();
    assert_eq!(of_call[0]["sessionUpdate"], "tool_call");
    assert_eq!(of_call[0]["title"], "deploy (subagent ops)");
    assert_eq!(of_call.last().unwrap()["status"], "completed");
    assert!(agent_text(&updates).starts_with("Lead: "), "{updates:?}");
}

/// Agent `a` on the mock with `slow`, a tool that waits a minute: "be slow" calls it, any
/// other prompt is answered "Still here.".
fn slow_workspace(mock: &MockLlm) -> TempWorkspace {
    mock.respond_with(|request| match request.last_content_of("user") {
        Some("be slow") if request.last_role() == Some("user") => {
            MockResponse::tool_calls([MockToolCall::new("c1", "slow", ["{}"])])
        }
        _ => MockResponse::text(["Still here."]),
    });
    WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "slow",
            r#"
            description: Waits.
            impl: { kind: command, command: ["sh", "-c", "sleep 60"] }
            policy: allow
            "#,
        )
        .agent("a", "{ model: mock, tools: [slow] }")
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_the_run_cancelled_and_the_session_goes_on() {
    let mock = MockLlm::start().await;
    let ws = slow_workspace(&mock);
    let report = tokio::task::block_in_place(|| editor(&ws, &["cancel"], &[]));

    let answers = report["answers"].as_array().unwrap();
    assert_eq!(answers[0]["stopReason"], "cancelled");
    let cancelled = answers[0]["_meta"]["keel"]["requestId"].as_str().unwrap();
    assert_eq!(run_status(&ws, cancelled), "cancelled");
    // The call that was running ends failed, not left spinning.
    let updates = updates(&report["seen"]);
    let call = format!("{cancelled}/c1");
    let last = updates
        .iter()
        .rev()
        .find(|u| u["toolCallId"] == call.as_str())
        .unwrap();
    assert_eq!(last["status"], "failed");
    // The session answers the next prompt.
    assert_eq!(answers[1]["stopReason"], "end_turn");
    assert_eq!(agent_text(&updates), "Still here.");
    assert_eq!(report["exit"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn session_load_replays_the_stored_conversation() {
    let mock = MockLlm::start().await;
    let ws = readme_workspace(&mock, None);
    let report =
        tokio::task::block_in_place(|| editor(&ws, &["load", "What does the README say?"], &[]));

    let session = report["first"]["sessionId"].as_str().unwrap();
    let run = report["first"]["answer"]["_meta"]["keel"]["requestId"]
        .as_str()
        .unwrap();
    let second = &report["second"];
    assert_eq!(second["loaded"], json!({}));
    let replayed: Vec<Value> = second["seen"]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .inspect(|n| assert_eq!(n["sessionId"], session))
        .map(|n| {
            let u = &n["update"];
            json!([
                u["sessionUpdate"],
                u.get("toolCallId"),
                u.get("status"),
                u["content"]["text"]
                    .as_str()
                    .or(u["content"][0]["content"]["text"].as_str())
            ])
        })
        .collect();
    let call = format!("{run}/c1");
    assert_eq!(
        replayed,
        [
            json!([
                "user_message_chunk",
                null,
                null,
                "What does the README say?"
            ]),
            json!(["tool_call", call, "pending", null]),
            json!([
                "tool_call_update",
                call,
                "completed",
                "hello from the workspace\n"
            ]),
            json!([
                "agent_message_chunk",
                null,
                null,
                "The README says: hello from the workspace"
            ]),
        ]
    );
    assert_eq!(second["missing"]["error"]["code"], -32002);
    assert!(
        second["missing"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no session `no-such-session`")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_read_and_write_through_the_editor_when_it_offers_its_file_system() {
    let mock = MockLlm::start().await;
    // Read notes.md, copy it to copy.md, edit notes.md, answer.
    mock.respond_with(|request| {
        let results: Vec<&Value> = request
            .messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        let call = |name: &str, args: Value| {
            MockResponse::tool_calls([MockToolCall::new(
                format!("c{}", results.len() + 1),
                name,
                [args.to_string()],
            )])
        };
        match results.len() {
            0 => call("read_file", json!({"path": "notes.md"})),
            1 => call(
                "write_file",
                json!({"path": "copy.md", "content": results[0]["content"]}),
            ),
            2 => call(
                "edit_file",
                json!({"path": "notes.md", "old_string": "editor", "new_string": "keel"}),
            ),
            _ => MockResponse::text(["Done."]),
        }
    });
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent(
            "a",
            "{ model: mock, tools: [read_file, write_file, edit_file] }",
        )
        .file("notes.md", "from the disk\n")
        .build();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let notes = root.join("notes.md").display().to_string();
    let copy = root.join("copy.md").display().to_string();
    // The editor's buffer of notes.md differs from the disk (unsaved changes).
    let buffers = json!({ &notes: "from the editor buffer\n" }).to_string();
    let report = tokio::task::block_in_place(|| {
        editor(
            &ws,
            &["turns", "copy the notes"],
            &[
                ("ACP_FS", &buffers),
                ("ACP_ANSWERS", "allow_once,allow_once"),
            ],
        )
    });

    assert_eq!(report["answers"][0]["stopReason"], "end_turn");
    let seen = &report["seen"];
    let reads: Vec<&str> = seen["reads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        reads,
        [notes.as_str(), notes.as_str()],
        "read_file, then edit_file"
    );
    let writes: Vec<(&str, &str)> = seen["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["path"].as_str().unwrap(), w["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        writes,
        [
            (copy.as_str(), "from the editor buffer\n"),
            (notes.as_str(), "from the keel buffer\n"),
        ]
    );
    assert!(
        seen["reads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["sessionId"] == report["sessionId"])
    );
    // The disk is untouched: the editor decides when to save.
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "from the disk\n"
    );
    assert!(!ws.join("copy.md").exists());
    // The model got the editor's text, and each tool call completed.
    let updates = updates(seen);
    let completed = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .count();
    assert_eq!(completed, 3, "{updates:?}");
    assert!(
        mock.requests()[1].body["messages"]
            .to_string()
            .contains("from the editor buffer")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_editor_leaving_mid_prompt_cancels_the_run_and_keel_exits() {
    let mock = MockLlm::start().await;
    let ws = slow_workspace(&mock);
    let mut child = keel_in(&ws)
        .command(["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
    };
    let mut next = || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    tokio::task::block_in_place(|| {
        send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": 1}}));
        assert_eq!(next()["id"], 1);
        send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                    "params": {"cwd": ws.path(), "mcpServers": []}}));
        let session = next()["result"]["sessionId"].clone();
        send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                    "params": {"sessionId": session, "prompt": [{"type": "text", "text": "be slow"}]}}),
        );
        // The tool is running: the editor goes away.
        while next()["params"]["update"]["status"] != "in_progress" {}
    });
    drop(stdin);
    let exit = tokio::task::block_in_place(|| child.wait().unwrap());

    assert_eq!(exit.code(), Some(0));
    assert_eq!(keel_in(&ws).newest_run()["status"], "cancelled");
}

#[test]
fn bad_input_is_answered_with_errors_naming_what_is_wrong_and_stdout_is_protocol_only() {
    let ws = WorkspaceBuilder::new()
        .scripted_agent("a", &json!([{ "text": "hi" }]))
        .build();
    let mut child = keel_in(&ws)
        .command(["acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: [&[u8]; 11] = [
        b"{not json\n",
        br#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}"#,
        br#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}"#,
        br#"{"jsonrpc":"2.0","id":4,"method":"no/such"}"#,
        br#"{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}"#,
        br#"{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#,
        b"[1,2]",
        b"\xff\xfe not utf-8",
        br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"video"}]}}"#,
        br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"nonsense":true}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let answers: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let summary: Vec<(Value, Value, String)> = answers
        .iter()
        .map(|a| {
            assert_eq!(a["jsonrpc"], "2.0");
            (
                a["id"].clone(),
                a["error"]["code"].clone(),
                a["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let expected: [(Value, i64, &str); 10] = [
        (Value::Null, -32700, "parse error"),
        (
            json!(1),
            -32600,
            "not initialized: send `initialize` before `session/new`",
        ),
        (json!(2), -32602, "missing field `protocolVersion`"),
        (json!(3), 0, ""),
        (json!(4), -32601, "unknown method `no/such`"),
        (json!(5), -32002, "no session `nope`"),
        (json!(6), -32602, "`cwd` must be an absolute path"),
        (Value::Null, -32600, "batch"),
        (Value::Null, -32700, "not UTF-8"),
        (json!(7), -32602, "unknown variant `video`"),
    ];
    assert_eq!(summary.len(), expected.len(), "{stdout}");
    for ((id, code, message), (want_id, want_code, says)) in summary.iter().zip(expected) {
        assert_eq!(*id, want_id, "{stdout}");
        if want_code == 0 {
            assert_eq!(answers[3]["result"]["protocolVersion"], 1);
            continue;
        }
        assert_eq!(*code, want_code, "{message}");
        assert!(message.contains(says), "{message} should say {says}");
    }
}
