//! The mock's Messages API answers, checked by the official Anthropic SDKs (Python and
//! TypeScript): streamed
//! text with a thinking block and its signature, tool use with its input split across
//! chunks, a whole answer, a 529, and an `error` event mid-stream are all read as the SDK
//! reads the API's.

use std::process::Command;

use keel_test_support::test_clients::{anthropic_node, anthropic_python};
use keel_test_support::{AnthropicSse, MockLlm, MockResponse, MockToolCall};
use serde_json::Value;

const SCRIPT: &str = r#"
import json, sys
import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-test", max_retries=0)
ask = dict(model="claude-mock", max_tokens=100, messages=[{"role": "user", "content": "hi"}])

def blocks(message):
    return [block.model_dump(exclude_none=True) for block in message.content]

with client.messages.stream(**ask) as stream:
    message = stream.get_final_message()
print(json.dumps({"stop": message.stop_reason, "usage": message.usage.model_dump(), "content": blocks(message)}))
with client.messages.stream(**ask) as stream:
    message = stream.get_final_message()
print(json.dumps({"stop": message.stop_reason, "content": blocks(message)}))
message = client.messages.create(**ask)
print(json.dumps({"stop": message.stop_reason, "content": blocks(message)}))
try:
    client.messages.create(**ask)
except anthropic.APIStatusError as error:
    print(json.dumps({"status": error.status_code, "type": error.body["error"]["type"]}))
try:
    with client.messages.stream(**ask) as stream:
        stream.get_final_message()
except anthropic.APIError as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error)}))
"#;

/// The same checks with the TypeScript SDK.
const NODE_SCRIPT: &str = r#"
const Anthropic = require("@anthropic-ai/sdk").default;
const client = new Anthropic({ baseURL: process.argv[process.argv.length - 1], apiKey: "sk-ant-test", maxRetries: 0 });
const ask = { model: "claude-mock", max_tokens: 100, messages: [{ role: "user", content: "hi" }] };
(async () => {
  let message = await client.messages.stream(ask).finalMessage();
  console.log(JSON.stringify({ stop: message.stop_reason, usage: message.usage, content: message.content }));
  message = await client.messages.stream(ask).finalMessage();
  console.log(JSON.stringify({ stop: message.stop_reason, content: message.content }));
  message = await client.messages.create(ask);
  console.log(JSON.stringify({ stop: message.stop_reason, content: message.content }));
  try { await client.messages.create(ask); } catch (error) {
    console.log(JSON.stringify({ status: error.status, type: error.error.error.type }));
  }
  try { await client.messages.stream(ask).finalMessage(); } catch (error) {
    console.log(JSON.stringify({ error: error.constructor.name, message: String(error.message) }));
  }
})();
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_reads_the_mocks_messages_answers() {
    let python = anthropic_python();
    check(Command::new(python).args(["-c", SCRIPT])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_typescript_sdk_reads_the_mocks_messages_answers() {
    let packages = anthropic_node();
    let mut node = Command::new("node");
    node.args(["-e", NODE_SCRIPT])
        .env("NODE_PATH", packages.join("node_modules"));
    check(&mut node).await;
}

/// Runs `client` (its last argument the mock's base URL) against the five answers and
/// checks what it read.
async fn check(client: &mut Command) {
    let mock = MockLlm::start().await;
    mock.push(
        AnthropicSse::new()
            .message_start(12, 3, 4)
            .ping()
            .thinking_block(0, "Let me think.", "sig-abc")
            .text_block(1, &["Hello ", "there."])
            .end("end_turn", 2)
            .response(),
    );
    mock.push(MockResponse::anthropic_tool_use(&[MockToolCall::new(
        "toolu_1",
        "get_weather",
        [r#"{"ci"#, r#"ty": "Par"#, r#"is"}"#],
    )]));
    mock.push(MockResponse::json(&serde_json::json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-mock",
        "content": [{"type": "text", "text": "Whole."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    })));
    mock.push(MockResponse::anthropic_error(
        529,
        "overloaded_error",
        "Overloaded",
    ));
    mock.push(
        AnthropicSse::new()
            .message_start(5, 0, 0)
            .text_block(0, &["Half"])
            .error("overloaded_error", "Overloaded")
            .response(),
    );
    client.arg(format!("http://{}", mock.addr()));
    let output = tokio::task::block_in_place(|| client.output().unwrap());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["stop"], "end_turn");
    assert_eq!(lines[0]["content"][0]["type"], "thinking");
    assert_eq!(lines[0]["content"][0]["thinking"], "Let me think.");
    assert_eq!(lines[0]["content"][0]["signature"], "sig-abc");
    assert_eq!(lines[0]["content"][1]["text"], "Hello there.");
    assert_eq!(lines[0]["usage"]["cache_read_input_tokens"], 4);
    assert_eq!(lines[1]["stop"], "tool_use");
    assert_eq!(
        lines[1]["content"][0]["input"],
        serde_json::json!({"city": "Paris"})
    );
    assert_eq!(lines[2]["content"][0]["text"], "Whole.");
    assert_eq!(lines[3]["status"], 529);
    assert_eq!(lines[3]["type"], "overloaded_error");
    assert!(
        lines[4]["message"].as_str().unwrap().contains("Overloaded"),
        "{}",
        lines[4]
    );
    // Every request reached the mock's Messages endpoint.
    assert!(mock.requests().iter().all(|r| r.path == "/v1/messages"));
}
