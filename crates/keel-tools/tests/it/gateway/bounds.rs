//! What a blocked call sends back and records stays small, whatever the model sent: values
//! over 256 characters are quoted by prefix, size and SHA-256.

use keel_tools::gateway::quote;
use keel_workspace::GatewayMode;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{call, gateway_of, guard, tools};

const BIG: usize = 256 * 1024;

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_256_kib_bad_string_yields_a_small_message_and_record() {
    let huge = "k".repeat(BIG);
    let raw = json!({ "city": "Paris", "unit": huge, "extra": huge }).to_string();
    let tools = tools();
    let verdict = guard(
        &gateway_of(&tools),
        &call("get_weather", &raw),
        GatewayMode::Repair,
    )
    .await;

    assert!(!verdict.is_allowed());
    let message = verdict.blocked_message();
    assert!(
        message.len() < 4 * 1024,
        "{} bytes: {message}",
        message.len()
    );
    let issue = &verdict.issues()[0];
    assert_eq!(issue.path, "/unit");
    let rendered = serde_json::to_string(&huge).unwrap();
    let expected = format!(
        "{}… ({} bytes, sha256 {})",
        &rendered[..64],
        rendered.len(),
        sha256_hex(&rendered)
    );
    assert_eq!(issue.found, expected);
    assert!(issue.message.contains(&expected), "{}", issue.message);
    assert!(issue.message.len() < 1024, "{}", issue.message);
    // The repair tried before blocking (the unknown property dropped) is bounded too.
    let recorded = serde_json::to_string(verdict.repairs()).unwrap();
    assert!(recorded.len() < 1024, "{recorded}");
    assert!(recorded.contains(&sha256_hex(&rendered)), "{recorded}");
    // What the guard event stores instead of the raw text.
    let stored = quote(&raw);
    assert!(stored.len() < 512, "{stored}");
    assert!(stored.contains(&sha256_hex(&raw)));
}

#[tokio::test]
async fn unparseable_huge_text_and_huge_tool_names_are_quoted() {
    let raw = format!("{{\"city\": \"{}", "x".repeat(BIG));
    let tools = tools();
    let gateway = gateway_of(&tools);
    let verdict = guard(&gateway, &call("get_weather", &raw), GatewayMode::Validate).await;
    assert!(verdict.blocked_message().len() < 4 * 1024);
    assert!(verdict.issues()[0].found.ends_with(&format!(
        "({} bytes, sha256 {})",
        raw.len(),
        sha256_hex(&raw)
    )));

    let name = "t".repeat(BIG);
    let verdict = guard(&gateway, &call(&name, "{}"), GatewayMode::Repair).await;
    assert!(verdict.blocked_message().len() < 4 * 1024);
}

#[test]
fn short_text_is_quoted_as_is() {
    let text = "é".repeat(256);
    assert_eq!(quote(&text), text.as_str());
    let longer = "é".repeat(257);
    let quoted = quote(&longer);
    assert!(quoted.starts_with(&"é".repeat(64)), "{quoted}");
    assert!(quoted.contains("(514 bytes, sha256 "), "{quoted}");
}
