//! No file tool can reach outside the workspace — through `..`, absolute paths, or symlinks
//! to files or directories outside — and nothing can be written inside `.keel/`.

use keel_types::ToolError;
use serde_json::{Value, json};

use crate::{Fixture, call, text};

fn escape(path: &str) -> ToolError {
    ToolError::PathEscape(path.to_owned())
}

/// Paths that lead outside the workspace, for a fixture.
fn escaping_paths(fx: &Fixture) -> Vec<String> {
    vec![
        "../secret.txt".to_owned(),
        "src/../../secret.txt".to_owned(),
        "src/..".to_owned(),
        "/etc/passwd".to_owned(),
        fx.outside_file().to_str().unwrap().to_owned(),
        fx.outside.path().to_str().unwrap().to_owned(),
        "link_file".to_owned(),
        "link_dir".to_owned(),
        "link_dir/secret.txt".to_owned(),
        "./link_dir/".to_owned(),
    ]
}

#[tokio::test]
async fn read_file_cannot_escape() {
    let fx = Fixture::create();
    for path in escaping_paths(&fx) {
        let err = call("read_file", fx.root(), json!({"path": path}))
            .await
            .unwrap_err();
        assert_eq!(err, escape(&path), "{path}");
    }
}

#[tokio::test]
async fn list_dir_cannot_escape() {
    let fx = Fixture::create();
    for path in escaping_paths(&fx)
        .into_iter()
        .chain(["..".to_owned(), "/".to_owned()])
    {
        for recursive in [false, true] {
            let err = call(
                "list_dir",
                fx.root(),
                json!({"path": path, "recursive": recursive}),
            )
            .await
            .unwrap_err();
            assert_eq!(err, escape(&path), "{path}");
        }
    }
}

#[tokio::test]
async fn grep_cannot_escape() {
    let fx = Fixture::create();
    for path in escaping_paths(&fx) {
        let err = call(
            "grep",
            fx.root(),
            json!({"pattern": "secret", "path": path}),
        )
        .await
        .unwrap_err();
        assert_eq!(err, escape(&path), "{path}");
    }
    // A walk of the whole workspace does not follow the links out of it.
    let out = text("grep", fx.root(), json!({"pattern": "top secret"})).await;
    assert_eq!(out, "no matches");
}

#[tokio::test]
async fn write_file_cannot_escape() {
    let fx = Fixture::create();
    let mut paths = escaping_paths(&fx);
    paths.extend([
        "link_dir/new.txt".to_owned(),
        "link_dir/sub/new.txt".to_owned(),
        "../new.txt".to_owned(),
        fx.outside
            .path()
            .join("new.txt")
            .to_str()
            .unwrap()
            .to_owned(),
    ]);
    for path in paths {
        let args = json!({"path": path, "content": "pwned\n"});
        let err = call("write_file", fx.root(), args).await.unwrap_err();
        assert_eq!(err, escape(&path), "{path}");
    }
    // Nothing outside changed.
    assert_eq!(
        std::fs::read_to_string(fx.outside_file()).unwrap(),
        "top secret hello\n"
    );
    let mut outside: Vec<_> = std::fs::read_dir(fx.outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    outside.sort();
    assert_eq!(outside, ["secret.txt"]);
}

#[tokio::test]
async fn dangling_symlinks_are_refused() {
    let fx = Fixture::create();
    std::os::unix::fs::symlink("/nonexistent/keel-test", fx.root().join("dangling")).unwrap();
    let err = call("read_file", fx.root(), json!({"path": "dangling"}))
        .await
        .unwrap_err();
    assert_eq!(err, escape("dangling"));
    let err = call(
        "write_file",
        fx.root(),
        json!({"path": "dangling", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, escape("dangling"));
}

#[tokio::test]
async fn keel_state_cannot_be_written() {
    let fx = Fixture::create();
    std::os::unix::fs::symlink(fx.root().join(".keel"), fx.root().join("state_link")).unwrap();
    let abs = fx.root().join(".keel/keel.db");
    for path in [
        ".keel/keel.db",
        ".keel/new/file.txt",
        "./.keel/keel.db",
        ".keel",
        "state_link/keel.db",
        abs.to_str().unwrap(),
    ] {
        let err = call(
            "write_file",
            fx.root(),
            json!({"path": path, "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments(m) if m.contains("Keel's own state")),
            "{path}: {err:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.root().join(".keel/keel.db")).unwrap(),
        "state hello\n"
    );
    assert!(!fx.root().join(".keel/new").exists());
}

#[tokio::test]
async fn the_root_itself_is_not_a_file() {
    let fx = Fixture::create();
    for path in [".", "", "./"] {
        let err = call(
            "write_file",
            fx.root(),
            json!({"path": path, "content": "x"}),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{path}");
    }
}

#[tokio::test]
async fn odd_argument_types_are_errors_not_panics() {
    let fx = Fixture::create();
    let odd: [(&str, Value); 5] = [
        ("read_file", json!({"path": 7})),
        ("read_file", json!({"path": "a.txt", "offset": -1})),
        ("list_dir", json!({"recursive": "yes"})),
        ("grep", json!({})),
        ("write_file", json!({"path": "x"})),
    ];
    for (name, args) in odd {
        let err = call(name, fx.root(), args.clone()).await.unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{name} {args}"
        );
    }
    let err = call("read_file", fx.root(), json!({"path": "a\u{0}b"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)));
}

/// The workspace root is resolved once and kept; a root reached through a link that now points
/// at another folder (the old one gone) is resolved again, and the tools follow it.
#[tokio::test]
async fn a_root_link_pointing_elsewhere_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::create_dir(&first).unwrap();
    std::fs::create_dir(&second).unwrap();
    std::fs::write(first.join("a.txt"), "first\n").unwrap();
    std::fs::write(second.join("a.txt"), "second\n").unwrap();
    let root = dir.path().join("workspace");
    std::os::unix::fs::symlink(&first, &root).unwrap();

    let read = || text("read_file", &root, json!({"path": "a.txt"}));
    assert!(read().await.contains("first"));
    std::fs::remove_file(&root).unwrap();
    std::fs::remove_dir_all(&first).unwrap();
    std::os::unix::fs::symlink(&second, &root).unwrap();
    assert!(read().await.contains("second"));
    // Still contained: the old folder's path is not reachable through the root.
    let err = call(
        "read_file",
        &root,
        json!({"path": first.join("a.txt").to_str().unwrap()}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ToolError::PathEscape(_) | ToolError::Io(_)),
        "{err:?}"
    );
}
