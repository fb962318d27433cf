//! `keel run --session`, `keel chat` over a pipe, `keel sessions`, `keel runs export|prune`.

use keel_test_support::{Cli, TempWorkspace};

use crate::common::{keel_in, quickstart};

/// A quickstart workspace with a mirror file per run (`store.mirror: perRun`) after one
/// `keel run`, and that run's id.
fn quickstart_with_one_run() -> (TempWorkspace, Cli, String) {
    let ws = quickstart();
    let runtime = ws.path().join("config/runtime.yaml");
    let yaml = std::fs::read_to_string(&runtime)
        .unwrap()
        .replace("spec:\n", "spec:\n  store: { mirror: perRun }\n");
    std::fs::write(&runtime, yaml).unwrap();
    let keel = keel_in(&ws);
    assert_eq!(keel.run(["run", "What is here?"]).code, Some(0));
    let id = keel.newest_run_id();
    (ws, keel, id)
}

#[test]
fn chat_keeps_one_session_across_turns_and_sessions_can_be_listed_shown_and_deleted() {
    let ws = quickstart();
    let keel = keel_in(&ws);

    // Two turns; the second is written over two lines with a trailing backslash.
    let output = keel.run_with_stdin(
        ["chat", "--session", "demo"],
        b"What is in this workspace?\nCount the words \\\nin my notes\n",
    );
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    let text = output.stdout;
    assert!(text.contains("This workspace holds"), "{text}");
    assert!(text.contains("\"words\":"), "{text}");

    let sessions = keel.json_lines(["sessions", "list", "--json"]);
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionId"], "demo");
    assert_eq!(sessions[0]["runCount"], 2);

    let shown = keel.run(["sessions", "show", "demo"]).stdout;
    assert!(
        shown.contains("user: What is in this workspace?"),
        "{shown}"
    );
    assert!(
        shown.contains("user: Count the words \nin my notes"),
        "{shown}"
    );

    let runs = keel.run(["runs", "list", "--session", "demo", "--json"]);
    assert_eq!(runs.stdout.lines().count(), 2);

    // The quickstart's scripted model answers a summary request with a tool call and no
    // text: the session is left as it was, saying why (summaries that work are tested with
    // the runtime and over HTTP).
    let compacted = keel.run(["sessions", "compact", "demo", "--keep", "1"]);
    assert_eq!(compacted.code, Some(1), "{}", compacted.stdout);
    assert!(
        compacted.stderr.contains("the summarizer answered nothing"),
        "{}",
        compacted.stderr
    );
    let record = keel.run(["sessions", "show", "demo", "--json"]).json();
    assert_eq!(record["session"].get("summary"), None, "{record}");
    let missing = keel.run(["sessions", "compact", "none-such"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("no session `none-such`"),
        "{}",
        missing.stderr
    );

    let deleted = keel.run(["sessions", "delete", "demo"]);
    assert_eq!(deleted.code, Some(0));
    let again = keel.run(["sessions", "show", "demo"]);
    assert_eq!(again.code, Some(1));
    assert!(again.stderr.contains("no session `demo`"));
}

#[test]
fn every_command_taking_a_session_validates_the_id() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    for argv in [
        vec!["run", "--session", "../x", "hi"],
        vec!["chat", "--session", "../x"],
        vec!["sessions", "show", "../x"],
        vec!["sessions", "delete", "../x"],
        vec!["runs", "list", "--session", "../x"],
    ] {
        let bad = keel.run(argv.clone());
        assert_eq!(bad.code, Some(2), "{argv:?}: {}", bad.stderr);
        assert!(
            bad.stderr.contains("invalid session id"),
            "{argv:?}: {}",
            bad.stderr
        );
    }
}

#[test]
fn export_writes_the_store_events_and_prune_deletes_old_ended_runs() {
    let (ws, keel, id) = quickstart_with_one_run();
    let id = id.as_str();

    let exported = keel.run(["runs", "export", id]);
    assert_eq!(exported.code, Some(0));
    let mirror =
        std::fs::read_to_string(ws.path().join(".keel/runs").join(id).join("events.jsonl"))
            .unwrap();
    assert_eq!(
        exported.stdout, mirror,
        "the export and the mirror are the same bytes"
    );

    let since = keel.run(["runs", "list", "--since", "1h", "--json"]);
    assert_eq!(since.stdout.lines().count(), 1);

    let kept = keel.run(["runs", "prune", "--older-than", "1h"]);
    assert!(kept.stdout.contains("deleted 0"), "{}", kept.stdout);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let pruned = keel.run(["runs", "prune", "--older-than", "1ms"]);
    assert!(pruned.stdout.contains("deleted 1"), "{}", pruned.stdout);
    assert!(!ws.path().join(".keel/runs").join(id).exists());
    assert_eq!(
        keel.run(["runs", "list", "--json"]).stdout.lines().count(),
        0
    );
}

