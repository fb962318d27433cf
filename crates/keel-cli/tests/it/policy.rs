//! `keel policy check` explains which rule decides a call.

use crate::common::{run, stderr, stdout};

#[test]
fn policy_check_names_the_deciding_rule() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/all.yaml"),
        r#"apiVersion: keel/v1
kind: Model
metadata: { name: m }
spec: { provider: scripted, script: s.json }
---
apiVersion: keel/v1
kind: Agent
metadata: { name: a }
spec: { model: m, tools: [shell, read_file, write_file] }
---
apiVersion: keel/v1
kind: Policy
metadata: { name: default }
spec:
  rules:
    - { tool: shell, args: { command: "git status*" }, decision: allow }
    - { tool: shell, args: { command: "rm *" }, decision: deny, reason: "never delete" }
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.json"),
        r#"{"conversations":[{"steps":[{"text":"x"}]}]}"#,
    )
    .unwrap();
    let ws = dir.path().to_str().unwrap();
    let check = |tool: &str, args: &str, extra: &[&str]| {
        let mut argv = vec!["policy", "check", "-w", ws, tool, "--args", args];
        argv.extend_from_slice(extra);
        run(&argv)
    };

    let allowed = check("shell", r#"{"command":"git status --short"}"#, &[]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert!(
        stdout(&allowed).contains("Policy/default rules[0]"),
        "{}",
        stdout(&allowed)
    );

    let denied = check("shell", r#"{"command":"rm -rf /"}"#, &[]);
    assert_eq!(denied.status.code(), Some(1));
    assert!(
        stdout(&denied).contains("never delete"),
        "{}",
        stdout(&denied)
    );

    let asked = check("shell", r#"{"command":"make"}"#, &[]);
    assert_eq!(asked.status.code(), Some(3), "{}", stdout(&asked));

    let read = check("read_file", r#"{"path":"x"}"#, &[]);
    assert_eq!(
        read.status.code(),
        Some(0),
        "read-only tools are allowed by default"
    );

    let plan = check(
        "write_file",
        r#"{"path":"x","content":""}"#,
        &["--mode", "plan"],
    );
    assert_eq!(
        plan.status.code(),
        Some(1),
        "plan mode runs nothing with side effects"
    );

    assert_eq!(check("shell", "not json", &[]).status.code(), Some(2));
}
