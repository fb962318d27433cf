//! The `scripted` provider: conversation matching, steps, errors, templates, streaming.

use std::sync::Arc;
use std::time::Duration;

use keel_models::{ProviderError, ScriptedProvider};
use keel_test_support::TempWorkspace;
use keel_types::{
    Message, ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest, ModelStopReason,
    ToolCall,
};
use serde_json::json;

use crate::{assemble, events, failure};

const WEATHER_SCRIPT: &str = r#"{
  "conversations": [
    {
      "name": "weather",
      "match": "(?i)weather",
      "steps": [
        { "toolCalls": [ { "name": "get_weather", "arguments": { "city": "Paris" } } ] },
        { "text": "It is sunny in Paris. Tool said: {{last_tool_result}}" }
      ]
    },
    {
      "match": "^fail",
      "steps": [
        { "error": { "kind": "server", "status": 503, "times": 2 }, "text": "recovered" },
        { "error": { "kind": "auth" } }
      ]
    },
    {
      "steps": [ { "text": "Hello! You said: {{input}}" } ]
    }
  ]
}"#;

fn scripted(script: &str) -> ScriptedProvider {
    let ws = TempWorkspace::new();
    let path = ws.write("scripts/model.json", script);
    ScriptedProvider::from_file(&path, "demo").unwrap()
}

fn ask(messages: Vec<Message>, stream: bool) -> ModelRequest {
    ModelRequest {
        messages,
        tools: Arc::from([]),
        params: ModelParams::default(),
        stream,
        sections: Vec::new(),
        traceparent: None,
    }
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::system("sys"), Message::user(text)]
}

#[tokio::test]
async fn the_first_matching_conversation_answers_and_the_last_is_a_fallback() {
    let provider = scripted(WEATHER_SCRIPT);

    let weather = assemble(&events(&provider, ask(user("What's the WEATHER?"), true)).await);
    let other = assemble(&events(&provider, ask(user("hi there"), true)).await);

    assert_eq!(
        weather.calls,
        vec![(
            "call_1_0".into(),
            "get_weather".into(),
            r#"{"city":"Paris"}"#.into()
        )]
    );
    assert_eq!(weather.stop, Some(ModelStopReason::ToolCalls));
    assert_eq!(other.text, "Hello! You said: hi there");
    assert_eq!(other.stop, Some(ModelStopReason::Stop));
    assert_eq!(provider.provider_name(), "scripted");
    assert_eq!(provider.model_name(), "demo");
}

#[tokio::test]
async fn the_step_follows_the_assistant_messages_since_the_last_user_message() {
    let provider = scripted(WEATHER_SCRIPT);
    let mut messages = user("weather please");
    messages.push(Message::assistant(
        "",
        vec![ToolCall {
            id: "call_1_0".into(),
            name: "get_weather".into(),
            arguments: "{}".into(),
        }],
    ));
    messages.push(Message::tool_result("call_1_0", "21°C and clear"));

    let answer = assemble(&events(&provider, ask(messages.clone(), true)).await);

    assert_eq!(
        answer.text,
        "It is sunny in Paris. Tool said: 21°C and clear"
    );

    // A new user message starts the count again.
    messages.push(Message::assistant(answer.text, Vec::new()));
    messages.push(Message::user("and the weather tomorrow?"));
    let again = assemble(&events(&provider, ask(messages, true)).await);
    assert_eq!(again.calls.len(), 1);
}

#[tokio::test]
async fn running_past_the_end_of_the_script_is_a_clear_error() {
    let provider = scripted(WEATHER_SCRIPT);
    let mut messages = user("hello");
    messages.push(Message::assistant("Hello! You said: hello", Vec::new()));

    let error = failure(&provider, ask(messages, true)).await;

    let ModelError::BadRequest { message, .. } = &error else {
        panic!("expected BadRequest, got {error:?}");
    };
    assert!(
        message.contains("script has no step 2 for conversation 3"),
        "{message}"
    );
}

#[tokio::test]
async fn an_error_with_times_fails_that_many_attempts_then_answers() {
    let provider = scripted(WEATHER_SCRIPT);
    let request = ask(user("fail twice"), true);

    let first = failure(&provider, request.clone()).await;
    let second = failure(&provider, request.clone()).await;
    let third = assemble(&events(&provider, request.clone()).await);

    let expected = ModelError::Server {
        status: 503,
        message: "scripted server error".into(),
    };
    assert_eq!(first, expected);
    assert_eq!(second, expected);
    assert!(first.is_retryable());
    assert_eq!(third.text, "recovered");

    // A different conversation reaching the same step has its own count.
    let other = failure(&provider, ask(user("fail for someone else"), true)).await;
    assert_eq!(other, expected);
}