#[test]
fn a_damaged_mirror_is_reported_never_rewritten_and_export_still_works() {
    let (ws, keel, id) = quickstart_with_one_run();
    let id = id.as_str();
    let shown = keel.run(["runs", "show", id]).stdout;
    assert!(
        shown.contains("mirror:    in sync with the store"),
        "{shown}"
    );

    let path = ws.path().join(".keel/runs").join(id).join("events.jsonl");
    let original = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    lines[2] = "{\"this line\": \"was damaged";
    let damaged = format!("{}\n", lines.join("\n"));
    std::fs::write(&path, &damaged).unwrap();

    let shown = keel.run(["runs", "show", id]);
    assert_eq!(shown.code, Some(0));
    assert!(shown.stdout.contains("events.jsonl:3"), "{}", shown.stdout);
    let exported = keel.run(["runs", "export", id]);
    assert_eq!(exported.stdout, original, "the export comes from the store");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "the mirror is left as is"
    );
}

#[test]
fn replay_of_a_scripted_run_matches_event_for_event() {
    let (ws, keel, id) = quickstart_with_one_run();
    let id = id.as_str();

    let replayed = keel.run(["runs", "replay", id]);
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert!(
        replayed.stderr.contains("event for event"),
        "{}",
        replayed.stderr
    );

    // Change what a tool reads: the replay now diverges, and says where.
    std::fs::write(ws.path().join("notes/ideas.md"), "# Other ideas\n").unwrap();
    let diverged = keel.run(["runs", "replay", id]);
    assert_eq!(diverged.code, Some(1));
    assert!(
        diverged.stderr.contains("diverges from"),
        "{}",
        diverged.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_events_follow_prints_a_live_run_from_another_process_until_it_ends() {
    use keel_test_support::{MockLlm, MockResponse, WorkspaceBuilder};
    let mock = MockLlm::start().await;
    mock.respond_with(|_| {
        MockResponse::text((0..30).map(|i| format!("w{i} ")))
            .chunk_delay(std::time::Duration::from_millis(30))
    });
    let ws = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent("a", "{ model: mock }")
        .build();
    let keel = keel_in(&ws);
    let mut running = keel
        .command(["run", "Talk slowly"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Follow it from another process as soon as it is recorded.
    let id = loop {
        let runs = keel.json_lines(["runs", "list", "--json"]);
        if let Some(id) = runs.first().and_then(|r| r["requestId"].as_str()) {
            break id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let followed = tokio::task::spawn_blocking({
        let keel = keel_in(&ws);
        let id = id.clone();
        move || keel.run(["runs", "events", &id, "--json", "--follow"])
    })
    .await
    .unwrap();
    assert!(running.wait().unwrap().success());
    assert_eq!(followed.code, Some(0), "{}", followed.stderr);
    let streamed = followed.json_lines();
    assert_eq!(
        streamed.last().unwrap()["type"],
        "runtime.request.completed"
    );
    assert_eq!(
        streamed,
        keel.json_lines(["runs", "events", &id, "--json"]),
        "every stored event once, in order, up to the end"
    );
}

#[test]
fn a_session_is_continued_only_by_the_user_who_created_it_unless_overridden() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    let alice = keel.run([
        "run",
        "--session",
        "owned",
        "--meta",
        "user=alice",
        "What is here?",
    ]);
    assert_eq!(alice.code, Some(0), "{}", alice.stderr);

    // Another user is refused, and told nothing about whose session it is.
    let bob = keel.run([
        "run",
        "--session",
        "owned",
        "--meta",
        "user=bob",
        "What is here?",
    ]);
    assert_eq!(bob.code, Some(2), "{}", bob.stderr);
    assert!(bob.stderr.contains("cannot be continued"), "{}", bob.stderr);
    assert!(!bob.stderr.contains("alice"), "{}", bob.stderr);
    // No user at all is another principal too.
    let nobody = keel.run(["run", "--session", "owned", "What is here?"]);
    assert_eq!(nobody.code, Some(2), "{}", nobody.stderr);
    let runs = keel.json_lines(["runs", "list", "--session", "owned", "--json"]);
    assert_eq!(runs.len(), 1, "refused requests record no run: {runs:?}");

    // The same user in full-width letters is the same principal (NFKC).
    let wide = keel.run([
        "run",
        "--session",
        "owned",
        "--meta",
        "user=ａｌｉｃｅ",
        "What is here?",
    ]);
    assert_eq!(wide.code, Some(0), "{}", wide.stderr);

    // An operator may continue it as someone else only by saying so; that is recorded.
    let overridden = keel.run([
        "run",
        "--session",
        "owned",
        "--meta",
        "user=bob",
        "--override-session-owner",
        "What is here?",
    ]);
    assert_eq!(overridden.code, Some(0), "{}", overridden.stderr);
    let id = keel.newest_run_id();
    let events = keel.json_lines(["runs", "events", &id, "--json"]);
    let started = &events[0];
    assert_eq!(started["type"], "runtime.request.started", "{started}");
    assert_eq!(
        started["sessionOwnerOverridden"],
        serde_json::json!({"user": "alice"}),
        "{started}"
    );
}
