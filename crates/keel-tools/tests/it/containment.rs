//! Every file tool, and `shell`'s `cwd`, is contained twice: `Tool::check` (what the gateway
//! runs before a call) raises an issue for a path leaving the workspace — through `..`, an
//! absolute path, or a symlink to a file or directory outside — and the call itself refuses
//! it too, touching nothing outside.

use keel_tools::builtin::builtin;
use keel_types::{Issue, ToolError};
use serde_json::{Value, json};

use crate::{Fixture, ctx, write};

/// Paths that lead outside the workspace.
fn escaping_paths(fx: &Fixture) -> Vec<String> {
    vec![
        "..".to_owned(),
        "../secret.txt".to_owned(),
        "src/../../secret.txt".to_owned(),
        "src/..".to_owned(),
        "/etc".to_owned(),
        "/etc/passwd".to_owned(),
        fx.outside_file().to_str().unwrap().to_owned(),
        fx.outside.path().to_str().unwrap().to_owned(),
        "link_file".to_owned(),
        "link_dir".to_owned(),
        "./link_dir/".to_owned(),
        "link_dir/secret.txt".to_owned(),
        // Missing below an outside link: refused rather than reported missing.
        "link_dir/missing.txt".to_owned(),
    ]
}

/// Builds a tool's arguments around a path.
type ArgsFor = fn(&str) -> Value;

/// Each tool with the argument holding the path, and its arguments for a path.
fn calls() -> Vec<(&'static str, &'static str, ArgsFor)> {
    vec![
        ("read_file", "path", |p| json!({"path": p})),
        (
            "list_dir",
            "path",
            |p| json!({"path": p, "recursive": true}),
        ),
        ("grep", "path", |p| json!({"pattern": "secret", "path": p})),
        (
            "write_file",
            "path",
            |p| json!({"path": p, "content": "owned"}),
        ),
        (
            "edit_file",
            "path",
            |p| json!({"path": p, "old_string": "top secret", "new_string": "owned"}),
        ),
        ("glob", "path", |p| json!({"pattern": "**/*", "path": p})),
        (
            "shell",
            "cwd",
            |p| json!({"command": "echo owned > owned.txt; cat secret.txt", "cwd": p}),
        ),
    ]
}

fn assert_blocked(issues: &[Issue], tool: &str, key: &str, path: &str) {
    assert_eq!(issues.len(), 1, "{tool} {path}: {issues:?}");
    let issue = &issues[0];
    assert_eq!(issue.path, format!("/{key}"), "{tool} {path}");
    assert_eq!(issue.found, path, "{tool} {path}");
    assert!(
        issue.message.contains("outside the workspace"),
        "{tool} {path}: {}",
        issue.message
    );
}

#[test]
fn check_blocks_every_escape_for_every_file_tool_and_shell_cwd() {
    let fx = Fixture::create();
    let context = ctx(fx.root());
    for (name, key, args) in calls() {
        let tool = builtin(name).unwrap();
        for path in escaping_paths(&fx) {
            let issues = tool.check(&context, &args(&path));
            assert_blocked(&issues, name, key, &path);
        }
    }
}

#[tokio::test]
async fn execution_refuses_every_escape_too_and_touches_nothing_outside() {
    let fx = Fixture::create();
    let context = ctx(fx.root());
    for (name, _, args) in calls() {
        let tool = builtin(name).unwrap();
        for path in escaping_paths(&fx) {
            let err = tool.call(&context, args(&path)).await.unwrap_err();
            assert_eq!(err, ToolError::PathEscape(path.clone()), "{name} {path}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(fx.outside_file()).unwrap(),
        "top secret hello\n"
    );
    let outside: Vec<_> = std::fs::read_dir(fx.outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["secret.txt"]);
}

#[test]
fn paths_inside_the_workspace_raise_no_issue() {
    let fx = Fixture::create();
    let context = ctx(fx.root());
    let inside_abs = fx.root().join("src").to_str().unwrap().to_owned();
    for (name, _, args) in calls() {
        let tool = builtin(name).unwrap();
        for path in ["src", "./src/nested", inside_abs.as_str()] {
            // Directories are the wrong kind for some tools; that is for the call to say.
            let issues = tool.check(&context, &args(path));
            assert_eq!(issues, [], "{name} {path}");
        }
        if tool.read_only() || name == "shell" {
            assert_eq!(tool.check(&context, &args(".")), [], "{name} .");
        }
    }
    // A file that does not exist yet is the tool's business, not an issue.
    let issues = builtin("read_file")
        .unwrap()
        .check(&context, &json!({"path": "missing.txt"}));
    assert_eq!(issues, []);
    // A symlink that stays inside is fine.
    let issues = builtin("edit_file").unwrap().check(
        &context,
        &json!({"path": "inner_link", "old_string": "alpha", "new_string": "ALPHA"}),
    );
    assert_eq!(issues, []);
}

#[test]
fn keel_state_cannot_be_written_or_edited_and_check_says_so() {
    let fx = Fixture::create();
    let context = ctx(fx.root());
    for (name, args) in [
        (
            "write_file",
            json!({"path": ".keel/keel.db", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": ".keel/keel.db", "old_string": "state", "new_string": "x"}),
        ),
    ] {
        let issues = builtin(name).unwrap().check(&context, &args);
        assert_eq!(issues.len(), 1, "{name}: {issues:?}");
        assert_eq!(issues[0].path, "/path");
        assert!(
            issues[0].message.contains("`.keel/`"),
            "{}",
            issues[0].message
        );
    }
}

#[tokio::test]
async fn edit_file_cannot_edit_keel_state() {
    let fx = Fixture::create();
    let err = builtin("edit_file")
        .unwrap()
        .call(
            &ctx(fx.root()),
            json!({"path": ".keel/keel.db", "old_string": "state", "new_string": "x"}),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.contains("`.keel/`")),
        "{err:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join(".keel/keel.db")).unwrap(),
        "state hello\n"
    );
}

#[tokio::test]
async fn glob_walks_do_not_follow_links_out() {
    let fx = Fixture::create();
    write(fx.outside.path(), "deep/more.txt", "x");
    let out = builtin("glob")
        .unwrap()
        .call(&ctx(fx.root()), json!({"pattern": "**/*"}))
        .await
        .unwrap()
        .content;
    assert!(!out.contains("secret"), "{out}");
    assert!(!out.contains("more.txt"), "{out}");
    assert!(!out.contains(".keel"), "{out}");
}

#[test]
fn glob_patterns_cannot_climb_out_or_be_absolute() {
    let fx = Fixture::create();
    let tool = builtin("glob").unwrap();
    for pattern in ["../*", "src/../../*", "/etc/*"] {
        let issues = tool.check(&ctx(fx.root()), &json!({ "pattern": pattern }));
        assert_eq!(issues.len(), 1, "{pattern}: {issues:?}");
        assert_eq!(issues[0].path, "/pattern");
    }
}

#[test]
fn oversized_content_is_blocked_by_check() {
    let fx = Fixture::create();
    let big = "x".repeat(keel_tools::builtin::MAX_WRITE_BYTES + 1);
    let issues = builtin("write_file")
        .unwrap()
        .check(&ctx(fx.root()), &json!({"path": "big.txt", "content": big}));
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/content");
    assert!(issues[0].message.contains("over the limit"), "{issues:?}");
    let issues = builtin("edit_file").unwrap().check(
        &ctx(fx.root()),
        &json!({"path": "a.txt", "old_string": "alpha", "new_string": big}),
    );
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/new_string");
}
