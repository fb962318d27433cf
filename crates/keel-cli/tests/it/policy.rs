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
