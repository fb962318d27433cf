//! `edit_file` (exact replacement with clear errors) and `glob` (files by path pattern) on
//! real files.

use std::os::unix::fs::PermissionsExt;

use keel_types::ToolError;
use serde_json::json;

use crate::{Fixture, call, ctx, ctx_with_cap, text, tool, write};

fn read(fx: &Fixture, rel: &str) -> String {
    std::fs::read_to_string(fx.root().join(rel)).unwrap()
}

#[tokio::test]
async fn edit_file_replaces_a_unique_match() {
    let fx = Fixture::create();
    let out = text(
        "edit_file",
        fx.root(),
        json!({"path": "src/lib.rs", "old_string": "\"Hello\"", "new_string": "\"Bye\""}),
    )
    .await;
    assert_eq!(out, "replaced 1 occurrence in src/lib.rs");
    assert_eq!(
        read(&fx, "src/lib.rs"),
        "fn main() {\n    println!(\"Bye\");\n}\n"
    );
}

#[tokio::test]
async fn edit_file_says_when_the_text_is_absent() {
    let fx = Fixture::create();
    let err = call(
        "edit_file",
        fx.root(),
        json!({"path": "a.txt", "old_string": "delta", "new_string": "x"}),
    )
    .await
    .unwrap_err();
    let ToolError::Failed(message) = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.starts_with("`old_string` was not found in a.txt"),
        "{message}"
    );
    assert_eq!(read(&fx, "a.txt"), "alpha\nbeta\ngamma\n");
}

#[tokio::test]
async fn edit_file_refuses_an_ambiguous_match_unless_replace_all() {
    let fx = Fixture::create();
    write(fx.root(), "notes.txt", "todo: a\ntodo: b\ntodo: c\n");
    let err = call(
        "edit_file",
        fx.root(),
        json!({"path": "notes.txt", "old_string": "todo", "new_string": "done"}),
    )
    .await
    .unwrap_err();
    let ToolError::Failed(message) = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.starts_with("`old_string` appears 3 times in notes.txt"),
        "{message}"
    );
    assert!(
        message.contains("give more context") && message.contains("replace_all"),
        "{message}"
    );
    assert_eq!(read(&fx, "notes.txt"), "todo: a\ntodo: b\ntodo: c\n");

    let out = text(
        "edit_file",
        fx.root(),
        json!({"path": "notes.txt", "old_string": "todo", "new_string": "done", "replace_all": true}),
    )
    .await;
    assert_eq!(out, "replaced 3 occurrences in notes.txt");
    assert_eq!(read(&fx, "notes.txt"), "done: a\ndone: b\ndone: c\n");
}

#[tokio::test]
async fn edit_file_with_more_context_picks_one_match() {
    let fx = Fixture::create();
    write(fx.root(), "notes.txt", "todo: a\ntodo: b\n");
    text(
        "edit_file",
        fx.root(),
        json!({"path": "notes.txt", "old_string": "todo: b", "new_string": ""}),
    )
    .await;
    assert_eq!(read(&fx, "notes.txt"), "todo: a\n\n");
}

