//! `keel memory …` and `keel run --meta`: a candidate a run submits under `approve` waits in
//! the queue, is approved by another `keel` process and becomes searchable; operator writes,
//! export to a file and import into a fresh workspace, maintenance, and clear errors.

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

fn workspace() -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [
                {"toolCalls": [{"name": "remember", "arguments": {"text": "Alice prefers oolong tea.", "kind": "preference"}}]},
                {"text": "I will remember that once it is approved."}
            ]}]}),
        )
        .agent("assistant", "{ model: m }")
        .document(
            "Memory",
            "user-notes",
            "  namespace: \"users/{metadata.user}\"\n  readers: [assistant]\n  writers: [assistant]\n  write: approve\n",
        )
        .build()
}

#[test]
fn a_candidate_is_approved_by_another_process_and_becomes_searchable() {
    let ws = workspace();
    let keel = keel_in(&ws);

    let missing = keel.run(["run", "--no-approve-here", "Remember my tea."]);
    assert_eq!(missing.code, Some(2), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("needs request metadata `user`"),
        "{}",
        missing.stderr
    );

    let ran = keel.run([
        "run",
        "--no-approve-here",
        "--meta",
        "user=alice",
        "Remember my tea.",
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);

    let candidates: Vec<Value> = keel.run(["memory", "candidates", "--json"]).json_lines();
    assert_eq!(candidates.len(), 1, "{candidates:?}");
    assert_eq!(candidates[0]["memory"]["text"], "Alice prefers oolong tea.");
    let id = candidates[0]["approvalId"].as_str().unwrap().to_owned();
    let listed = keel.run(["approvals", "list"]);
    assert!(listed.stdout.contains(&id), "{}", listed.stdout);

    let nothing = keel.run(["memory", "search", "oolong", "--json"]);
    assert_eq!(nothing.code, Some(0), "{}", nothing.stderr);
    assert!(nothing.stdout.trim().is_empty(), "{}", nothing.stdout);

    let approved = keel.run(["memory", "approve", &id]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    assert!(
        approved.stdout.contains("stored mem_"),
        "{}",
        approved.stdout
    );
    let hits: Vec<Value> = keel
        .run([
            "memory",
            "search",
            "oolong",
            "--namespace",
            "users/alice",
            "--json",
        ])
        .json_lines();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["record"]["text"], "Alice prefers oolong tea.");
    // Without a namespace, every namespace that holds records is searched.
    let everywhere: Vec<Value> = keel
        .run(["memory", "search", "oolong", "--json"])
        .json_lines();
    assert_eq!(everywhere.len(), 1);
    let unknown = keel.run(["memory", "approve", "apr_nope"]);
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("no approval `apr_nope`"),
        "{}",
        unknown.stderr
    );
    let again = keel.run(["memory", "approve", &id]);
    assert_eq!(again.code, Some(2));
    assert!(
        again.stderr.contains("already approved"),
        "{}",
        again.stderr
    );
}

#[test]
fn operator_writes_export_import_and_maintenance() {
    let ws = workspace();
    let keel = keel_in(&ws);
    let added = keel.run([
        "memory",
        "add",
        "users/bob",
        "Bob likes old maps of Lisbon.",
        "--tag",
        "maps",
    ]);
    assert_eq!(added.code, Some(0), "{}", added.stderr);
    let second = keel.run(["memory", "add", "users/bob", "Bob likes maps of old Lisbon"]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    let unknown = keel.run(["memory", "add", "teams/x", "Hello."]);
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("unknown namespace `teams/x`"),
        "{}",
        unknown.stderr
    );
    let bad_kind = keel.run(["memory", "add", "users/bob", "Hi.", "--kind", "rumour"]);
    assert_eq!(bad_kind.code, Some(2));
    assert!(bad_kind.stderr.contains("rumour"), "{}", bad_kind.stderr);

    let maintained = keel.run(["memory", "maintain", "--similarity", "1"]);
    assert_eq!(maintained.code, Some(0), "{}", maintained.stderr);
    assert!(
        maintained.stdout.starts_with("0 merged"),
        "{}",
        maintained.stdout
    );
    let maintained = keel.run(["memory", "maintain"]);
    assert!(
        maintained.stdout.starts_with("1 merged"),
        "{} {}",
        maintained.stdout,
        keel.run(["memory", "list"]).stdout
    );
    let listed: Vec<Value> = keel.run(["memory", "list", "--json"]).json_lines();
    assert_eq!(listed.len(), 1);
    let history = keel.run(["memory", "history", listed[0]["id"].as_str().unwrap()]);
    assert_eq!(history.stdout.lines().count(), 2, "{}", history.stdout);

    let file = ws.path().join("memory.jsonl");
    let exported = keel.run(["memory", "export", "--out", file.to_str().unwrap()]);
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    let fresh = workspace();
    let imported = keel_in(&fresh).run(["memory", "import", file.to_str().unwrap()]);
    assert_eq!(imported.code, Some(0), "{}", imported.stderr);
    let again = keel_in(&fresh).run(["memory", "export"]);
    assert_eq!(again.stdout, std::fs::read_to_string(&file).unwrap());

    let backup = ws.path().join("backup/keel.db");
    let backed = keel.run(["memory", "backup", backup.to_str().unwrap()]);
    assert_eq!(backed.code, Some(0), "{}", backed.stderr);
    assert!(backup.is_file());
}

#[test]
fn a_namespace_value_with_an_invisible_character_is_refused_naming_it() {
    let ws = workspace();
    let keel = keel_in(&ws);
    let zero_width = keel.run([
        "run",
        "--no-approve-here",
        "--meta",
        "user=al\u{200B}ice",
        "Remember my tea.",
    ]);
    assert_eq!(zero_width.code, Some(2), "{}", zero_width.stderr);
    assert!(
        zero_width.stderr.contains("metadata.user") && zero_width.stderr.contains("U+200B"),
        "{}",
        zero_width.stderr
    );
    let bidi = keel.run([
        "run",
        "--no-approve-here",
        "--meta",
        "user=alice\u{202E}",
        "Remember my tea.",
    ]);
    assert_eq!(bidi.code, Some(2), "{}", bidi.stderr);
    assert!(bidi.stderr.contains("U+202E"), "{}", bidi.stderr);
}