#[tokio::test]
async fn an_error_without_times_always_fails() {
    let provider = scripted(WEATHER_SCRIPT);
    let mut messages = user("fail");
    messages.push(Message::assistant("recovered", Vec::new()));

    for _ in 0..3 {
        let error = failure(&provider, ask(messages.clone(), true)).await;
        assert_eq!(
            error,
            ModelError::Auth {
                status: 401,
                message: "scripted auth error".into()
            }
        );
    }
}

#[tokio::test]
async fn every_model_error_kind_can_be_scripted() {
    let script = json!({ "conversations": [
        { "match": "^rate$", "steps": [{ "error": { "kind": "rate_limited", "retryAfter": "2s", "message": "slow" } }] },
        { "match": "^server$", "steps": [{ "error": { "kind": "server" } }] },
        { "match": "^auth$", "steps": [{ "error": { "kind": "auth", "status": 403 } }] },
        { "match": "^bad$", "steps": [{ "error": { "kind": "bad_request", "status": 422 } }] },
        { "match": "^context$", "steps": [{ "error": { "kind": "context_length" } }] },
        { "match": "^malformed$", "steps": [{ "error": { "kind": "malformed" } }] },
        { "match": "^timeout$", "steps": [{ "error": { "kind": "timeout" } }] },
        { "match": "^connect$", "steps": [{ "error": { "kind": "connect" } }] }
    ] });
    let provider = scripted(&script.to_string());

    let cases = [
        (
            "rate",
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(2)),
                message: "slow".into(),
            },
        ),
        (
            "server",
            ModelError::Server {
                status: 500,
                message: "scripted server error".into(),
            },
        ),
        (
            "auth",
            ModelError::Auth {
                status: 403,
                message: "scripted auth error".into(),
            },
        ),
        (
            "bad",
            ModelError::BadRequest {
                status: 422,
                message: "scripted bad_request error".into(),
            },
        ),
        (
            "context",
            ModelError::ContextLength("scripted context_length error".into()),
        ),
        (
            "malformed",
            ModelError::MalformedStream("scripted malformed error".into()),
        ),
        (
            "timeout",
            ModelError::Timeout("scripted timeout error".into()),
        ),
        (
            "connect",
            ModelError::Connect("scripted connect error".into()),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            failure(&provider, ask(user(input), true)).await,
            expected,
            "{input}"
        );
    }
}

#[tokio::test]
async fn streaming_splits_text_and_arguments_into_chunks() {
    let script = json!({ "conversations": [{ "steps": [{
        "text": "abcdefghij",
        "chunkSize": 4,
        "toolCalls": [{ "name": "t", "arguments": "{\"k\":1}", "id": "fixed" }]
    }] }] });
    let provider = scripted(&script.to_string());

    let streamed = events(&provider, ask(user("x"), true)).await;
    let whole = events(&provider, ask(user("x"), false)).await;

    let texts: Vec<_> = streamed
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["abcd", "efgh", "ij"]);
    let args = streamed
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallArgsDelta { .. }))
        .count();
    assert_eq!(args, 2, "{{\"k\":1}} in pieces of 4");
    assert_eq!(
        assemble(&streamed),
        assemble(&whole),
        "same answer either way"
    );
    assert_eq!(
        assemble(&whole).calls,
        vec![("fixed".into(), "t".into(), "{\"k\":1}".into())]
    );
    assert!(matches!(
        streamed[streamed.len() - 2],
        ModelEvent::Usage { .. }
    ));
}

#[tokio::test]
async fn usage_is_estimated_from_characters() {
    let provider = scripted(r#"{"conversations":[{"steps":[{"text":"12345678"}]}]}"#);

    let answer = assemble(&events(&provider, ask(vec![Message::user("1234")], true)).await);

    let usage = answer.usage.unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (1, 2, 3)
    );
}

