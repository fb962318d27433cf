//! What each file tool does with ordinary files.

use std::os::unix::fs::PermissionsExt;

use keel_types::ToolError;
use serde_json::json;

use crate::{Fixture, call, ctx_with_cap, text, tool, write};

#[test]
fn specs_are_strict_schemas_and_read_only_flags_are_right() {
    for (name, read_only) in [
        ("read_file", true),
        ("list_dir", true),
        ("grep", true),
        ("write_file", false),
    ] {
        let tool = tool(name);
        let spec = tool.spec();
        assert_eq!(spec.name, name);
        assert!(!spec.description.is_empty());
        assert_eq!(spec.parameters["type"], "object");
        assert_eq!(spec.parameters["additionalProperties"], false);
        for (prop, schema) in spec.parameters["properties"].as_object().unwrap() {
            assert!(schema["description"].is_string(), "{name}.{prop}");
        }
        assert_eq!(tool.read_only(), read_only, "{name}");
    }
}

#[tokio::test]
async fn read_file_returns_the_text() {
    let fx = Fixture::create();
    let out = text("read_file", fx.root(), json!({"path": "a.txt"})).await;
    assert_eq!(out, "alpha\nbeta\ngamma\n");
    let nested = text(
        "read_file",
        fx.root(),
        json!({"path": "./src/nested/deep.txt"}),
    )
    .await;
    assert_eq!(nested, "deep hello\n");
}

#[tokio::test]
async fn read_file_accepts_absolute_paths_inside_and_symlinks_inside() {
    let fx = Fixture::create();
    let abs = fx.root().join("a.txt");
    let out = text(
        "read_file",
        fx.root(),
        json!({"path": abs.to_str().unwrap()}),
    )
    .await;
    assert_eq!(out, "alpha\nbeta\ngamma\n");
    let out = text("read_file", fx.root(), json!({"path": "inner_link"})).await;
    assert_eq!(out, "alpha\nbeta\ngamma\n");
}

