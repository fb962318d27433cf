//! `keel mcp tools` and `keel mcp list --json` report each server tool offered under a mapped
//! name (`docs/mcp.md#tool-names`) and each tool left out for an empty name.

use keel_test_support::WorkspaceBuilder;
use keel_test_support::test_clients::mcp_python;
use serde_json::{Value, json};

use crate::common::keel_in;

/// A server (the official Python SDK's low-level server) with a name holding a `/`, a valid
/// one and an empty one.
const SERVER: &str = r#"
import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name=n, description="tool " + repr(n), input_schema={"type": "object"})
        for n in ["files/read", "ok", ""]])


server = Server("names", on_list_tools=list_tools)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"#;

#[test]
fn mcp_tools_and_mcp_list_report_mapped_names_and_left_out_tools() {
    let command = json!([mcp_python().display().to_string(), "names_server.py"]);
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "x"}]}]}))
        .agent("a", "{ model: m, tools: [\"mcp__n__*\"] }")
        .document(
            "McpServer",
            "n",
            &format!("transport: stdio\ncommand: {command}\nstartupTimeout: 120s\n"),
        )
        .file("names_server.py", SERVER)
        .build();
    let keel = keel_in(&ws);

    let tools = keel.run(["mcp", "tools", "n", "--json"]);
    assert_eq!(tools.code, Some(0), "{}{}", tools.stdout, tools.stderr);
    let lines: Vec<Value> = tools
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tool = |name: &str| lines.iter().find(|l| l["name"] == name).cloned();
    assert_eq!(
        tool("mcp__n__files_read").map(|t| t["originalName"].clone()),
        Some(json!("files/read")),
        "{lines:?}"
    );
    assert_eq!(
        tool("mcp__n__ok").map(|t| t["originalName"].clone()),
        Some(Value::Null),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l["leftOut"]
            .as_str()
            .is_some_and(|w| w.contains("empty name"))),
        "{lines:?}"
    );

    let text = keel.run(["mcp", "tools", "n"]);
    assert!(
        text.stdout.contains("[server's name: \"files/read\"]"),
        "{}",
        text.stdout
    );

    let list = keel.run(["mcp", "list", "--json"]);
    assert_eq!(list.code, Some(0), "{}{}", list.stdout, list.stderr);
    assert!(
        list.stdout
            .contains(r#""renamed":[{"original":"files/read","name":"mcp__n__files_read"}]"#),
        "{}",
        list.stdout
    );
}
