//! `McpServer` documents: a valid stdio and http server load typed, each field that is wrong
//! is reported at its position with a hint, and the MCP names agents list are checked against
//! the declared servers.

use keel_workspace::{
    LoadOptions, MCP_TOOL_PREFIX, McpTransport, mcp_filter_allows, mcp_tool_name,
};

use crate::support::{Load, env, located, workspace};

/// A scripted model, for the agents of these tests.
const MODEL: &str = "\
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec: { provider: scripted, script: resources/script.yaml }
";

/// An `McpServer` document; `spec` is indented by two spaces (a leading newline is dropped).
fn server(name: &str, spec: &str) -> String {
    let spec = spec.strip_prefix('\n').unwrap_or(spec);
    format!(
        "---\napiVersion: keel/v1\nkind: McpServer\nmetadata: {{ name: {name} }}\nspec:\n{spec}"
    )
}

/// An `Agent` document using the scripted model; `spec` as for [`server`].
fn agent(name: &str, spec: &str) -> String {
    let spec = spec.strip_prefix('\n').unwrap_or(spec);
    format!(
        "---\napiVersion: keel/v1\nkind: Agent\nmetadata: {{ name: {name} }}\nspec:\n  model: default\n{spec}"
    )
}

/// Each diagnostic as `file:line:column: error: message` and its hint.
fn rendered(diagnostics: &[keel_workspace::Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn stdio_and_http_servers_load_and_agents_list_their_tools() {
    let ws = workspace();
    ws.write(
        "config/mcp.yaml",
        format!(
            "{MODEL}{}{}{}{}",
            server(
                "files",
                r#"
  transport: stdio
  command: [npx, -y, "@modelcontextprotocol/server-filesystem", ./data]
  env: { LOG_LEVEL: warn }
  envAllow: [NODE_OPTIONS, _private1]
  cwd: resources/../data
  startupTimeout: 10s
  tools: { include: ["read_*", list_directory], exclude: [read_media_file] }
"#
            ),
            server(
                "web",
                r#"
  transport: http
  url: ${MCP_URL}
  headers:
    Authorization: Bearer ${MCP_TOKEN}
  callTimeout: 2m
  maxResourceBytes: 4096
"#
            ),
            server(
                "Legacy.Server",
                r#"
  transport: http
  url: https://legacy.example.com/mcp
  prefix: legacy
  enabled: false
"#
            ),
            agent(
                "assistant",
                r#"
  tools: [read_file, "mcp__files__*", mcp__web__fetch, read_mcp_resource, mcp__legacy__search]
  contract: { requiredTools: [mcp__files__read_text_file, mcp__web__fetch] }
"#
            ),
        ),
    );
    let loaded = ws.load_ok(&env(&[
        ("MCP_URL", "http://127.0.0.1:3001/mcp"),
        ("MCP_TOKEN", "s3cret"),
    ]));

    let files = &loaded.mcp_servers["files"];
    assert_eq!(files.transport, McpTransport::Stdio);
    assert_eq!(files.command[0], "npx");
    assert_eq!(files.env_allow, ["NODE_OPTIONS", "_private1"]);
    assert_eq!(files.effective_prefix("files"), "files");
    assert!(mcp_filter_allows(&files.tools, "read_text_file"));
    assert!(mcp_filter_allows(&files.tools, "list_directory"));
    assert!(
        !mcp_filter_allows(&files.tools, "read_media_file"),
        "exclude wins"
    );
    assert!(
        !mcp_filter_allows(&files.tools, "write_file"),
        "not included"
    );

    let web = &loaded.mcp_servers["web"];
    assert_eq!(web.transport, McpTransport::Http);
    assert_eq!(web.url.as_deref(), Some("http://127.0.0.1:3001/mcp"));
    assert_eq!(web.headers["Authorization"], "Bearer s3cret");
    assert_eq!(web.max_resource_bytes, Some(4096));

    let legacy = &loaded.mcp_servers["Legacy.Server"];
    assert!(!legacy.enabled);
    assert_eq!(legacy.effective_prefix("Legacy.Server"), "legacy");
    assert_eq!(
        mcp_tool_name(legacy.effective_prefix("Legacy.Server"), "search"),
        "mcp__legacy__search"
    );
    assert!(mcp_tool_name("web", "fetch").starts_with(MCP_TOOL_PREFIX));

    let paths: Vec<&str> = loaded.explain().iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"McpServer/web.spec.url"), "{paths:?}");
}

