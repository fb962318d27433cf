//! An MCP server (the official Python SDK's low-level server) whose tool names cannot be model
//! tool names — a `/`, 80 characters, two names that map to the same one, an empty one: the
//! model sees only valid names (`docs/mcp.md#tool-names`), calls a mapped one, and the server
//! receives its own name. Each mapping is in the server's status; the empty name is left out
//! and said so. The server's `destructiveHint: false` reaches the runtime's view of the tool.

use keel::{RequestOptions, RunStatus, Runtime};
use keel_test_support::test_clients::mcp_python;
use keel_test_support::{MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};
use serde_json::{Value, json};

/// The server: every call is logged to `calls.log` with the name it was called by.
const SERVER: &str = r#"
import json
import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

NAMES = ["files/read", "x" * 80, "dup.name", "dup_name", "", "ok-name"]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description="tool " + repr(n),
                   input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
                   annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False))
        for n in NAMES])


async def call_tool(ctx, params):
    with open("calls.log", "a") as log:
        log.write(json.dumps({"name": params.name, "arguments": params.arguments}) + "\n")
    return types.CallToolResult(content=[types.TextContent(type="text", text="called " + params.name)])


server = Server("names", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"#;

fn valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_server_tool_names_are_mapped_and_called_by_their_own_names() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "mcp__n__files_read",
        [r#"{"text": "hi"}"#],
    )]));
    mock.push(MockResponse::text(["done"]));
    let command = json!([mcp_python().display().to_string(), "names_server.py"]);
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .openai_model_at("mock", &mock.base_url())
        .agent("assistant", "{ model: mock, tools: [\"mcp__n__*\"] }")
        .policy("mcp", r#"{ rules: [{ tool: "mcp__*", decision: allow }] }"#)
        .document(
            "McpServer",
            "n",
            &format!("transport: stdio\ncommand: {command}\nstartupTimeout: 120s\n"),
        )
        .file("names_server.py", SERVER)
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let handle = runtime
        .request(RequestOptions {
            input: "read it".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    // The model saw only valid names, one per tool with a name.
    let requests = mock.requests();
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered.len(), 5, "{offered:?}");
    assert!(offered.iter().all(|n| valid(n)), "{offered:?}");
    assert!(
        offered.contains(&"mcp__n__files_read".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__n__dup_name".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__n__ok-name".to_owned()),
        "{offered:?}"
    );
    // The model read the server's answer, given under the server's own name.
    assert_eq!(
        requests[1].last_content_of("tool"),
        Some("called files/read")
    );
    let calls: Vec<Value> = ws
        .read("calls.log")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        calls,
        vec![json!({"name": "files/read", "arguments": {"text": "hi"}})]
    );

    // Each mapping is reported, and so is the tool left out.
    let status = runtime
        .mcp_servers()
        .into_iter()
        .find(|s| s.name == "n")
        .unwrap();
    let renamed: Vec<(&str, &str)> = status
        .renamed
        .iter()
        .map(|r| (r.original.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(renamed.len(), 3, "{renamed:?}");
    assert!(renamed.contains(&("files/read", "mcp__n__files_read")));
    assert!(
        renamed
            .iter()
            .any(|(o, n)| *o == "dup.name" && n.starts_with("mcp__n__dup_name_"))
    );
    assert!(renamed.iter().any(|(o, n)| o.len() == 80 && n.len() == 64));
    assert_eq!(status.left_out.len(), 1, "{status:?}");
    let listed = serde_json::to_value(&status).unwrap();
    assert_eq!(listed["renamed"].as_array().unwrap().len(), 3, "{listed}");
    assert!(
        listed["leftOut"][0]
            .as_str()
            .unwrap()
            .contains("empty name")
    );

    // The server's own hints are the runtime's.
    assert_eq!(
        runtime.tools().destructive("mcp__n__files_read"),
        Some(false)
    );
    assert!(!runtime.tools().read_only("mcp__n__files_read"));
    runtime.stop_mcp().await;
}
