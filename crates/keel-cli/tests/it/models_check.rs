//! `keel models check`: each model gets one tiny streamed request with a tool to call; an
//! unreachable one fails the command, named with why.

use keel_test_support::{MockLlm, MockResponse, MockToolCall, WorkspaceBuilder};

use crate::common::keel_in;

#[tokio::test(flavor = "multi_thread")]
async fn each_model_is_checked_and_an_unreachable_one_fails_the_command() {
    let mock = MockLlm::start().await;
    // `claude` (anthropic) is checked before `gpt` (openai): by name.
    mock.push(MockResponse::anthropic_tool_use(&[MockToolCall::new(
        "toolu_1",
        "ping",
        ["{}"],
    )]));
    mock.push(MockResponse::text(["pong"]));
    let ws = WorkspaceBuilder::new()
        .model(
            "claude",
            &format!(
                "{{ provider: anthropic, baseUrl: \"http://{}\", model: claude-test }}",
                mock.addr()
            ),
        )
        .openai_model_at("gpt", &mock.base_url())
        .model(
            "nowhere",
            "{ provider: openai, baseUrl: \"http://127.0.0.1:9/v1\", model: x, timeout: 5s }",
        )
        .agent("a", "{ model: gpt }")
        .build();
    let keel = keel_in(&ws);
    let checked = keel.run(["models", "check", "--json"]);
    assert_eq!(
        checked.code,
        Some(1),
        "{}\n{}",
        checked.stdout,
        checked.stderr
    );
    assert!(
        checked.stderr.contains("1 of 3 model(s) failed"),
        "{}",
        checked.stderr
    );
    let lines = checked.json_lines();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["model"], "claude");
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[0]["calledTool"], true);
    assert_eq!(lines[0]["streamed"], true);
    assert_eq!(lines[1]["model"], "gpt");
    assert_eq!(lines[1]["ok"], true);
    assert_eq!(lines[1]["calledTool"], false, "it answered in text");
    assert_eq!(lines[2]["model"], "nowhere");
    assert_eq!(lines[2]["ok"], false);
    assert!(
        lines[2]["error"].as_str().unwrap().contains("cannot reach"),
        "{}",
        lines[2]
    );
    // The requests the checks sent offered the tool.
    let requests = mock.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[1].body["tools"][0]["function"]["name"], "ping");
}
