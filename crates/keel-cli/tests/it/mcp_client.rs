//! MCP servers from the npm registry as tool sources, end to end: the real `keel` binary, a
//! mock model on loopback, and `@modelcontextprotocol/server-everything` (over stdio and over
//! streamable HTTP) and `@modelcontextprotocol/server-filesystem` (over stdio), installed by
//! the test set-up into `target/test-clients/mcp-servers`. Every call takes the governed path
//! of a built-in tool: gateway (the server's `inputSchema`: repaired or blocked before the
//! server sees it), policy (annotations decide), `PreToolUse` hooks, approvals.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keel_test_support::test_clients::mcp_server_bin;
use keel_test_support::{Cli, MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

/// The stored events of the newest run of type `phase` (an adapter phase or an event type).
fn events_of(keel: &Cli, kind: &str) -> Vec<Value> {
    keel.newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == kind || e["event"]["phase"] == kind)
        .collect()
}

/// The tool result the model got for call `id` of the newest run.
fn result_of(keel: &Cli, id: &str) -> Value {
    events_of(keel, "agent.tool.result")
        .into_iter()
        .find(|e| e["event"]["callId"] == id)
        .map(|e| e["event"].clone())
        .unwrap_or_else(|| panic!("no result for call {id}"))
}

fn everything_stdio() -> String {
    format!(
        "transport: stdio\ncommand: [\"{}\", \"stdio\"]\n",
        mcp_server_bin("mcp-server-everything").display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_server_everything_over_stdio_through_the_gateway() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "mcp__ev__echo", [r#"{"message":"hi from keel"}"#]),
        // A number sent as a string: repaired by the gateway against the server's schema.
        MockToolCall::new("c2", "mcp__ev__get-sum", [r#"{"a":"2","b":3}"#]),
        // Not a number at all: blocked, the server never sees it.
        MockToolCall::new("c3", "mcp__ev__get-sum", [r#"{"a":"two","b":3}"#]),
        // Reports progress as it goes.
        MockToolCall::new(
            "c4",
            "mcp__ev__trigger-long-running-operation",
            [r#"{"duration":0.2,"steps":2}"#],
        ),
    ]));
    mock.push(MockResponse::text(["Done."]));
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent("a", "{ model: mock, tools: [\"mcp__ev__*\"] }")
        .document("McpServer", "ev", &everything_stdio())
        .policy("ev", "rules: [{ tool: \"mcp__ev__*\", decision: allow }]")
        .build();
    let keel = keel_in(&ws);

    let listed = keel.run(["tools", "list"]);
    assert!(listed.success(), "{}", listed.stderr);
    assert!(listed.stdout.contains("mcp__ev__echo"), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("mcp__ev__get-sum"),
        "{}",
        listed.stdout
    );

    let run = keel.run(["run", "use the tools"]);
    assert!(run.success(), "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "Done.");

    // The model saw every tool of the server with its own schema.
    let request = &mock.requests()[0].body;
    let names: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__ev__echo"), "{names:?}");

    assert_eq!(result_of(&keel, "c1")["output"], "Echo: hi from keel");
    let sum = result_of(&keel, "c2");
    assert!(sum["output"].as_str().unwrap().contains("is 5"), "{sum}");
    let guards = events_of(&keel, "runtime.tool.guard");
    let decision = |id: &str| {
        guards
            .iter()
            .find(|g| g["callId"] == id)
            .map(|g| g["decision"].as_str().unwrap().to_owned())
    };
    assert_eq!(decision("c1").as_deref(), Some("accepted"));
    assert_eq!(decision("c2").as_deref(), Some("repaired"));
    assert_eq!(decision("c3").as_deref(), Some("blocked"));
    // A blocked call never started: no `agent.tool.start` was written, nothing was sent.
    let started: Vec<Value> = events_of(&keel, "agent.tool.start")
        .into_iter()
        .map(|e| e["event"]["callId"].clone())
        .collect();
    assert_eq!(started, ["c1", "c2", "c4"]);

    // Progress notifications became events of the call.
    let progress: Vec<Value> = events_of(&keel, "agent.tool.progress")
        .into_iter()
        .map(|e| e["event"].clone())
        .collect();
    assert_eq!(progress.len(), 2, "{progress:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["callId"] == "c4" && p["total"] == 2.0)
    );
    // The run that started the server records its start.
    let lifecycle: Vec<String> = events_of(&keel, "runtime.mcp.lifecycle")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["server"].as_str().unwrap(),
                e["lifecycle"].as_str().unwrap()
            )
        })
        .collect();
    // What the server does while the run uses it (it may change its tools during a call) is
    // recorded in the run too.
    assert_eq!(lifecycle[..2], ["ev starting", "ev ready"], "{lifecycle:?}");
    assert!(
        lifecycle[2..].iter().all(|e| e == "ev tools_changed"),
        "{lifecycle:?}"
    );
}

/// A free loopback port (taken back right away; the server binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `server-everything` over streamable HTTP on `port`, killed when dropped.
struct HttpServer(Child);

impl HttpServer {
    async fn start(port: u16) -> Self {
        let child = Command::new(mcp_server_bin("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the HTTP server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self(child)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_calls_server_everything_over_streamable_http() {
    let port = free_port();
    let _server = HttpServer::start(port).await;
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "mcp__web__echo", [r#"{"message":"over http"}"#]),
        MockToolCall::new("c2", "mcp__web__get-tiny-image", ["{}"]),
    ]));
    mock.push(MockResponse::text(["Done."]));
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent("a", "{ model: mock, tools: [\"mcp__web__echo\", \"mcp__web__get-tiny-image\"] }")
        .document(
            "McpServer",
            "web",
            &format!(
                "transport: http\nurl: http://127.0.0.1:{port}/mcp\nheaders: {{ X-Test: \"${{MCP_TEST_HEADER}}\" }}\n"
            ),
        )
        .build();
    let keel = keel_in(&ws).env("MCP_TEST_HEADER", "from-env");
    let run = keel.run(["run", "use the tools"]);
    assert!(run.success(), "{}", run.stderr);
    assert_eq!(result_of(&keel, "c1")["output"], "Echo: over http");
    // An image in the result is stored as an artifact the model is told about.
    let image = result_of(&keel, "c2");
    let output = image["output"].as_str().unwrap();
    assert!(output.contains("image/png"), "{output}");
    assert!(output.contains("keel://artifacts/"), "{output}");
    let artifacts = events_of(&keel, "runtime.artifact.created");
    assert!(
        artifacts
            .iter()
            .any(|a| a["artifact"]["mediaType"] == "image/png"),
        "{artifacts:?}"
    );
}

fn filesystem_workspace(base_url: &str) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .openai_model_at("mock", base_url)
        .agent("a", "{ model: mock, tools: [\"mcp__fs__*\"] }")
        .document(
            "McpServer",
            "fs",
            &format!(
                "transport: stdio\ncommand: [\"{}\", \"./data\"]\ntools: {{ exclude: [\"move_file\"] }}\n",
                mcp_server_bin("mcp-server-filesystem").display()
            ),
        )
        .file("data/notes.txt", "hello from the filesystem server\n")
}

/// Waits (up to 60 s) until an approval is pending; returns it.
async fn wait_for_pending(keel: &Cli) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = keel
            .json_lines(["approvals", "list", "--json"])
            .into_iter()
            .next()
        {
            return found;
        }
        assert!(Instant::now() < deadline, "no approval was requested");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn server_filesystem_reads_freely_asks_before_writing_and_a_hook_can_deny() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "mcp__fs__read_text_file",
        [r#"{"path":"notes.txt"}"#],
    )]));
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c2",
        "mcp__fs__write_file",
        [r#"{"path":"out.txt","content":"written through keel"}"#],
    )]));
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c3",
        "mcp__fs__list_directory",
        [r#"{"path":"."}"#],
    )]));
    mock.push(MockResponse::text(["Done."]));
    let ws = filesystem_workspace(&mock.base_url())
        .hook(
            "no-listing",
            "event: PreToolUse\nmatcher: \"mcp__.*__list_directory\"\nhandler: { kind: command, command: [\"sh\", \"hooks/deny.sh\"] }\n",
        )
        .build();
    ws.write_executable(
        "hooks/deny.sh",
        "cat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"no listings\"}}'\n",
    );
    let keel = keel_in(&ws);
    let listed = keel.run(["tools", "list"]);
    assert!(
        !listed.stdout.contains("mcp__fs__move_file"),
        "excluded: {}",
        listed.stdout
    );

    let runner = keel
        .command(["run", "read, write, list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // write_file is annotated destructive: policy asks; another process approves.
    let approval = wait_for_pending(&keel).await;
    assert_eq!(approval["tool"], "mcp__fs__write_file");
    let id = approval["approvalId"].as_str().unwrap();
    let approved = keel.run(["approvals", "approve", id, "--reason", "fine"]);
    assert!(approved.success(), "{}", approved.stderr);
    let output = tokio::task::block_in_place(|| runner.wait_with_output().unwrap());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // read_text_file is annotated read-only: it ran without asking.
    let read = result_of(&keel, "c1");
    assert_eq!(
        read["output"], "hello from the filesystem server\n",
        "{read}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("data/out.txt")).unwrap(),
        "written through keel"
    );
    // The hook matching `mcp__.*__list_directory` denied the listing: it never started, and
    // the model was told why.
    let told = mock.requests()[3]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(told.contains("no listings"), "{told}");
    let started: Vec<Value> = events_of(&keel, "agent.tool.start")
        .into_iter()
        .map(|e| e["event"]["callId"].clone())
        .collect();
    assert_eq!(started, ["c1", "c2"]);
    let hooks = events_of(&keel, "runtime.hook.completed");
    assert!(
        hooks
            .iter()
            .any(|h| h["callId"] == "c3" && h["outcome"] == "deny"),
        "{hooks:?}"
    );
    let asked: Vec<Value> = events_of(&keel, "runtime.approval.requested");
    assert_eq!(asked.len(), 1, "only the write asked: {asked:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn keel_mcp_lists_servers_tools_prompts_and_reads_listed_resources_only() {
    let ws = WorkspaceBuilder::new()
        .scripted_model(
            "m",
            &serde_json::json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
        )
        .agent(
            "a",
            "{ model: m, tools: [read_mcp_resource, \"mcp__ev__*\", \"mcp__gone__*\"] }",
        )
        .document("McpServer", "ev", &everything_stdio())
        .document(
            "McpServer",
            "gone",
            "transport: stdio\ncommand: [\"./no-such-server\"]\n",
        )
        .build();
    let keel = keel_in(&ws);

    let servers = keel.json_lines(["mcp", "list", "--json"]);
    let state = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap().to_owned())
    };
    assert_eq!(state("ev").as_deref(), Some("ready"), "{servers:?}");
    assert_eq!(state("gone").as_deref(), Some("unavailable"), "{servers:?}");
    let gone = servers.iter().find(|s| s["name"] == "gone").unwrap();
    assert!(
        gone["lastError"]
            .as_str()
            .unwrap()
            .contains("program not found"),
        "{gone}"
    );

    let tools = keel.run(["mcp", "tools", "ev"]);
    assert!(tools.success(), "{}", tools.stderr);
    assert!(tools.stdout.contains("mcp__ev__echo"), "{}", tools.stdout);
    let unknown = keel.run(["mcp", "tools", "nope"]);
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("configured: ev, gone"),
        "{}",
        unknown.stderr
    );

    let prompts = keel.json_lines(["mcp", "prompts", "ev", "--json"]);
    assert!(
        prompts.iter().any(|p| p["name"] == "simple-prompt"),
        "{prompts:?}"
    );

    // A down server's tools are listed as unavailable, with why.
    let listed = keel.run(["tools", "list"]);
    assert!(
        listed.stdout.contains("mcp__gone__*") && listed.stdout.contains("program not found"),
        "{}",
        listed.stdout
    );

    // A listed resource is read; any other URI is refused before the server is asked.
    let read = keel.run([
        "tools",
        "call",
        "read_mcp_resource",
        "--args",
        r#"{"server":"ev","uri":"demo://resource/static/document/architecture.md"}"#,
    ]);
    assert!(read.success(), "{}", read.stderr);
    assert!(read.stdout.contains("Architecture"), "{}", read.stdout);
    let refused = keel.run([
        "tools",
        "call",
        "read_mcp_resource",
        "--args",
        r#"{"server":"ev","uri":"file:///etc/passwd"}"#,
    ]);
    assert!(!refused.success());
    assert!(
        refused.stderr.contains("lists no resource"),
        "{}",
        refused.stderr
    );
}
