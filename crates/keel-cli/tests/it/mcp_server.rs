//! Keel as an MCP server, driven by the official Python MCP SDK (PyPI `mcp`, installed on
//! first use into `target/test-clients/mcp`) over stdio (`keel mcp`) and over streamable HTTP
//! (`keel serve`'s `/mcp`, with an operator key). Both times the client lists the tools, calls
//! `read_file`, asks the agent (the mock model answers), makes a call a policy denies and one
//! that needs approval — approved from another process (`keel approvals approve`) while the
//! client waits — and every call is then found recorded as a run. `/mcp` refuses a missing or
//! wrong key (401) and a client key (403).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_test_support::{Cli, MockLlm, MockResponse, TempWorkspace, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;
use keel_test_support::test_clients::mcp_python;

/// What the client does, one JSON line per step on stdout. `stdio KEEL WORKSPACE` launches
/// `KEEL mcp -w WORKSPACE`; `http URL KEY` connects to URL with the key.
const SCENARIO: &str = r#"
import asyncio, json, sys
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)

def result(step, r):
    text = r.content[0].text if r.content else None
    say(step, isError=r.is_error, text=text, structured=r.structured_content)

async def scenario(session):
    init = await session.initialize()
    say("initialize", server=init.server_info.name, tools=init.capabilities.tools is not None)
    listed = await session.list_tools()
    say("tools", tools={t.name: t.annotations.read_only_hint for t in listed.tools})
    result("read", await session.call_tool("read_file", {"path": "README.md"}))
    result("escape", await session.call_tool("read_file", {"path": "../outside.txt"}))
    result("agent", await session.call_tool("agent__assistant", {"input": "What is the answer?"}))
    result("denied", await session.call_tool("write_file", {"path": "x.txt", "content": "hi"}))
    result("approved", await session.call_tool("deploy", {"service": "web"}))
    result("runs", await session.call_tool("keel__runs_list", {"limit": 10}))
    try:
        await session.call_tool("no_such_tool", {})
        say("unknown", code=None)
    except Exception as e:
        say("unknown", code=getattr(e, "code", None), message=str(e))

async def main():
    if sys.argv[1] == "stdio":
        server = StdioServerParameters(command=sys.argv[2], args=["mcp", "-w", sys.argv[3]],
                                       env={"KEEL_LOG": "error"})
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await scenario(session)
    else:
        headers = {"Authorization": "Bearer " + sys.argv[3]}
        timeout = httpx2.Timeout(30, read=300)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            async with streamable_http_client(sys.argv[2], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await scenario(session)

asyncio.run(main())
"#;

const OPERATOR_KEY: &str = "mcp-operator-secret";
const CLIENT_KEY: &str = "mcp-client-secret";

/// A workspace whose agent `assistant` (the default) has `read_file`, `write_file` (denied by
/// policy) and `deploy` (a command tool that needs approval), on the mock model.
fn workspace(mock: &MockLlm, runtime: &str) -> TempWorkspace {
    mock.respond_with(|_| MockResponse::text(["The answer ", "is 42."]));
    WorkspaceBuilder::new()
        .runtime(runtime)
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo; echo deployed"] }
            "#,
        )
        .agent(
            "assistant",
            "{ model: mock, tools: [read_file, write_file, deploy] }",
        )
        .policy(
            "mcp",
            r#"{ rules: [
                { tool: write_file, decision: deny, reason: "the workspace is read-only here" },
                { tool: deploy, decision: ask, reason: "deploys need a human" } ] }"#,
        )
        .file("README.md", "hello from the workspace\n")
        .build()
}

/// Runs the client with `args` to its end, approving (from another process) the approval it
/// asks for as soon as it is pending; its steps by name.
async fn run_client(keel: &Cli, args: &[&str]) -> serde_json::Map<String, Value> {
    let scratch = tempfile::tempdir().unwrap();
    let stdout_path = scratch.path().join("stdout");
    let stderr_path = scratch.path().join("stderr");
    let mut child = Command::new(mcp_python())
        .arg("-c")
        .arg(SCENARIO)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let report = || {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&stdout_path).unwrap_or_default(),
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    };
    approve_when_asked(keel, &mut child, &report).await;
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    assert!(
        status.success(),
        "the client failed: {status}\n{}",
        report()
    );
    std::fs::read_to_string(&stdout_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|step| (step["step"].as_str().unwrap().to_owned(), step))
        .collect()
}

