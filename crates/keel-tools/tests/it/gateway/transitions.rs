//! The only ways past the guard's verdict: a refusal takes a call away from running, and a
//! re-check hands it arguments the gateway checked again. Neither can make a tool see
//! arguments that failed its schema.

use std::path::Path;

use keel_types::GuardDecision;
use keel_workspace::GatewayMode;
use serde_json::json;

use super::{call, gateway_of, guard, tools};

#[tokio::test]
async fn a_refused_call_never_reaches_its_tool_and_the_model_gets_the_reason() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris"}"#),
        GatewayMode::Repair,
    )
    .await;
    assert!(verdict.is_allowed(), "{verdict:?}");

    verdict.refuse("denied by policy");

    assert_eq!(verdict.decision(), GuardDecision::Blocked);
    assert_eq!(verdict.arguments(), None);
    assert_eq!(verdict.refusal(), Some("denied by policy"));
    assert_eq!(verdict.blocked_message(), "denied by policy");
    let refused = gateway
        .execute(&crate::ctx(Path::new(".")), &verdict)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("denied by policy"),
        "{refused}"
    );
    assert!(tools[0].calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_recheck_that_passes_replaces_the_arguments_and_keeps_the_decision() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris","days":"3"}"#),
        GatewayMode::Repair,
    )
    .await;
    assert_eq!(verdict.decision(), GuardDecision::Repaired, "{verdict:?}");
    let recheck = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Lyon","days":2}"#),
        GatewayMode::Repair,
    )
    .await;

    verdict.adopt_recheck(recheck);

    assert_eq!(verdict.decision(), GuardDecision::Repaired);
    let arguments = verdict.arguments().unwrap();
    assert_eq!(arguments["city"], json!("Lyon"));
    assert_eq!(arguments["days"], json!(2));
    gateway
        .execute(&crate::ctx(Path::new(".")), &verdict)
        .await
        .unwrap();
    let received = tools[0].calls.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["city"], json!("Lyon"));
}

#[tokio::test]
async fn a_recheck_that_fails_refuses_the_call_with_the_recheck_issues() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris"}"#),
        GatewayMode::Repair,
    )
    .await;
    let recheck = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris","days":"many"}"#),
        GatewayMode::Repair,
    )
    .await;
    assert!(!recheck.is_allowed(), "{recheck:?}");
    let expected = recheck.blocked_message();

    verdict.adopt_recheck(recheck);

    assert_eq!(verdict.decision(), GuardDecision::Blocked);
    assert_eq!(verdict.arguments(), None);
    assert_eq!(verdict.blocked_message(), expected);
    assert!(expected.contains("/days"), "{expected}");
    assert!(
        gateway
            .execute(&crate::ctx(Path::new(".")), &verdict)
            .await
            .is_err()
    );
    assert!(tools[0].calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_recheck_of_another_call_refuses_instead_of_lending_its_arguments() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris"}"#),
        GatewayMode::Repair,
    )
    .await;
    let mut other = call("get_weather", r#"{"city":"Lyon"}"#);
    other.id = "call_2".into();
    let recheck = guard(&gateway, &other, GatewayMode::Repair).await;
    assert!(recheck.is_allowed());

    verdict.adopt_recheck(recheck);

    assert!(!verdict.is_allowed());
    assert!(
        verdict.blocked_message().contains("is not this call"),
        "{}",
        verdict.blocked_message()
    );
}

#[tokio::test]
async fn a_refused_call_stays_refused_whatever_recheck_comes_after() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Paris"}"#),
        GatewayMode::Repair,
    )
    .await;
    verdict.refuse("stopped");
    let recheck = guard(
        &gateway,
        &call("get_weather", r#"{"city":"Lyon"}"#),
        GatewayMode::Repair,
    )
    .await;

    verdict.adopt_recheck(recheck);

    assert!(!verdict.is_allowed());
    assert_eq!(verdict.arguments(), None);
    assert_eq!(verdict.blocked_message(), "stopped");
}
