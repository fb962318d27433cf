//! Read before edit: in a run that tracks the files it has seen, `write_file` and `edit_file`
//! refuse to change an existing file the run has not read (or written) first.

use std::path::Path;
use std::sync::Arc;

use keel_tools::builtin::builtins;
use keel_types::{SeenFiles, Tool, ToolContext, ToolError};
use keel_workspace::BuiltinToolSettings;
use serde_json::{Value, json};

use crate::{Fixture, ctx, tool};

/// A run's context: it remembers the files it has seen.
fn run_ctx(root: &Path) -> ToolContext {
    ToolContext {
        seen_files: Some(SeenFiles::default()),
        ..ctx(root)
    }
}

async fn run(name: &str, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
    tool(name).call(ctx, args).await.map(|out| out.content)
}

fn refused(result: Result<String, ToolError>) -> String {
    match result {
        Err(ToolError::Failed(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unread_existing_file_is_neither_overwritten_nor_edited() {
    let fx = Fixture::create();
    let ctx = run_ctx(fx.root());
    let write = run(
        "write_file",
        &ctx,
        json!({"path": "a.txt", "content": "gone"}),
    )
    .await;
    let message = refused(write);
    assert!(
        message.contains("`a.txt` already exists and this run has not read it"),
        "{message}"
    );
    assert!(message.contains("read_file"), "{message}");
    let edit = run(
        "edit_file",
        &ctx,
        json!({"path": "a.txt", "old_string": "beta", "new_string": "BETA"}),
    )
    .await;
    refused(edit);
    let on_disk = std::fs::read_to_string(fx.root().join("a.txt")).unwrap();
    assert_eq!(on_disk, "alpha\nbeta\ngamma\n");
}

#[tokio::test]
async fn a_file_read_under_any_spelling_may_then_be_changed() {
    let fx = Fixture::create();
    let ctx = run_ctx(fx.root());
    // A window of it is enough, and the spelling does not matter (keys are canonical).
    run("read_file", &ctx, json!({"path": "./a.txt", "limit": 1}))
        .await
        .unwrap();
    run(
        "edit_file",
        &ctx,
        json!({"path": "a.txt", "old_string": "beta", "new_string": "BETA"}),
    )
    .await
    .unwrap();
    let abs = fx.root().join("a.txt");
    run(
        "write_file",
        &ctx,
        json!({"path": abs.to_str().unwrap(), "content": "new\n"}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(abs).unwrap(), "new\n");
    // Another file is still unread.
    let other = run(
        "write_file",
        &ctx,
        json!({"path": "src/lib.rs", "content": "x"}),
    )
    .await;
    refused(other);
}

#[tokio::test]
async fn a_file_the_run_created_counts_as_seen() {
    let fx = Fixture::create();
    let ctx = run_ctx(fx.root());
    run(
        "write_file",
        &ctx,
        json!({"path": "notes/new.md", "content": "one\n"}),
    )
    .await
    .unwrap();
    run(
        "edit_file",
        &ctx,
        json!({"path": "notes/new.md", "old_string": "one", "new_string": "two"}),
    )
    .await
    .unwrap();
    run(
        "write_file",
        &ctx,
        json!({"path": "notes/new.md", "content": "three\n"}),
    )
    .await
    .unwrap();
    let on_disk = std::fs::read_to_string(fx.root().join("notes/new.md")).unwrap();
    assert_eq!(on_disk, "three\n");
}

#[tokio::test]
async fn a_failed_read_does_not_count() {
    let fx = Fixture::create();
    std::fs::write(fx.root().join("blob.bin"), b"\0\x01\x02").unwrap();
    let ctx = run_ctx(fx.root());
    assert!(
        run("read_file", &ctx, json!({"path": "blob.bin"}))
            .await
            .is_err()
    );
    let write = run(
        "write_file",
        &ctx,
        json!({"path": "blob.bin", "content": "text"}),
    )
    .await;
    refused(write);
}

#[tokio::test]
async fn the_check_is_skipped_without_a_record_or_when_configured_off() {
    let fx = Fixture::create();
    // No record: an operator's direct call.
    run(
        "write_file",
        &ctx(fx.root()),
        json!({"path": "a.txt", "content": "1"}),
    )
    .await
    .unwrap();
    // `tools.writeFile.requireRead: false` / `tools.editFile.requireRead: false`.
    let mut settings = BuiltinToolSettings::default();
    settings.write_file.require_read = false;
    settings.edit_file.require_read = false;
    let tools = builtins(&settings);
    let find = |name: &str| -> Arc<dyn Tool> {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .cloned()
            .unwrap()
    };
    let ctx = run_ctx(fx.root());
    find("write_file")
        .call(&ctx, json!({"path": "src/lib.rs", "content": "a b"}))
        .await
        .unwrap();
    find("edit_file")
        .call(
            &ctx,
            json!({"path": "src/nested/deep.txt", "old_string": "deep", "new_string": "shallow"}),
        )
        .await
        .unwrap();
    let on_disk = std::fs::read_to_string(fx.root().join("src/nested/deep.txt")).unwrap();
    assert_eq!(on_disk, "shallow hello\n");
}