#[tokio::test]
async fn read_file_window_notes_where_to_continue() {
    let fx = Fixture::create();
    let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    write(fx.root(), "ten.txt", &body);
    let out = text(
        "read_file",
        fx.root(),
        json!({"path": "ten.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert_eq!(
        out,
        "line 3\nline 4\n[showing lines 3-4; the file continues, use offset=5 to read more]"
    );
    let tail = text(
        "read_file",
        fx.root(),
        json!({"path": "ten.txt", "offset": 9}),
    )
    .await;
    assert_eq!(tail, "line 9\nline 10\n");
    let exact = text(
        "read_file",
        fx.root(),
        json!({"path": "ten.txt", "offset": 9, "limit": 2}),
    )
    .await;
    assert_eq!(exact, "line 9\nline 10\n");
}

#[tokio::test]
async fn read_file_past_the_end_says_how_long_the_file_is() {
    let fx = Fixture::create();
    let err = call(
        "read_file",
        fx.root(),
        json!({"path": "a.txt", "offset": 7}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments(
            "offset 7 is past the end of `a.txt`, which has 3 lines".into()
        )
    );
}

#[tokio::test]
async fn read_file_truncates_at_the_output_cap() {
    let fx = Fixture::create();
    let body: String = (0..1000)
        .map(|i| format!("{i:04} {}\n", "x".repeat(40)))
        .collect();
    write(fx.root(), "big.txt", &body);
    let out = tool("read_file")
        .call(&ctx_with_cap(fx.root(), 1000), json!({"path": "big.txt"}))
        .await
        .unwrap()
        .content;
    assert!(out.len() <= 1000, "{} bytes", out.len());
    assert!(out.starts_with("0000 xxx"));
    let note = out.lines().last().unwrap();
    assert!(note.starts_with("[output truncated at"), "{note}");
    // Whole lines only, and the note says where to pick up.
    let shown = out.lines().count() - 1;
    assert!(note.ends_with(&format!("use offset={} to read more]", shown + 1)));
}

#[tokio::test]
async fn read_file_cuts_a_single_overlong_line() {
    let fx = Fixture::create();
    write(fx.root(), "long.txt", "é".repeat(2000));
    let out = tool("read_file")
        .call(&ctx_with_cap(fx.root(), 1000), json!({"path": "long.txt"}))
        .await
        .unwrap()
        .content;
    assert!(out.len() <= 1000);
    assert!(out.starts_with("éé"));
    assert!(
        out.ends_with("[line 1 is longer than 800 bytes and was cut]"),
        "{out}"
    );
}

#[tokio::test]
async fn read_file_refuses_binary_files() {
    let fx = Fixture::create();
    write(fx.root(), "nul.bin", b"abc\0def");
    write(fx.root(), "latin1.txt", b"caf\xe9\n");
    for path in ["nul.bin", "latin1.txt"] {
        let err = call("read_file", fx.root(), json!({"path": path}))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::Io(format!(
                "`{path}` is a binary file (not UTF-8 text) and cannot be read as text"
            ))
        );
    }
}

#[tokio::test]
async fn read_file_reports_missing_files_and_directories() {
    let fx = Fixture::create();
    let missing = call("read_file", fx.root(), json!({"path": "nope.txt"}))
        .await
        .unwrap_err();
    assert_eq!(missing, ToolError::Io("`nope.txt` does not exist".into()));
    let dir = call("read_file", fx.root(), json!({"path": "src"}))
        .await
        .unwrap_err();
    assert_eq!(
        dir,
        ToolError::Io("`src` is a directory; use list_dir".into())
    );
}

#[tokio::test]
async fn list_dir_lists_sorted_entries_and_skips_state_folders() {
    let fx = Fixture::create();
    let out = text("list_dir", fx.root(), json!({})).await;
    assert_eq!(out, "a.txt\ninner_link@\nlink_dir@\nlink_file@\nsrc/");
    let sub = text("list_dir", fx.root(), json!({"path": "src"})).await;
    assert_eq!(sub, "lib.rs\nnested/");
}

#[tokio::test]
async fn list_dir_recursive_walks_without_following_links() {
    let fx = Fixture::create();
    let out = text("list_dir", fx.root(), json!({"recursive": true})).await;
    assert_eq!(
        out,
        "a.txt\ninner_link@\nlink_dir@\nlink_file@\nsrc/\nsrc/lib.rs\nsrc/nested/\nsrc/nested/deep.txt"
    );
}

#[tokio::test]
async fn list_dir_stops_at_max_entries() {
    let fx = Fixture::create();
    let out = text(
        "list_dir",
        fx.root(),
        json!({"recursive": true, "maxEntries": 2}),
    )
    .await;
    assert_eq!(
        out,
        "a.txt\ninner_link@\n[stopped after 2 entries; list a subdirectory or raise maxEntries]"
    );
}

#[tokio::test]
async fn list_dir_of_an_empty_directory_or_a_file() {
    let fx = Fixture::create();
    std::fs::create_dir(fx.root().join("empty")).unwrap();
    assert_eq!(
        text("list_dir", fx.root(), json!({"path": "empty"})).await,
        "(empty directory)"
    );
    let err = call("list_dir", fx.root(), json!({"path": "a.txt"}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::Io("`a.txt` is not a directory; use read_file".into())
    );
}

#[tokio::test]
async fn grep_finds_lines_as_file_line_text() {
    let fx = Fixture::create();
    let out = text("grep", fx.root(), json!({"pattern": "hello"})).await;
    // Not in .git, .keel, nor behind the symlinks; case-sensitive by default.
    assert_eq!(out, "src/nested/deep.txt:1: deep hello");
    let ci = text(
        "grep",
        fx.root(),
        json!({"pattern": "hello", "caseInsensitive": true}),
    )
    .await;
    assert_eq!(
        ci,
        "src/lib.rs:2:     println!(\"Hello\");\nsrc/nested/deep.txt:1: deep hello"
    );
}

#[tokio::test]
async fn grep_filters_by_glob_and_path() {
    let fx = Fixture::create();
    let rs = text(
        "grep",
        fx.root(),
        json!({"pattern": "(?i)hello", "glob": "*.rs"}),
    )
    .await;
    assert_eq!(rs, "src/lib.rs:2:     println!(\"Hello\");");
    let nested = text(
        "grep",
        fx.root(),
        json!({"pattern": "(?i)hello", "path": "src", "glob": "nested/*.txt"}),
    )
    .await;
    assert_eq!(nested, "src/nested/deep.txt:1: deep hello");
    let one_file = text("grep", fx.root(), json!({"pattern": "^b", "path": "a.txt"})).await;
    assert_eq!(one_file, "a.txt:2: beta");
}

#[tokio::test]
async fn grep_skips_binary_files_and_caps_matches() {
    let fx = Fixture::create();
    write(fx.root(), "blob.bin", b"needle\0needle\n");
    let body: String = (0..50).map(|i| format!("needle {i}\n")).collect();
    write(fx.root(), "many.txt", &body);
    let out = text(
        "grep",
        fx.root(),
        json!({"pattern": "needle", "maxMatches": 3}),
    )
    .await;
    assert_eq!(
        out,
        "many.txt:1: needle 0\nmany.txt:2: needle 1\nmany.txt:3: needle 2\n\
         [stopped after 3 matches; narrow the pattern, path or glob]"
    );
}

#[tokio::test]
async fn grep_reports_no_matches_and_bad_patterns() {
    let fx = Fixture::create();
    assert_eq!(
        text("grep", fx.root(), json!({"pattern": "zebra"})).await,
        "no matches"
    );
    let err = call("grep", fx.root(), json!({"pattern": "("}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.starts_with("invalid `pattern`")),
        "{err:?}"
    );
    let err = call("grep", fx.root(), json!({"pattern": "a", "glob": "[z"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.starts_with("invalid `glob`")),
        "{err:?}"
    );
}

#[tokio::test]
async fn write_file_creates_directories_and_reports_bytes() {
    let fx = Fixture::create();
    let out = text(
        "write_file",
        fx.root(),
        json!({"path": "notes/today/plan.md", "content": "héllo\n"}),
    )
    .await;
    assert_eq!(out, "wrote 7 bytes to notes/today/plan.md");
    let written = std::fs::read_to_string(fx.root().join("notes/today/plan.md")).unwrap();
    assert_eq!(written, "héllo\n");
    // Nothing else was left behind in the directory (no temporary files).
    let names: Vec<_> = std::fs::read_dir(fx.root().join("notes/today"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["plan.md"]);
}

#[tokio::test]
async fn write_file_replaces_a_file_and_keeps_its_permissions() {
    let fx = Fixture::create();
    let script = fx.root().join("run.sh");
    std::fs::write(&script, "old").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    text(
        "write_file",
        fx.root(),
        json!({"path": "run.sh", "content": "#!/bin/sh\necho new\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho new\n"
    );
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

#[tokio::test]
async fn write_file_through_an_inner_symlink_writes_its_target() {
    let fx = Fixture::create();
    text(
        "write_file",
        fx.root(),
        json!({"path": "inner_link", "content": "rewritten\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(fx.root().join("a.txt")).unwrap(),
        "rewritten\n"
    );
    assert!(
        std::fs::symlink_metadata(fx.root().join("inner_link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn write_file_without_create_dirs_needs_the_directory() {
    let fx = Fixture::create();
    let err = call(
        "write_file",
        fx.root(),
        json!({"path": "missing/x.txt", "content": "x", "createDirs": false}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        ToolError::Io(
            "the directory of `missing/x.txt` does not exist (set createDirs to create it)".into()
        )
    );
    assert!(!fx.root().join("missing").exists());
    let err = call(
        "write_file",
        fx.root(),
        json!({"path": "src", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, ToolError::Io("`src` is a directory".into()));
}
