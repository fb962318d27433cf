//! `keel policy check` explains which rule decides a call.

use keel_test_support::WorkspaceBuilder;
use serde_json::json;

use crate::common::keel_in;

#[test]
fn policy_check_names_the_deciding_rule() {
    let ws = WorkspaceBuilder::new()
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "x"}]}]}))
        .agent("a", "{ model: m, tools: [shell, read_file, write_file] }")
        .policy(
            "default",
            r#"
            rules:
              - { tool: shell, args: { command: "git status*" }, decision: allow }
              - { tool: shell, args: { command: "rm *" }, decision: deny, reason: "never delete" }
            "#,
        )
        .build();
    let keel = keel_in(&ws);
    let check = |tool: &str, args: &str, extra: &[&str]| {
        let mut argv = vec!["policy", "check", tool, "--args", args];
        argv.extend_from_slice(extra);
        keel.run(argv)
    };

    let allowed = check("shell", r#"{"command":"git status --short"}"#, &[]);
    assert_eq!(allowed.code, Some(0), "{}", allowed.stderr);
    assert!(
        allowed.stdout.contains("Policy/default rules[0]"),
        "{}",
        allowed.stdout
    );

    let denied = check("shell", r#"{"command":"rm -rf /"}"#, &[]);
    assert_eq!(denied.code, Some(1));
    assert!(denied.stdout.contains("never delete"), "{}", denied.stdout);

    let asked = check("shell", r#"{"command":"make"}"#, &[]);
    assert_eq!(asked.code, Some(3), "{}", asked.stdout);

    let read = check("read_file", r#"{"path":"x"}"#, &[]);
    assert_eq!(read.code, Some(0), "read-only tools are allowed by default");

    let plan = check(
        "write_file",
        r#"{"path":"x","content":""}"#,
        &["--mode", "plan"],
    );
    assert_eq!(
        plan.code,
        Some(1),
        "plan mode runs nothing with side effects"
    );

    assert_eq!(check("shell", "not json", &[]).code, Some(2));

    // Arguments from a file, like `tools call`.
    std::fs::write(ws.join("args.json"), r#"{"command":"rm -rf /"}"#).unwrap();
    let from_file = check("shell", "@args.json", &[]);
    assert_eq!(from_file.code, Some(1), "{}", from_file.stderr);
    assert!(
        from_file.stdout.contains("never delete"),
        "{}",
        from_file.stdout
    );
    let missing = check("shell", "@nowhere.json", &[]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.contains("nowhere.json"),
        "{}",
        missing.stderr
    );
}

/// `keel policy check` and a real call agree on an MCP tool its server marks read-only
/// (`readOnlyHint`): allowed without asking, by the same decision path.
#[test]
fn policy_check_and_a_real_call_agree_on_a_read_only_mcp_tool() {
    let command = json!([
        "python3",
        keel_test_support::test_clients::mcp_fault_server()
            .display()
            .to_string()
    ]);
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a }")
        .scripted_model("m", &json!({"conversations": [{"steps": [{"text": "x"}]}]}))
        .agent("a", "{ model: m, tools: [\"mcp__f__*\"] }")
        .document(
            "McpServer",
            "f",
            &format!("transport: stdio\ncommand: {command}\nstartupTimeout: 60s\n"),
        )
        .build();
    let keel = keel_in(&ws);

    let checked = keel.run([
        "policy",
        "check",
        "mcp__f__echo",
        "--args",
        r#"{"text":"hi"}"#,
    ]);
    assert_eq!(
        checked.code,
        Some(0),
        "{}{}",
        checked.stdout,
        checked.stderr
    );
    assert!(
        checked.stdout.contains("decision: allow"),
        "{}",
        checked.stdout
    );
    // A tool without the hint still asks, in both.
    let slow = keel.run(["policy", "check", "mcp__f__slow", "--args", r#"{"ms":1}"#]);
    assert_eq!(slow.code, Some(3), "{}{}", slow.stdout, slow.stderr);

    // The real call runs without asking.
    let called = keel.run([
        "tools",
        "call",
        "mcp__f__echo",
        "--args",
        r#"{"text":"hi"}"#,
    ]);
    assert_eq!(called.code, Some(0), "{}{}", called.stdout, called.stderr);
    assert!(called.stdout.contains("hi"), "{}", called.stdout);
    let events = keel.newest_run_events();
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "runtime.approval.requested"
                || e["type"] == "runtime.policy.decided"),
        "{events:#?}"
    );
}