/// Waits until an approval is pending, then approves it with `keel approvals approve`.
async fn approve_when_asked(
    keel: &Cli,
    child: &mut std::process::Child,
    report: &dyn Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pending = keel.json_lines(["approvals", "list", "--json"]);
        if let Some(approval) = pending.first() {
            assert_eq!(approval["tool"], "deploy", "{approval}");
            let id = approval["approvalId"].as_str().unwrap();
            let decided = keel.run(["approvals", "approve", id, "--reason", "go ahead"]);
            assert!(decided.success(), "{}", decided.stderr);
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the client ended ({status}) before asking for an approval\n{}",
                report()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no approval was asked for\n{}",
            report()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What every transport must show: the listing, each call's outcome, and the runs recorded.
/// Returns the agent's run record.
fn check_scenario(steps: &serde_json::Map<String, Value>, keel: &Cli, ws: &Path) -> Value {
    let step = |name: &str| {
        steps
            .get(name)
            .unwrap_or_else(|| panic!("no step {name}: {steps:?}"))
    };
    assert_eq!(step("initialize")["server"], "keel");
    assert_eq!(step("initialize")["tools"], true);

    let tools = step("tools")["tools"].as_object().unwrap();
    for name in [
        "read_file",
        "write_file",
        "deploy",
        "agent__assistant",
        "keel__task_create",
        "keel__task_get",
        "keel__task_update",
        "keel__task_run",
        "keel__task_delete",
        "keel__runs_list",
        "keel__run_events",
        "keel__approvals_pending",
    ] {
        assert!(tools.contains_key(name), "{name} is not listed: {tools:?}");
    }
    assert_eq!(tools["read_file"], true, "read-only hint");
    assert_eq!(tools["keel__runs_list"], true, "read-only hint");
    assert_eq!(tools["write_file"], false);

    let read = step("read");
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(read["text"], "hello from the workspace\n");

    // A blocked call's reason is in the text clients show, not only in structuredContent.
    let escape = step("escape");
    assert_eq!(escape["isError"], true, "{escape}");
    let text = escape["text"].as_str().unwrap();
    assert!(
        text.contains("outside the workspace") && text.contains("../outside.txt"),
        "{text}"
    );

    let agent = step("agent");
    assert_eq!(agent["isError"], false, "{agent}");
    assert_eq!(agent["text"], "The answer is 42.");
    let agent_run = agent["structured"]["requestId"].as_str().unwrap();

    let denied = step("denied");
    assert_eq!(denied["isError"], true, "{denied}");
    let reason = denied["text"].as_str().unwrap();
    assert!(
        reason.contains("denied by policy") && reason.contains("the workspace is read-only here"),
        "{reason}"
    );
    assert!(!ws.join("x.txt").exists(), "the denied call never ran");

    let approved = step("approved");
    assert_eq!(approved["isError"], false, "{approved}");
    assert!(
        approved["text"].as_str().unwrap().contains("deployed"),
        "{approved}"
    );
    assert!(ws.join("deployed.txt").exists(), "the approved call ran");

    assert_eq!(step("runs")["isError"], false);
    assert_eq!(step("unknown")["code"], -32602, "invalid params");

    // Every call is an ordinary recorded run.
    let runs = keel.json_lines(["runs", "list", "--json"]);
    let find = |input_start: &str| {
        runs.iter()
            .find(|run| run["input"].as_str().unwrap().starts_with(input_start))
            .unwrap_or_else(|| panic!("no run of `{input_start}`: {runs:?}"))
    };
    assert_eq!(
        find("read_file {\"path\":\"README.md\"}")["status"],
        "completed"
    );
    let escape = find("read_file {\"path\":\"../outside.txt\"}");
    assert_eq!(escape["status"], "failed", "{escape}");
    assert_eq!(escape["finishReason"], "tool_blocked", "{escape}");
    assert_eq!(find("deploy ")["status"], "completed");
    let blocked = find("write_file ");
    assert_eq!(blocked["status"], "failed");
    let recorded = blocked["error"]["message"].as_str().unwrap();
    assert!(
        recorded.contains("the workspace is read-only here"),
        "{blocked}"
    );
    let asked = find("What is the answer?");
    assert_eq!(asked["requestId"], agent_run);
    assert_eq!(asked["status"], "completed");
    assert_eq!(asked["output"], "The answer is 42.");
    let events = keel.json_lines(["runs", "events", agent_run, "--json"]);
    assert_eq!(events[0]["type"], "runtime.request.started");
    asked.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_uses_keel_mcp_over_stdio() {
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, "{ defaultAgent: assistant }");
    let keel = keel_in(&ws);
    let bin = env!("CARGO_BIN_EXE_keel");
    let workspace = ws.path().to_str().unwrap();
    let steps = run_client(&keel, &["stdio", bin, workspace]).await;
    let asked = check_scenario(&steps, &keel, ws.path());
    assert!(
        asked.get("owner").is_none(),
        "stdio names no owner: {asked}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_uses_mcp_over_http_with_an_operator_key() {
    let mock = MockLlm::start().await;
    let ws = workspace(
        &mock,
        "{ defaultAgent: assistant, server: { apiKeys: [ \
         { env: MCP_OPERATOR_KEY, role: operator, name: ops }, \
         { env: MCP_CLIENT_KEY, role: client } ] } }",
    );
    let keel = keel_in(&ws)
        .env("MCP_OPERATOR_KEY", OPERATOR_KEY)
        .env("MCP_CLIENT_KEY", CLIENT_KEY);
    let serving = keel.serve();
    let url = format!("http://{}/mcp", serving.addr());

    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    for (key, status) in [(None, 401), (Some("wrong"), 401), (Some(CLIENT_KEY), 403)] {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{key:?}");
        // A 401 names its scheme — a bearer key, not OAuth — so clients do not start an
        // OAuth discovery flow.
        if status == 401 {
            let challenge = response.headers().get("www-authenticate");
            assert_eq!(
                challenge.map(|v| v.to_str().unwrap()),
                Some("Bearer realm=\"keel\""),
                "{key:?}"
            );
        }
    }

    let steps = run_client(&keel, &["http", &url, OPERATOR_KEY]).await;
    let asked = check_scenario(&steps, &keel, ws.path());
    assert_eq!(asked["owner"], "ops", "the key's principal owns the run");
}

/// A client that can be asked (it declares `elicitation`): its user approves the first
/// deploy and denies the second, and nobody else decides.
const ASKING_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

answers = [True, False]
asked = []

async def elicit(context, params):
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={"approve": answers[len(asked) - 1]})

async def main():
    server = StdioServerParameters(command=sys.argv[1], args=["mcp", "-w", sys.argv[2]],
                                   env={"KEEL_LOG": "error"})
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            for step in ("first", "second"):
                r = await session.call_tool("deploy", {"service": step})
                text = r.content[0].text if r.content else None
                print(json.dumps({"step": step, "isError": r.is_error, "text": text}), flush=True)
    print(json.dumps({"step": "asked", "messages": asked}), flush=True)

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_ask_is_put_to_the_users_of_a_client_that_declares_elicitation() {
    let mock = MockLlm::start().await;
    let ws = workspace(&mock, "{ defaultAgent: assistant }");
    let keel = keel_in(&ws);
    let output = tokio::task::block_in_place(|| {
        Command::new(mcp_python())
            .arg("-c")
            .arg(ASKING_CLIENT)
            .args([env!("CARGO_BIN_EXE_keel"), ws.path().to_str().unwrap()])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let steps: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(steps[0]["isError"], false, "{}", steps[0]);
    assert_eq!(steps[1]["isError"], true, "{}", steps[1]);
    assert!(
        steps[1]["text"].as_str().unwrap().contains("denied"),
        "{}",
        steps[1]
    );
    let messages = steps[2]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{stdout}");
    assert!(
        messages[0]
            .as_str()
            .unwrap()
            .contains("deploys need a human"),
        "{stdout}"
    );
    // Only the approved deploy ran; both decisions are recorded as the client's.
    assert_eq!(ws.read("deployed.txt").lines().count(), 1);
    let decided = keel.json_lines(["approvals", "list", "--status", "all", "--json"]);
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert!(
        decided.iter().all(|a| a["decidedBy"] == "mcp-client"),
        "{decided:?}"
    );
}
