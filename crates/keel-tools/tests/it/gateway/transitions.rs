//! The only ways past the guard's verdict: a refusal takes a call away from running, and a
//! re-check hands it arguments the gateway checked again. Neither can make a tool see
//! arguments that failed its schema.

use std::path::Path;

use keel_types::GuardDecision;
use keel_workspace::GatewayMode;
use serde_json::json;

use keel_tools::gateway::{Gateway, Guarded};

use super::{call, gateway_of, guard, tools};

/// The gateway's verdict on a `get_weather` call with `arguments` (id `id`).
async fn weather(gateway: &Gateway, id: &str, arguments: &str) -> Guarded {
    let mut call = call("get_weather", arguments);
    call.id = id.into();
    guard(gateway, &call, GatewayMode::Repair).await
}

#[tokio::test]
async fn a_refused_call_never_reaches_its_tool_and_the_model_gets_the_reason() {
    let tools = tools();
    let gateway = gateway_of(&tools);
    let mut verdict = weather(&gateway, "call_1", r#"{"city":"Paris"}"#).await;
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
    let mut verdict = weather(&gateway, "call_1", r#"{"city":"Paris","days":"3"}"#).await;
    assert_eq!(verdict.decision(), GuardDecision::Repaired, "{verdict:?}");
    let recheck = weather(&gateway, "call_1", r#"{"city":"Lyon","days":2}"#).await;

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
    let mut verdict = weather(&gateway, "call_1", r#"{"city":"Paris"}"#).await;
    let recheck = weather(&gateway, "call_1", r#"{"city":"Paris","days":"many"}"#).await;
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
    let mut verdict = weather(&gateway, "call_1", r#"{"city":"Paris"}"#).await;
    let recheck = weather(&gateway, "call_2", r#"{"city":"Lyon"}"#).await;
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
    let mut verdict = weather(&gateway, "call_1", r#"{"city":"Paris"}"#).await;
    verdict.refuse("stopped");
    let recheck = weather(&gateway, "call_1", r#"{"city":"Lyon"}"#).await;

    verdict.adopt_recheck(recheck);

    assert!(!verdict.is_allowed());
    assert_eq!(verdict.arguments(), None);
    assert_eq!(verdict.blocked_message(), "stopped");
}
