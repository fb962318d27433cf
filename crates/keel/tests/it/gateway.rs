//! The gateway in a whole run: invalid arguments never reach the tool, the model is told
//! exactly what was wrong, and its corrected call goes through.

use std::sync::Arc;

use keel::{EventPayload, GuardDecision};
use keel::{RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};
use serde_json::{Value, json};

use crate::common::{self, RecordingTool, assert_well_formed};

#[tokio::test]
async fn invalid_arguments_are_blocked_and_the_corrected_call_succeeds() {
    let mock = MockLlm::start().await;
    // Round 1: wrong type for `city`, an unknown property, and an enum value not allowed.
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_bad",
        "get_weather",
        [r#"{"city": 42, "unit": "kelvin", "extra": true}"#],
    )]));
    // Round 2: the model corrects itself.
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_good",
        "get_weather",
        [r#"{"city": "Paris", "unit": "c"}"#],
    )]));
    mock.push(MockResponse::text(["Sunny, 21°C."]));
    // `validate` mode: no repairs, every issue of the call as sent is reported.
    let ws = common::workspace(
        &mock.base_url(),
        &["get_weather"],
        "  gateway: { mode: validate }\n",
    );
    let tool = RecordingTool::weather();
    let calls = tool.calls.clone();
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .tool(Arc::new(tool))
        .build()
        .unwrap();

    let (response, _) = common::run(&runtime, "Weather in Paris?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    // The implementation only ever saw the valid call.
    assert_eq!(
        *calls.lock().unwrap(),
        vec![json!({ "city": "Paris", "unit": "c" })]
    );

    // The model received the structured issues as the result of the blocked call.
    let requests = mock.requests();
    let feedback: Value =
        serde_json::from_str(requests[1].last_content_of("tool").unwrap()).unwrap();
    let issues = feedback["issues"].as_array().unwrap();
    let paths: Vec<&str> = issues.iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/city"), "{feedback}");
    assert!(paths.contains(&"/unit"), "{feedback}");
    assert!(
        paths.contains(&""),
        "the unknown property is reported on the object: {feedback}"
    );
    let city = issues.iter().find(|i| i["path"] == "/city").unwrap();
    assert_eq!(city["expected"], "string");
    assert_eq!(city["found"], "integer 42");

    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    let decisions: Vec<GuardDecision> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolGuard { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        vec![GuardDecision::Blocked, GuardDecision::Accepted]
    );
    let tool_starts = events
        .iter()
        .filter(|e| {
            matches!(
                &e.payload,
                EventPayload::Adapter {
                    event: keel::AdapterEvent::ToolStart { .. }
                }
            )
        })
        .count();
    assert_eq!(tool_starts, 1, "a blocked call never starts");
}

#[tokio::test]
async fn a_tool_outside_the_inventory_is_blocked_even_if_registered() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "write_file",
        [r#"{"path": "pwned.txt", "content": "x"}"#],
    )]));
    mock.push(MockResponse::text(["I cannot write files."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Write a file").await;

    assert_eq!(response.status, RunStatus::Completed);
    assert!(!ws.join("pwned.txt").exists());
    let feedback = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(
        feedback.contains("not available to this agent"),
        "{feedback}"
    );
    // And the model was never offered the tool.
    let offered: Vec<String> = mock.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered, vec!["read_file"]);
}

#[tokio::test]
async fn repairable_calls_are_repaired_and_the_model_is_told() {
    let mock = MockLlm::start().await;
    // A misspelled tool name, an enum in the wrong case, a number as a string, an extra field.
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "Get_Weather",
        [r#"{"city": "Oslo", "unit": "C", "extra": 1}"#],
    )]));
    mock.push(MockResponse::text(["Cold."]));
    let ws = common::workspace(&mock.base_url(), &["get_weather"], "");
    let tool = RecordingTool::weather();
    let calls = tool.calls.clone();
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .tool(Arc::new(tool))
        .build()
        .unwrap();

    let (response, _) = common::run(&runtime, "Weather in Oslo?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        *calls.lock().unwrap(),
        vec![json!({ "city": "Oslo", "unit": "c" })]
    );
    let events = common::stored(&runtime, &response).await;
    let (decision, kinds, resolved) = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolGuard {
                decision,
                repairs,
                resolved_tool,
                ..
            } => Some((
                *decision,
                repairs.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
                resolved_tool.clone(),
            )),
            _ => None,
        })
        .unwrap();
    assert_eq!(decision, GuardDecision::Repaired);
    assert_eq!(resolved.as_deref(), Some("get_weather"));
    for kind in ["tool_name", "enum_case", "drop_unknown"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    let seen = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(seen.contains("the gateway repaired this call"), "{seen}");
}

