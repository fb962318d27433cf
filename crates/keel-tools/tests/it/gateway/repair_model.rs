//! The optional repair model: asked once, only in `repair` mode and only for what
//! deterministic repairs left; its answer is re-validated and checked, and any failure blocks
//! the call with the remaining issues instead of failing the call path.

use std::time::Duration;

use keel_types::{GuardDecision, ModelError, Role};
use keel_workspace::GatewayMode;
use serde_json::json;

use super::{Answer, FakeModel, call, gateway_of, guard, tools, weather_schema};

fn text(answer: &str) -> Answer {
    Answer::Text(answer.to_owned())
}

#[tokio::test]
async fn model_fixes_what_deterministic_repairs_could_not() {
    let model = FakeModel::answering([text(
        "Here are the fixed arguments:\n```json\n{\"city\":\"Paris\",\"days\":3,\"unit\":\"celsius\"}\n```",
    )]);
    let tools = tools();
    let gateway = gateway_of(&tools).with_repair_model(model.clone());

    let verdict = guard(
        &gateway,
        &call(
            "get_weather",
            r#"{"city":"Paris","days":"three","unit":"Celsius"}"#,
        ),
        GatewayMode::Repair,
    )
    .await;

    assert_eq!(verdict.decision(), GuardDecision::Repaired, "{verdict:?}");
    assert_eq!(
        verdict.arguments(),
        Some(&json!({ "city": "Paris", "days": 3, "unit": "celsius" }))
    );
    let kinds: Vec<_> = verdict.repairs().iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, vec!["enum_case", "repair_model"]);
    let model_repair = &verdict.repairs()[1];
    assert_eq!(model_repair.path, "");
    assert_eq!(
        model_repair.from,
        json!({ "city": "Paris", "days": "three", "unit": "celsius" }),
        "the model starts from the deterministically repaired arguments"
    );
    assert!(
        verdict.repair_note().unwrap().contains("(repair_model)"),
        "{:?}",
        verdict.repair_note()
    );

    // What the model was asked.
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert!(!request.stream);
    assert!(request.tools.is_empty());
    assert_eq!(request.messages[0].role, Role::System);
    assert!(request.messages[0].content.contains("JSON object"));
    let user = &request.messages[1].content;
    assert!(user.contains("Tool: get_weather"), "{user}");
    assert!(user.contains(&weather_schema().to_string()), "{user}");
    assert!(user.contains(r#""days":"three""#), "{user}");
    assert!(
        user.contains(r#"- /days: expected integer, found string "three""#),
        "{user}"
    );
}

#[tokio::test]
async fn model_is_not_asked_when_deterministic_repairs_suffice_or_the_call_is_valid() {
    let model = FakeModel::answering([]);
    let gateway = gateway_of(&tools()).with_repair_model(model.clone());
    for args in [r#"{"city":"Paris"}"#, r#"{"city":"Paris","days":"3"}"#] {
        let verdict = guard(&gateway, &call("get_weather", args), GatewayMode::Repair).await;
        assert!(verdict.is_allowed(), "{verdict:?}");
    }
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn model_is_not_asked_in_validate_or_off_mode() {
    let model = FakeModel::answering([text(r#"{"city":"Paris"}"#)]);
    let gateway = gateway_of(&tools()).with_repair_model(model.clone());
    let validate = guard(&gateway, &call("get_weather", "{}"), GatewayMode::Validate).await;
    let off = guard(&gateway, &call("get_weather", "{nope"), GatewayMode::Off).await;
    assert_eq!(validate.decision(), GuardDecision::Blocked);
    assert_eq!(off.decision(), GuardDecision::Blocked);
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn model_error_blocks_with_the_remaining_issues() {
    let model = FakeModel::answering([Answer::Fail(ModelError::Server {
        status: 503,
        message: "overloaded".into(),
    })]);
    let gateway = gateway_of(&tools()).with_repair_model(model.clone());

    let verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris","days":"three","x":1}"#),
        GatewayMode::Repair,
    )
    .await;

    assert_eq!(verdict.decision(), GuardDecision::Blocked);
    assert_eq!(model.request_count(), 1);
    let paths: Vec<_> = verdict.issues().iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, vec!["/days"], "only what repairs left: {verdict:?}");
    let kinds: Vec<_> = verdict.repairs().iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, vec!["drop_unknown"]);
    assert_eq!(verdict.repair_note(), None);
}

#[tokio::test]
async fn invalid_or_unreadable_answers_block() {
    for answer in [
        r#"{"city":"Paris","days":"three"}"#,
        r#"{"city":"Paris","days":99}"#,
        "I am not sure what you mean.",
        "[1, 2, 3]",
        "",
    ] {
        let model = FakeModel::answering([text(answer)]);
        let gateway = gateway_of(&tools()).with_repair_model(model.clone());
        let verdict = guard(
            &gateway,
            &call("get_weather", r#"{"city":"Paris","days":"three"}"#),
            GatewayMode::Repair,
        )
        .await;
        assert_eq!(verdict.decision(), GuardDecision::Blocked, "{answer}");
        assert_eq!(verdict.issues()[0].path, "/days", "{answer}");
        assert_eq!(model.request_count(), 1);
    }
}

#[tokio::test]
async fn a_hanging_model_times_out_and_blocks() {
    let model = FakeModel::answering([Answer::Hang]);
    let gateway = gateway_of(&tools())
        .with_repair_model(model.clone())
        .with_repair_timeout(Duration::from_millis(50));
    let verdict = guard(&gateway, &call("get_weather", "{}"), GatewayMode::Repair).await;
    assert_eq!(verdict.decision(), GuardDecision::Blocked);
    assert_eq!(verdict.issues()[0].expected, "required property \"city\"");
}

#[tokio::test]
async fn model_answer_still_passes_the_tools_check() {
    let model = FakeModel::answering([text(r#"{"path":"../../etc/passwd"}"#)]);
    let tools = tools();
    let gateway = gateway_of(&tools).with_repair_model(model.clone());
    let verdict = guard(
        &gateway,
        &call("read_notes", r#"{"file":"a.md"}"#),
        GatewayMode::Repair,
    )
    .await;
    assert_eq!(verdict.decision(), GuardDecision::Blocked);
    assert_eq!(verdict.issues()[0].path, "/path");
    assert!(verdict.issues()[0].message.contains("leaves the workspace"));
    assert!(tools.iter().all(|t| t.calls.lock().unwrap().is_empty()));
}

#[tokio::test]
async fn model_answer_gets_the_deterministic_clean_up() {
    let model = FakeModel::answering([text(r#"{"city":"Paris","days":"4"}"#)]);
    let gateway = gateway_of(&tools()).with_repair_model(model);
    let verdict = guard(
        &gateway,
        &call("get_weather", r#"{"town":"Paris"}"#),
        GatewayMode::Repair,
    )
    .await;
    assert_eq!(verdict.decision(), GuardDecision::Repaired, "{verdict:?}");
    assert_eq!(
        verdict.arguments(),
        Some(&json!({ "city": "Paris", "days": 4 }))
    );
    let last = verdict.repairs().last().unwrap();
    assert_eq!(last.kind.as_str(), "repair_model");
    assert_eq!(last.from, json!({}));
    assert_eq!(last.to, json!({ "city": "Paris", "days": 4 }));
}

#[tokio::test]
async fn model_can_repair_unparseable_argument_text() {
    let model = FakeModel::answering([text(r#"{"city":"Paris"}"#)]);
    let gateway = gateway_of(&tools()).with_repair_model(model.clone());
    let verdict = guard(
        &gateway,
        &call("get_weather", "{'city': 'Paris',}"),
        GatewayMode::Repair,
    )
    .await;
    assert_eq!(verdict.decision(), GuardDecision::Repaired, "{verdict:?}");
    assert_eq!(verdict.repairs()[0].from, json!("{'city': 'Paris',}"));
    let user = &model.requests.lock().unwrap()[0].messages[1].content;
    assert!(
        user.contains("expected arguments as a JSON object"),
        "{user}"
    );
}

#[tokio::test]
async fn model_never_changes_which_tool_runs() {
    // Even an answer shaped like another tool's arguments only feeds the resolved tool.
    let model = FakeModel::answering([text(r#"{"name":"x","enabled":true}"#)]);
    let gateway = gateway_of(&tools()).with_repair_model(model);
    let verdict = guard(
        &gateway,
        &call("get_wether", r#"{"days":2}"#),
        GatewayMode::Repair,
    )
    .await;
    assert_eq!(verdict.tool(), "get_weather");
    assert_eq!(verdict.decision(), GuardDecision::Blocked);
}
