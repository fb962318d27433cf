//! Sessions: each request sees the session's earlier turns, the transcript is persisted, and
//! trimming keeps tool calls with their results.

use keel::Role;
use keel::{RequestOptions, RunStatus, Runtime, SessionId};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use crate::common;

async fn turn(runtime: &Runtime, session: &SessionId, input: &str) -> keel::RunResponse {
    let mut handle = runtime
        .request(RequestOptions {
            input: input.into(),
            session_id: Some(session.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    while handle.next_event().await.is_some() {}
    handle.wait().await.unwrap()
}

#[tokio::test]
async fn a_second_turn_sees_the_first_and_the_transcript_is_persisted() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "read_file",
        [r#"{"path":"README.md"}"#],
    )]));
    mock.push(MockResponse::text(["It says hello."]));
    mock.push(MockResponse::text(["You asked about the README."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let session = SessionId::from("ses_test");

    let first = turn(&runtime, &session, "What does the README say?").await;
    let second = turn(&runtime, &session, "What did I ask before?").await;

    assert_eq!(first.status, RunStatus::Completed);
    assert_eq!(second.status, RunStatus::Completed);
    // The third model request carries the whole first turn before the new input.
    let sent = mock.requests()[2].messages().to_vec();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        vec!["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(sent[1]["content"], "What does the README say?");
    assert_eq!(sent[5]["content"], "What did I ask before?");

    let transcript = runtime.sessions().transcript(&session).await.unwrap();
    let roles: Vec<Role> = transcript.iter().map(|m| m.message.role).collect();
    use Role::*;
    assert_eq!(
        roles,
        vec![User, Assistant, Tool, Assistant, User, Assistant]
    );
    assert_eq!(
        transcript.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=6).collect::<Vec<_>>()
    );
    let sessions = runtime.sessions().list(None).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].run_count, 2);
    assert_eq!(sessions[0].message_count, 6);
    let runs = runtime
        .runs()
        .list(&keel::RunFilter {
            session: Some(session.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 2);

    assert!(runtime.sessions().delete(&session).await.unwrap());
    assert!(
        runtime
            .sessions()
            .transcript(&session)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        runtime
            .runs()
            .get(&first.request_id)
            .await
            .unwrap()
            .is_some(),
        "runs stay"
    );
}

#[tokio::test]
async fn a_failed_turn_does_not_enter_the_transcript() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::openai_error(
        400,
        "bad",
        "invalid_request_error",
        None,
    ));
    mock.push(MockResponse::text(["Fine."]));
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let session = SessionId::from("ses_fail");

    assert_eq!(
        turn(&runtime, &session, "first").await.status,
        RunStatus::Failed
    );
    assert_eq!(
        turn(&runtime, &session, "second").await.status,
        RunStatus::Completed
    );

    let sent = mock.requests()[1].messages().to_vec();
    let users: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, vec!["second"]);
}

#[tokio::test]
async fn history_is_trimmed_to_the_budget_keeping_calls_with_results() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| match request.last_role() {
        Some("user")
            if request
                .last_content_of("user")
                .is_some_and(|c| c.starts_with("read")) =>
        {
            MockResponse::tool_calls([MockToolCall::new(
                "c",
                "read_file",
                [r#"{"path":"README.md"}"#],
            )])
        }
        _ => MockResponse::text([format!("answer {}", "x".repeat(200))]),
    });
    let ws = common::agent_and_model(&mock.base_url(), &["read_file"], "")
        .runtime("{ limits: { historyTokens: 120 } }")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let session = SessionId::from("ses_trim");
    for input in ["read one", "chat two", "read three", "chat four"] {
        assert_eq!(
            turn(&runtime, &session, input).await.status,
            RunStatus::Completed
        );
    }
    let last = mock.last_request().unwrap();
    let sent = last.messages();
    // Never a tool result without the assistant message that asked for it, nor the reverse.
    for (i, message) in sent.iter().enumerate() {
        if message["role"] == "tool" {
            let owner = sent[..i]
                .iter()
                .rev()
                .find(|m| m["role"] != "tool")
                .unwrap();
            assert!(
                owner["tool_calls"].is_array(),
                "orphan tool result: {sent:?}"
            );
        }
    }
    assert!(
        sent.len() < 2 + 4 * 4,
        "the history was trimmed: {} messages",
        sent.len()
    );
    assert_eq!(sent.last().unwrap()["content"], "chat four");
}

#[tokio::test]
async fn an_embedder_gets_the_same_session_id_rule_as_the_cli_and_http() {
    let mock = MockLlm::start().await;
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    for bad in ["", "../x", "a\0b", &"s".repeat(129)] {
        let refused = runtime
            .request(RequestOptions {
                input: "Hi".into(),
                session_id: Some(SessionId::from(bad)),
                ..Default::default()
            })
            .await
            .err()
            .unwrap_or_else(|| panic!("`{bad}` was accepted"));
        assert!(
            refused.to_string().contains("session id"),
            "{bad}: {refused}"
        );
    }
    assert!(
        runtime
            .runs()
            .list(&Default::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_compacted_session_sends_its_summary_instead_of_the_old_turns_and_keeps_them_all() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| {
        let first = request
            .messages()
            .first()
            .and_then(|m| m["content"].as_str());
        if first.is_some_and(|c| c.starts_with("You compact the working memory")) {
            return MockResponse::text(["The user asked about one, two and three."]);
        }
        let asked = request
            .last_content_of("user")
            .unwrap_or_default()
            .to_owned();
        MockResponse::text([format!("answer to {asked}")])
    });
    let ws = common::workspace(&mock.base_url(), &[], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let session = SessionId::from("ses_long");
    for input in ["one", "two", "three", "four"] {
        assert_eq!(
            turn(&runtime, &session, input).await.status,
            RunStatus::Completed
        );
    }
    let sessions = runtime.sessions();
    let summary = sessions.compact(&session, 1).await.unwrap().unwrap();
    assert_eq!(summary.text, "The user asked about one, two and three.");
    // Turns of two messages each: the summary stands for the first three.
    assert_eq!(summary.through_seq, 6);
    assert_eq!(
        sessions.get(&session).await.unwrap().unwrap().summary,
        Some(summary.clone())
    );
    assert!(
        sessions.compact(&session, 1).await.unwrap().is_none(),
        "nothing more to compact"
    );

    assert_eq!(
        turn(&runtime, &session, "five").await.status,
        RunStatus::Completed
    );
    let sent = mock.last_request().unwrap();
    let contents: Vec<&str> = sent
        .messages()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "[Summary of this session's earlier turns, written to keep its history short]\nThe user asked about one, two and three.",
            "four",
            "answer to four",
            "five"
        ]
    );
    // The transcript keeps every turn.
    assert_eq!(sessions.transcript(&session).await.unwrap().len(), 10);
    let missing = sessions.compact(&SessionId::from("ses_none"), 1).await;
    assert!(
        matches!(missing, Err(keel::RuntimeError::NotFound(_))),
        "{missing:?}"
    );
}
