//! Cassettes: a run on a live model (the mock, speaking the Messages API with thinking) is
//! exported with `keel runs export ID --cassette FILE`; the same workspace with its agent on a
//! `provider: replay` model answers from the file with no model at all, recording the same
//! events (ids and times aside); a changed prompt fails the round with what changed.

use keel_test_support::{AnthropicSse, MockLlm, MockToolCall, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

#[tokio::test(flavor = "multi_thread")]
async fn a_cassette_replays_a_run_without_a_model_and_a_changed_prompt_fails_with_the_diff() {
    let mock = MockLlm::start().await;
    mock.push(
        AnthropicSse::new()
            .message_start(40, 0, 0)
            .thinking_block(0, "The README will say.", "sig-1")
            .tool_use_block(
                1,
                &MockToolCall::new("toolu_1", "read_file", [r#"{"path": "#, r#""README.md"}"#]),
            )
            .end("tool_use", 9)
            .response(),
    );
    mock.push(
        AnthropicSse::new()
            .message_start(60, 0, 40)
            .thinking_block(0, "It says hello.", "sig-2")
            .text_block(1, &["The README ", "says hello."])
            .end("end_turn", 5)
            .response(),
    );
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: reader }")
        .model(
            "claude",
            &format!(
                "{{ provider: anthropic, baseUrl: \"http://{}\", model: claude-test, params: {{ thinking: {{ budgetTokens: 1024 }} }} }}",
                mock.addr()
            ),
        )
        .model(
            "recorded",
            "{ provider: replay, cassette: tests/reader.cassette.json, match: request }",
        )
        .agent(
            "reader",
            "{ model: \"${KEEL_MODEL:-claude}\", instructions: \"${READER_INSTRUCTIONS:-Answer from the files.}\", tools: [read_file] }",
        )
        .file("README.md", "Hello.\n")
        .build();
    std::fs::create_dir_all(ws.path().join("tests")).unwrap();
    let keel = keel_in(&ws);
    let live = keel.run(["run", "What does the README say?"]);
    assert!(live.success(), "{}\n{}", live.stdout, live.stderr);
    assert!(
        live.stdout.contains("The README says hello."),
        "{}",
        live.stdout
    );
    let live_id = keel.newest_run_id();

    let exported = keel.run([
        "runs",
        "export",
        &live_id,
        "--cassette",
        "tests/reader.cassette.json",
    ]);
    assert!(exported.success(), "{}", exported.stderr);
    assert!(
        exported.stdout.contains("wrote 2 model exchange(s)"),
        "{}",
        exported.stdout
    );
    let cassette: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("tests/reader.cassette.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cassette["format"], "keel.cassette/1");
    assert_eq!(cassette["agent"], "reader");
    let first = &cassette["exchanges"][0];
    assert_eq!(first["request"]["digest"].as_str().unwrap().len(), 64);
    assert_eq!(
        first["answer"]["thinking"][0],
        serde_json::json!({"type": "thinking", "thinking": "The README will say.", "signature": "sig-1"})
    );

    // No model: the mock is gone.
    drop(mock);
    let replayed = keel
        .clone()
        .env("KEEL_MODEL", "recorded")
        .run(["run", "What does the README say?"]);
    assert!(
        replayed.success(),
        "{}\n{}",
        replayed.stdout,
        replayed.stderr
    );
    assert!(
        replayed.stdout.contains("The README says hello."),
        "{}",
        replayed.stdout
    );
    let replay_id = keel.newest_run_id();
    assert_ne!(replay_id, live_id);
    // The product's own comparison (`keel runs replay` uses it): ids and times aside.
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .build()
        .unwrap();
    let divergence = runtime
        .runs()
        .divergence(
            &keel::RequestId::from(live_id.as_str()),
            &keel::RequestId::from(replay_id.as_str()),
        )
        .await
        .unwrap();
    assert_eq!(divergence, None, "the replay records the run's events");
    drop(runtime);
    let original = keel.json_lines(["runs", "events", &live_id, "--json"]);
    let replay = keel.json_lines(["runs", "events", &replay_id, "--json"]);
    assert_eq!(original.len(), replay.len());
    let streamed: Vec<Value> = original
        .iter()
        .filter(|e| e["event"]["phase"] == "agent.output.delta")
        .map(|e| e["event"]["text"].clone())
        .collect();
    assert!(!streamed.is_empty());
    assert_eq!(
        cassette["exchanges"][1]["answer"]["chunks"],
        Value::Array(streamed),
        "the answer's chunks, as the run streamed them"
    );
    assert!(
        replay
            .iter()
            .any(|e| e["type"] == "runtime.model.completed"
                && e["thinking"][0]["signature"] == "sig-2"),
        "thinking is recorded, not answered"
    );

    let changed = keel
        .clone()
        .env("KEEL_MODEL", "recorded")
        .env("READER_INSTRUCTIONS", "Answer in French.")
        .run(["run", "What does the README say?"]);
    assert!(!changed.success(), "{}", changed.stdout);
    let said = format!("{}{}", changed.stdout, changed.stderr);
    assert!(
        said.contains("is not the one the cassette recorded")
            && said.contains("instructions: changed"),
        "{said}"
    );
    assert!(!said.contains("tools: changed"), "{said}");
}