#[tokio::test]
async fn a_mid_stream_error_comes_after_the_first_delta() {
    let script = json!({ "conversations": [{ "steps": [{
        "text": "abcdef", "chunkSize": 2, "error": { "kind": "connect", "midStream": true }
    }] }] });
    let provider = scripted(&script.to_string());

    let items = crate::run(&provider, ask(user("x"), true)).await.unwrap();

    assert_eq!(
        items,
        vec![
            Ok(ModelEvent::TextDelta { text: "ab".into() }),
            Err(ModelError::Connect("scripted connect error".into())),
        ]
    );
}

#[tokio::test]
async fn templates_work_inside_tool_call_arguments() {
    let script = json!({ "conversations": [{ "steps": [{
        "toolCalls": [{ "name": "search", "arguments": { "q": "{{input}}", "n": 3 } }]
    }] }] });
    let provider = scripted(&script.to_string());

    let answer = assemble(&events(&provider, ask(user("say \"hi\""), true)).await);

    assert_eq!(answer.calls[0].2, r#"{"q":"say \"hi\"","n":3}"#);
}

#[tokio::test]
async fn concurrent_runs_share_one_provider() {
    let provider: Arc<dyn ModelProvider> = Arc::new(scripted(WEATHER_SCRIPT));

    let mut handles = Vec::new();
    for i in 0..16 {
        let provider = Arc::clone(&provider);
        handles.push(tokio::spawn(async move {
            assemble(&events(provider.as_ref(), ask(user(&format!("run {i}")), true)).await).text
        }));
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), format!("Hello! You said: run {i}"));
    }
}

#[tokio::test]
async fn a_delay_waits_before_answering_and_dropping_cancels() {
    let provider = scripted(r#"{"conversations":[{"steps":[{"text":"late","delay":"10s"}]}]}"#);

    let round = provider.stream(ask(user("x"), true));
    let outcome = tokio::time::timeout(Duration::from_millis(50), round).await;

    assert!(outcome.is_err(), "the answer is still being delayed");
}

#[test]
fn script_problems_are_all_reported_at_construction() {
    let ws = TempWorkspace::new();
    let path = ws.write(
        "bad.json",
        r#"{"conversations":[
            {"match":"(unclosed","steps":[{"text":"{{nope}}"}]},
            {"steps":[{"chunkSize":0}]},
            {"steps":[{"error":{"kind":"server","status":404}}]}
        ]}"#,
    );

    let error = ScriptedProvider::from_file(&path, "m").unwrap_err();

    let ProviderError::InvalidScript { message, .. } = &error else {
        panic!("expected InvalidScript, got {error:?}");
    };
    for needle in [
        "invalid `match` regex",
        "{{nope}}",
        "`chunkSize` must be at least 1",
        "a step needs",
        "status 404",
    ] {
        assert!(
            message.contains(needle),
            "`{needle}` missing from: {message}"
        );
    }
}

#[test]
fn unknown_fields_and_missing_files_are_errors() {
    let ws = TempWorkspace::new();
    let path = ws.write(
        "typo.json",
        r#"{"conversations":[{"steps":[{"txt":"hi"}]}]}"#,
    );

    let typo = ScriptedProvider::from_file(&path, "m").unwrap_err();
    let missing = ScriptedProvider::from_file(&ws.join("nope.json"), "m").unwrap_err();
    let wrong_ext = ScriptedProvider::from_file(&ws.write("s.txt", "{}"), "m").unwrap_err();

    assert!(typo.to_string().contains("unknown field `txt`"), "{typo}");
    assert!(
        matches!(missing, ProviderError::ScriptRead { .. }),
        "{missing}"
    );
    assert!(
        wrong_ext.to_string().contains(".yaml, .yml or .json"),
        "{wrong_ext}"
    );
}

#[tokio::test]
async fn a_yaml_script_works_like_json() {
    let ws = TempWorkspace::new();
    let path = ws.write(
        "resources/model.yaml",
        r#"# a comment
conversations:
  - match: "weather"
    steps:
      - toolCalls: [{ name: get_weather, arguments: { city: Paris } }]
      - text: "Sunny: {{last_tool_result}}"
  - steps:
      - text: "You said: {{input}}"
        delay: 1ms
        chunkSize: 3
"#,
    );
    let provider = ScriptedProvider::from_file(&path, "yaml").unwrap();

    let weather = assemble(&events(&provider, ask(user("weather?"), true)).await);
    let hello = assemble(&events(&provider, ask(user("hey"), true)).await);

    assert_eq!(weather.calls[0].2, r#"{"city":"Paris"}"#);
    assert_eq!(hello.text, "You said: hey");
}