/// Runs one weather call the model sends as `tool` with `arguments` (the gateway blocks it);
/// returns the tool message the model got back and the stored `runtime.tool.guard` as JSON.
async fn blocked_call(tool: &str, arguments: &str) -> (String, String) {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        tool,
        [arguments],
    )]));
    mock.push(MockResponse::text(["Sorry."]));
    let ws = common::workspace(&mock.base_url(), &["get_weather"], "");
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .tool(Arc::new(RecordingTool::weather()))
        .build()
        .unwrap();

    let (response, _) = common::run(&runtime, "Weather?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let feedback = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    let events = common::stored(&runtime, &response).await;
    let guard = events
        .iter()
        .find(|e| matches!(e.payload, EventPayload::ToolGuard { .. }))
        .unwrap();
    (feedback, serde_json::to_string(guard).unwrap())
}

#[tokio::test]
async fn a_huge_bad_argument_stays_small_in_the_tool_message_and_the_guard_event() {
    let huge = "k".repeat(256 * 1024);
    let raw = json!({ "city": "Paris", "unit": huge }).to_string();

    let (feedback, stored) = blocked_call("get_weather", &raw).await;

    assert!(feedback.len() < 4 * 1024, "{} bytes", feedback.len());
    assert!(feedback.contains("bytes, sha256 "), "{feedback}");
    assert!(stored.len() < 8 * 1024, "{} bytes", stored.len());
    // The issue quotes the bad value by its size and hash; the arguments, shortened text that
    // is no longer JSON, are recorded by digest like any external tool's arguments that may
    // hold written contents.
    assert!(stored.contains("bytes, sha256 "), "{stored}");
    let guard: serde_json::Value = serde_json::from_str(&stored).unwrap();
    let arguments: serde_json::Value =
        serde_json::from_str(guard["arguments"].as_str().unwrap()).unwrap();
    assert!(arguments["sha256"].is_string(), "{stored}");
}

#[tokio::test]
async fn a_huge_unknown_tool_name_stays_small_in_the_guard_event() {
    let name = "n".repeat(64 * 1024);

    let (_, stored) = blocked_call(&name, "{}").await;

    assert!(stored.len() < 8 * 1024, "{} bytes", stored.len());
    assert!(stored.contains(&format!("({} bytes, sha256 ", name.len())));
}

#[tokio::test]
async fn a_run_must_read_a_file_before_it_overwrites_it() {
    let mock = MockLlm::start().await;
    let overwrite = r##"{"path": "README.md", "content": "# Replaced\n"}"##;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_blind",
        "write_file",
        [overwrite],
    )]));
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_read",
        "read_file",
        [r#"{"path": "README.md"}"#],
    )]));
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_write",
        "write_file",
        [overwrite],
    )]));
    mock.push(MockResponse::text(["Done."]));
    let ws = common::workspace(&mock.base_url(), &["read_file", "write_file"], "");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let mut handle = runtime
        .request(keel::RequestOptions {
            input: "Replace the README".into(),
            mode: Some(keel::PermissionMode::AcceptEdits),
            ..Default::default()
        })
        .await
        .unwrap();
    while handle.next_event().await.is_some() {}
    let response = handle.wait().await.unwrap();

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let refusal = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(
        refusal.contains("`README.md` already exists and this run has not read it"),
        "{refusal}"
    );
    let written = mock.requests()[3]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(written.starts_with("wrote "), "{written}");
    let on_disk = std::fs::read_to_string(ws.join("README.md")).unwrap();
    assert_eq!(on_disk, "# Replaced\n");
}