#[tokio::test]
async fn edit_file_keeps_permissions_and_edits_through_inner_links() {
    let fx = Fixture::create();
    write(fx.root(), "run.sh", "echo old\n");
    let script = fx.root().join("run.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o751)).unwrap();
    text(
        "edit_file",
        fx.root(),
        json!({"path": "run.sh", "old_string": "old", "new_string": "new"}),
    )
    .await;
    assert_eq!(read(&fx, "run.sh"), "echo new\n");
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o751);

    let out = text(
        "edit_file",
        fx.root(),
        json!({"path": "inner_link", "old_string": "beta", "new_string": "BETA"}),
    )
    .await;
    assert_eq!(out, "replaced 1 occurrence in a.txt");
    assert_eq!(read(&fx, "a.txt"), "alpha\nBETA\ngamma\n");
    assert!(
        std::fs::symlink_metadata(fx.root().join("inner_link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn edit_file_reports_missing_binary_and_no_op_edits() {
    let fx = Fixture::create();
    let err = call(
        "edit_file",
        fx.root(),
        json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, ToolError::Io("`nope.txt` does not exist".to_owned()));

    write(fx.root(), "blob.bin", b"ab\0cd");
    let err = call(
        "edit_file",
        fx.root(),
        json!({"path": "blob.bin", "old_string": "ab", "new_string": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ToolError::Io(m) if m.contains("binary")),
        "{err:?}"
    );

    let args = json!({"path": "a.txt", "old_string": "beta", "new_string": "beta"});
    let issues = tool("edit_file").check(&ctx(fx.root()), &args);
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/new_string");
    assert!(call("edit_file", fx.root(), args).await.is_err());
}

#[tokio::test]
async fn edit_file_leaves_no_temporary_files() {
    let fx = Fixture::create();
    text(
        "edit_file",
        fx.root(),
        json!({"path": "src/nested/deep.txt", "old_string": "deep", "new_string": "shallow"}),
    )
    .await;
    let names: Vec<_> = std::fs::read_dir(fx.root().join("src/nested"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["deep.txt"]);
}

#[tokio::test]
async fn glob_finds_files_by_pattern_relative_to_the_root() {
    let fx = Fixture::create();
    write(fx.root(), "src/nested/x.rs", "");
    write(fx.root(), "config/a.yaml", "");
    write(fx.root(), "config/b.yml", "");
    write(fx.root(), "config/c.json", "");

    let out = text("glob", fx.root(), json!({"pattern": "**/*.rs"})).await;
    assert_eq!(out, "src/lib.rs\nsrc/nested/x.rs");
    // `*` stays within one directory.
    let out = text("glob", fx.root(), json!({"pattern": "*.txt"})).await;
    assert_eq!(out, "a.txt");
    let out = text("glob", fx.root(), json!({"pattern": "config/*.{yaml,yml}"})).await;
    assert_eq!(out, "config/a.yaml\nconfig/b.yml");
    // Under a sub-path, the pattern is relative to it; results stay relative to the root.
    let out = text(
        "glob",
        fx.root(),
        json!({"pattern": "**/*.txt", "path": "src"}),
    )
    .await;
    assert_eq!(out, "src/nested/deep.txt");
}

#[tokio::test]
async fn glob_skips_state_folders_and_links() {
    let fx = Fixture::create();
    let out = text("glob", fx.root(), json!({"pattern": "**"})).await;
    assert_eq!(out, "a.txt\nsrc/lib.rs\nsrc/nested/deep.txt");
    let out = text("glob", fx.root(), json!({"pattern": ".keel/*"})).await;
    assert_eq!(out, "no files match `.keel/*`");
}

#[tokio::test]
async fn glob_is_bounded() {
    let fx = Fixture::create();
    for i in 0..30 {
        write(fx.root(), &format!("many/f{i:02}.txt"), "");
    }
    let out = text(
        "glob",
        fx.root(),
        json!({"pattern": "many/*", "maxResults": 5}),
    )
    .await;
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(
        lines[..5],
        [
            "many/f00.txt",
            "many/f01.txt",
            "many/f02.txt",
            "many/f03.txt",
            "many/f04.txt"
        ]
    );
    assert_eq!(
        lines[5],
        "[stopped after 5 files; narrow the pattern or raise maxResults]"
    );

    let out = tool("glob")
        .call(&ctx_with_cap(fx.root(), 400), json!({"pattern": "many/*"}))
        .await
        .unwrap()
        .content;
    assert!(out.len() <= 400, "{}", out.len());
    assert!(out.ends_with("files; narrow the pattern]"), "{out}");
}

#[tokio::test]
async fn glob_reports_bad_patterns_and_non_directories() {
    let fx = Fixture::create();
    let issues = tool("glob").check(&ctx(fx.root()), &json!({"pattern": "[z"}));
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "/pattern");
    let err = call("glob", fx.root(), json!({"pattern": "[z"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.starts_with("invalid `pattern`")),
        "{err:?}"
    );
    let err = call("glob", fx.root(), json!({"pattern": "*", "path": "a.txt"}))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Io("`a.txt` is not a directory".to_owned()));
}
