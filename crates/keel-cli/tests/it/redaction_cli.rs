//! Redaction of what is stored, end to end (`docs/events.md#redaction`): a secret matching
//! `redaction.patterns` in a run's input, in the model's answer and in tool arguments, the
//! contents an MCP server's `write_file` writes and the values of `shell`'s `env` reach none
//! of `keel runs show`, `keel sessions show`, the SQLite file's bytes or the JSONL mirror.

use keel_test_support::test_clients::mcp_server_bin;
use keel_test_support::{MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

const SECRET: &str = "tok_a1b2c3d4e5f6";
const BODY: &str = "FILE-BODY-7f3c: the contents nobody may read in the log\n";
const ENV_VALUE: &str = "ENV-VALUE-51d0-not-for-the-log";

/// Every file under `dir` (the database with its WAL, the mirror), as bytes.
fn bytes_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(bytes_under(&path));
        } else {
            files.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    files
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_written_contents_and_env_values_are_in_no_stored_record() {
    let mock = MockLlm::start().await;
    let write = json!({ "path": "notes.txt", "content": BODY }).to_string();
    let shell = json!({ "command": "true", "env": { "DEPLOY_VALUE": ENV_VALUE } }).to_string();
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "mcp__fs__write_file", [write.as_str()]),
        MockToolCall::new("c2", "shell", [shell.as_str()]),
    ]));
    mock.push(MockResponse::text([format!("Done. The key was {SECRET}.")]));
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .runtime("{ defaultAgent: a, redaction: { patterns: ['tok_[a-z0-9]{12}'] } }")
        .agent("a", "{ model: mock, tools: [\"mcp__fs__*\", shell] }")
        .document(
            "McpServer",
            "fs",
            &format!(
                "transport: stdio\ncommand: [\"{}\", \"./data\"]\n",
                mcp_server_bin("mcp-server-filesystem").display()
            ),
        )
        .file("data/.keep", "")
        .policy(
            "all",
            "rules: [{ tool: \"mcp__fs__*\", decision: allow }, { tool: shell, decision: allow }]",
        )
        .build();
    let keel = keel_in(&ws);

    let input = format!("Store my key {SECRET} in the notes");
    let run = keel.run(["run", "--session", "s1", &input]);
    assert!(run.success(), "{}", run.stderr);
    // The tools got the real arguments.
    assert_eq!(
        std::fs::read_to_string(ws.join("data/notes.txt")).unwrap(),
        BODY
    );
    // The model got the real input.
    let requests = mock.requests();
    let first = requests
        .first()
        .expect("the model was asked")
        .body
        .to_string();
    assert!(first.contains(SECRET), "{first}");

    let id = keel.newest_run_id();
    let shown = keel.run(["runs", "show", &id]);
    assert!(shown.success(), "{}", shown.stderr);
    let session = keel.run(["sessions", "show", "s1"]);
    assert!(session.success(), "{}", session.stderr);
    let session_json = keel.run(["sessions", "show", "s1", "--json"]);
    for (what, text) in [
        ("runs show", &shown.stdout),
        ("sessions show", &session.stdout),
        ("sessions show --json", &session_json.stdout),
    ] {
        assert!(!text.contains(SECRET), "{what}: {text}");
        assert!(text.contains("[REDACTED]"), "{what}: {text}");
        assert!(!text.contains("FILE-BODY-7f3c"), "{what}: {text}");
        assert!(!text.contains(ENV_VALUE), "{what}: {text}");
    }

    let stored = bytes_under(&ws.join(".keel"));
    assert!(
        stored.iter().any(|(p, _)| p.ends_with("keel.db")),
        "{stored:?}"
    );
    for (path, bytes) in &stored {
        for needle in [SECRET, "FILE-BODY-7f3c", ENV_VALUE] {
            assert!(!contains(bytes, needle), "{needle} in {}", path.display());
        }
    }

    // The events record the written contents and the env values by size and sha256.
    let events = keel.newest_run_events();
    let start = |tool: &str| -> Value {
        events
            .iter()
            .find(|e| e["event"]["phase"] == "agent.tool.start" && e["event"]["toolId"] == tool)
            .map(|e| e["event"]["args"].clone())
            .unwrap_or_else(|| panic!("no start of {tool}: {events:?}"))
    };
    let written = start("mcp__fs__write_file");
    assert_eq!(written["path"], "notes.txt");
    assert_eq!(written["content"]["size"], BODY.len());
    assert_eq!(
        written["content"]["sha256"],
        "e951e30a1a7c63978dbff424c0690276035d5dbe6ab262baf2c2a6ac05f96aad"
    );
    let env = &start("shell")["env"]["DEPLOY_VALUE"];
    assert_eq!(env["size"], ENV_VALUE.len(), "{env}");
    assert!(env["sha256"].is_string(), "{env}");
}
