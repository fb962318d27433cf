//! `keel run --session`, `keel chat` over a pipe, `keel sessions`, `keel runs export|prune`.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::common::{copy_tree, keel, newest_run_id, quickstart_dir, run, stderr, stdout};

#[test]
fn chat_keeps_one_session_across_turns_and_sessions_can_be_listed_shown_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();

    let mut child = keel()
        .args(["chat", "-w", ws, "--session", "demo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two turns; the second is written over two lines with a trailing backslash.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is in this workspace?\nCount the words \\\nin my notes\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("This workspace holds"), "{text}");
    assert!(text.contains("\"words\":"), "{text}");

    let listed = run(&["sessions", "list", "-w", ws, "--json"]);
    let sessions: Vec<Value> = stdout(&listed)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionId"], "demo");
    assert_eq!(sessions[0]["runCount"], 2);

    let shown = stdout(&run(&["sessions", "show", "-w", ws, "demo"]));
    assert!(
        shown.contains("user: What is in this workspace?"),
        "{shown}"
    );
    assert!(
        shown.contains("user: Count the words \nin my notes"),
        "{shown}"
    );

    let runs = run(&["runs", "list", "-w", ws, "--session", "demo", "--json"]);
    assert_eq!(stdout(&runs).lines().count(), 2);

    let deleted = run(&["sessions", "delete", "-w", ws, "demo"]);
    assert_eq!(deleted.status.code(), Some(0));
    let again = run(&["sessions", "show", "-w", ws, "demo"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("no session `demo`"));
}

#[test]
fn run_with_session_validates_the_id() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let bad = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "--session",
        "../x",
        "hi",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("invalid session id"));
}

#[test]
fn export_writes_the_store_events_and_prune_deletes_old_ended_runs() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();
    assert_eq!(
        run(&["run", "-w", ws, "What is here?"]).status.code(),
        Some(0)
    );
    let id = &newest_run_id(ws);

    let exported = run(&["runs", "export", "-w", ws, id]);
    assert_eq!(exported.status.code(), Some(0));
    let mirror =
        std::fs::read_to_string(dir.path().join(".keel/runs").join(id).join("events.jsonl"))
            .unwrap();
    assert_eq!(
        stdout(&exported),
        mirror,
        "the export and the mirror are the same bytes"
    );

    let since = run(&["runs", "list", "-w", ws, "--since", "1h", "--json"]);
    assert_eq!(stdout(&since).lines().count(), 1);

    let kept = run(&["runs", "prune", "-w", ws, "--older-than", "1h"]);
    assert!(stdout(&kept).contains("deleted 0"), "{}", stdout(&kept));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let pruned = run(&["runs", "prune", "-w", ws, "--older-than", "1ms"]);
    assert!(stdout(&pruned).contains("deleted 1"), "{}", stdout(&pruned));
    assert!(!dir.path().join(".keel/runs").join(id).exists());
    assert_eq!(
        stdout(&run(&["runs", "list", "-w", ws, "--json"]))
            .lines()
            .count(),
        0
    );
}

#[test]
fn a_damaged_mirror_is_reported_never_rewritten_and_export_still_works() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();
    assert_eq!(
        run(&["run", "-w", ws, "What is here?"]).status.code(),
        Some(0)
    );
    let id = &newest_run_id(ws);
    let shown = stdout(&run(&["runs", "show", "-w", ws, id]));
    assert!(
        shown.contains("mirror:    in sync with the store"),
        "{shown}"
    );

    let path = dir.path().join(".keel/runs").join(id).join("events.jsonl");
    let original = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    lines[2] = "{\"this line\": \"was damaged";
    let damaged = format!("{}\n", lines.join("\n"));
    std::fs::write(&path, &damaged).unwrap();

    let shown = run(&["runs", "show", "-w", ws, id]);
    assert_eq!(shown.status.code(), Some(0));
    assert!(
        stdout(&shown).contains("events.jsonl:3"),
        "{}",
        stdout(&shown)
    );
    let exported = run(&["runs", "export", "-w", ws, id]);
    assert_eq!(
        stdout(&exported),
        original,
        "the export comes from the store"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "the mirror is left as is"
    );
}

#[test]
fn replay_of_a_scripted_run_matches_event_for_event() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();
    assert_eq!(
        run(&["run", "-w", ws, "What is here?"]).status.code(),
        Some(0)
    );
    let id = &newest_run_id(ws);

    let replayed = run(&["runs", "replay", "-w", ws, id]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    assert!(
        stderr(&replayed).contains("event for event"),
        "{}",
        stderr(&replayed)
    );

    // Change what a tool reads: the replay now diverges, and says where.
    std::fs::write(dir.path().join("notes/ideas.md"), "# Other ideas\n").unwrap();
    let diverged = run(&["runs", "replay", "-w", ws, id]);
    assert_eq!(diverged.status.code(), Some(1));
    assert!(
        stderr(&diverged).contains("diverges from"),
        "{}",
        stderr(&diverged)
    );
}
