//! The sandbox with real servers and the operator's view of it: the reference MCP server
//! `server-filesystem` (npm) works under `workspace-write` with its folder, its start
//! recorded with the sandbox it runs in; `keel doctor` reports the machine, the profiles, the
//! store and the MCP programs (snapshotted, the machine-dependent parts masked).

use std::io::Write as _;
use std::path::Path;

use keel_test_support::test_clients::mcp_server_bin;
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

/// A workspace whose agent may use `server-filesystem` on `./data`, sandboxed.
fn filesystem_workspace(namespaces: &str) -> TempWorkspace {
    let bin = mcp_server_bin("mcp-server-filesystem");
    // The server's installation (its package and node_modules) is read, nothing else outside.
    let prefix = bin.ancestors().nth(3).unwrap().to_path_buf();
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a, sandbox: { filesystem: workspace-write, network: deny, limits: { processes: 64 } } }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "hi"}]}]}))
        .agent("a", "{ model: m, tools: [\"mcp__fs__*\"] }")
        .policy("open", "rules: [{ tool: \"*\", decision: allow }]")
        .document(
            "McpServer",
            "fs",
            &format!(
                "transport: stdio\ncommand: [\"{}\", \"./data\"]\nsandbox: {{ readPaths: [\"{}\"], namespaces: {namespaces} }}\n",
                bin.display(),
                prefix.display()
            ),
        )
        .file("data/notes.txt", "hello from the filesystem server\n")
        .build()
}

fn direct_result(out: &keel_test_support::CliOutput) -> Value {
    out.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "runtime.tool.direct.completed")
        .unwrap_or_else(|| panic!("no result: {}\n{}", out.stdout, out.stderr))
}

#[test]
fn server_filesystem_works_under_workspace_write_with_its_folder() {
    server_filesystem_works("off", "landlock");
    match keel_test_support::test_clients::bubblewrap() {
        Ok(_) => server_filesystem_works("on", "bubblewrap"),
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "the bubblewrap mode is not tested here: {why}"
            );
        }
    }
}

/// `server-filesystem` reads and writes its folder with `namespaces` set as given, its start
/// recorded with `mechanism`.
fn server_filesystem_works(namespaces: &str, mechanism: &str) {
    let ws = filesystem_workspace(namespaces);
    let keel = keel_in(&ws);
    let read = keel.run([
        "tools",
        "call",
        "mcp__fs__read_text_file",
        "--args",
        r#"{"path": "notes.txt"}"#,
        "--json",
    ]);
    let result = direct_result(&read);
    assert_eq!(result["ok"], true, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("hello from the filesystem server"),
        "{result}"
    );
    // Its start says which sandbox it runs in.
    let ready = read
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "runtime.mcp.lifecycle" && e["lifecycle"] == "ready")
        .unwrap_or_else(|| panic!("{}", read.stdout));
    let detail = ready["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("sandbox: filesystem workspace-write, network deny; by ")
            && detail.contains(mechanism),
        "{detail}"
    );
    let write = keel.run([
        "tools",
        "call",
        "mcp__fs__write_file",
        "--args",
        r#"{"path": "out.txt", "content": "written in the sandbox"}"#,
        "--json",
    ]);
    assert_eq!(direct_result(&write)["ok"], true, "{}", write.stdout);
    assert_eq!(ws.read("data/out.txt"), "written in the sandbox");
}

#[test]
fn doctor_reports_the_machine_the_profiles_the_store_and_the_servers() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a, sandbox: { filesystem: workspace-write, network: deny } }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "hi"}]}]}))
        .agent(
            "a",
            "{ model: m, tools: [shell], sandbox: { network: allow, limits: { processes: 64, memory: 1GiB } } }",
        )
        .tool(
            "loose",
            "description: Runs unconfined where the machine lacks a mechanism.\nschema: { type: object }\nimpl: { kind: command, command: [cat] }\nsandbox: { filesystem: read-only, fallback: warn }\n",
        )
        .document(
            "McpServer",
            "gone",
            "transport: stdio\ncommand: [\"keel-no-such-server\"]\n",
        )
        .build();
    // Bubblewrap hidden, so the profiles read the same whether it is installed or not.
    let keel = keel_in(&ws).env("KEEL_SANDBOX_HIDE", "bwrap");
    let out = keel.run(["doctor"]);
    // The missing server's program makes the workspace not ready.
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    insta::with_settings!({filters => vec![
        (r"(?m)^  (landlock|seccomp|user namespaces|bubblewrap|cgroup) +.*$", "  $1 [as this machine has it]"),
        (r"ABI \d+", "ABI [n]"),
        (r"cgroup pids|rlimit nproc", "[process limit]"),
        (r"sqlite \S+keel\.db", "sqlite [workspace]/.keel/keel.db"),
        (r"schema version \d+ \(this keel: \d+\)", "schema version [n] (this keel: [n])"),
    ]}, {
        insta::assert_snapshot!("doctor", out.stdout);
    });

    // The JSON report says the same, and a machine hiding seccomp refuses the agent's profile.
    let hidden = keel_in(&ws).env("KEEL_SANDBOX_HIDE", "seccomp,bwrap");
    let report: Value = serde_json::from_str(&hidden.run(["doctor", "--json"]).stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["machine"]["seccomp"], false);
    let agent = report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scope"] == "agent")
        .unwrap();
    assert_eq!(agent["enforceable"], false, "{agent}");
    let loose = report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "loose")
        .unwrap();
    assert_eq!(
        loose["enforceable"], true,
        "fallback: warn runs anyway: {loose}"
    );
    assert!(
        Path::new(ws.path()).join(".keel").exists(),
        "the store was opened"
    );
}