#[test]
fn each_mistake_in_an_mcp_server_is_located_with_a_hint() {
    let ws = workspace();
    ws.write(
        "config/mcp.yaml",
        [
            server("no-command", "  transport: stdio\n"),
            server(
                "stdio-with-url",
                "  transport: stdio\n  command: [./server]\n  url: http://localhost/mcp\n  headers: { X-Key: k }\n",
            ),
            server(
                "empty-command",
                "  transport: stdio\n  command: []\n",
            ),
            server(
                "blank-program",
                "  transport: stdio\n  command: [\"\", --flag]\n",
            ),
            server("no-url", "  transport: http\n"),
            server("ftp", "  transport: http\n  url: ftp://files.example.com/mcp\n"),
            server("no-host", "  transport: http\n  url: \"https:///mcp\"\n"),
            server(
                "http-with-stdio-fields",
                "  transport: http\n  url: http://localhost:3001/mcp\n  command: [x]\n  env: { A: b }\n  envAllow: [HOME]\n  cwd: data\n",
            ),
            server(
                "absolute-cwd",
                "  transport: stdio\n  command: [x]\n  cwd: /etc\n",
            ),
            server(
                "escaping-cwd",
                "  transport: stdio\n  command: [x]\n  cwd: data/../../outside\n",
            ),
            server(
                "bad-prefix",
                "  transport: stdio\n  command: [x]\n  prefix: git__hub\n",
            ),
            server(
                "trailing-underscore",
                "  transport: stdio\n  command: [x]\n  prefix: files_\n",
            ),
            server("GitHub.com", "  transport: stdio\n  command: [x]\n"),
            server(
                "long-prefix",
                &format!("  transport: stdio\n  command: [x]\n  prefix: {}\n", "p".repeat(49)),
            ),
            server("files", "  transport: stdio\n  command: [x]\n"),
            server(
                "files-again",
                "  transport: stdio\n  command: [x]\n  prefix: files\n",
            ),
            server(
                "globs",
                "  transport: stdio\n  command: [x]\n  tools: { include: [\"read_[\"], exclude: [ok, \"{a,b\"] }\n",
            ),
            server(
                "env-names",
                "  transport: stdio\n  command: [x]\n  envAllow: [GOOD_NAME, 1BAD, WITH-DASH]\n",
            ),
            server(
                "zero-timeouts",
                "  transport: stdio\n  command: [x]\n  startupTimeout: 0s\n  callTimeout: 0ms\n",
            ),
        ]
        .concat(),
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    insta::assert_snapshot!(rendered(&diagnostics));
}

#[test]
fn agents_list_mcp_tools_of_declared_servers_only() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        format!(
            "{MODEL}{}{}{}{}",
            server("files", "  transport: stdio\n  command: [x]\n"),
            server(
                "web",
                "  transport: http\n  url: http://localhost:3001/mcp\n  enabled: false\n"
            ),
            agent(
                "assistant",
                r#"
  tools:
    - "mcp__files__*"
    - mcp__web__fetch
    - "mcp__fles__*"
    - mcp__github__search
    - "mcp__*"
    - mcp__files
    - mcp__files__
    - "mcp__files__["
    - "read_*"
    - read_mcp_resourse
  contract:
    requiredTools: [mcp__files__read_file, "mcp__files__*", mcp__web__search]
"#
            ),
            "\
---
apiVersion: keel/v1
kind: Tool
metadata: { name: mcp__files__extra }
spec:
  description: Shadows an MCP tool.
  impl: { kind: command, command: [x] }
---
apiVersion: keel/v1
kind: Tool
metadata: { name: read_mcp_resource }
spec:
  description: Shadows the resource reader.
  impl: { kind: command, command: [x] }
"
        ),
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    insta::assert_snapshot!(rendered(&diagnostics));
}

#[test]
fn read_mcp_resource_needs_a_declared_server() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        format!(
            "{MODEL}{}",
            agent(
                "assistant",
                "  tools: [read_file, read_mcp_resource, \"mcp__files__*\"]\n"
            )
        ),
    );
    let diagnostics = ws.diagnostics(&LoadOptions::default());
    assert_eq!(
        located(&diagnostics),
        [
            "config/a.yaml:11:22: agent `assistant` uses tool `read_mcp_resource`, but the workspace declares no MCP server",
            "config/a.yaml:11:41: agent `assistant` uses tool `mcp__files__*` of MCP server `files`, which is not declared",
        ]
    );
    assert_eq!(
        diagnostics[0].hint.as_deref(),
        Some("declare an McpServer document (`kind: McpServer`) whose resources the agent reads")
    );
    assert!(
        diagnostics[1]
            .hint
            .as_deref()
            .is_some_and(|h| h.starts_with("no McpServer is declared")),
        "{:?}",
        diagnostics[1].hint
    );
}

#[test]
fn a_server_declared_in_an_overlay_makes_its_tools_available() {
    let ws = workspace();
    ws.write(
        "config/a.yaml",
        format!(
            "{MODEL}{}",
            agent("assistant", "  tools: [mcp__db__query]\n")
        ),
    );
    let overlay = ws.write(
        "overlays/db.yaml",
        server(
            "postgres",
            "  transport: stdio\n  command: [./db-mcp]\n  prefix: db\n",
        ),
    );
    let loaded = ws.load_ok(&LoadOptions {
        overlays: vec![overlay],
        ..Default::default()
    });
    assert_eq!(
        loaded.mcp_servers["postgres"].effective_prefix("postgres"),
        "db"
    );
}
