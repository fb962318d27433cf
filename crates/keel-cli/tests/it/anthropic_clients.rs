//! The official Anthropic clients against `keel serve`'s `/v1/messages`: the Python and the
//! TypeScript SDK each ask an agent whose answer needs a tool round (the model asks for
//! `read_file`, Keel runs it through the gateway, the model answers), whole and streamed,
//! with the key in `x-api-key` as the SDKs send it; malformed requests, an unknown agent and a
//! wrong key come back as the SDKs' typed errors, in Anthropic's error shape.

use std::process::Command;

use keel_test_support::test_clients::{anthropic_node, anthropic_python};
use keel_test_support::{MockLlm, Serving, TempWorkspace};
use serde_json::Value;

use crate::common::{keel_in, readme_workspace};

const KEY: &str = "sk-keel-anthropic-client";

/// The server and its workspace (dropped after the server stops).
struct Server {
    serving: Serving,
    _dir: TempWorkspace,
}

/// `keel serve` with a client key, on the README workspace (`common::readme_workspace`).
async fn serve(mock: &MockLlm) -> Server {
    let dir = readme_workspace(
        mock,
        Some(
            "{ defaultAgent: assistant, server: { apiKeys: [ { env: ANTHROPIC_CLIENT_KEY, role: client } ] } }",
        ),
    );
    Server {
        serving: keel_in(&dir).env("ANTHROPIC_CLIENT_KEY", KEY).serve(),
        _dir: dir,
    }
}

const PYTHON_CLIENT: &str = r#"
import json, sys
import urllib.request, urllib.error
import anthropic

base, key = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
ask = dict(model="assistant", max_tokens=300,
           system="Answer from the files.",
           messages=[{"role": "user", "content": "What does the README say?"}])

message = client.messages.create(**ask, metadata={"user_id": "ada"},
                                 extra_body={"temperature": 0.2})
print(json.dumps({"whole": message.content[0].text, "stop": message.stop_reason,
                  "id": message.id, "usage": message.usage.model_dump()}))
with client.messages.stream(**ask) as stream:
    text = "".join(stream.text_stream)
    final = stream.get_final_message()
print(json.dumps({"stream": text, "stop": final.stop_reason, "output": final.usage.output_tokens}))

def refused(**extra):
    try:
        client.messages.create(**extra)
    except anthropic.APIStatusError as error:
        return {"status": error.status_code, "class": type(error).__name__,
                "type": error.body["error"]["type"], "message": error.body["error"]["message"]}
    return {"status": 200}

print(json.dumps(refused(**ask, extra_body={"not_a_field": 1})))
print(json.dumps(refused(**ask, extra_body={"top_k": 5})))
structured = client.messages.create(**ask, output_config={"format": {"type": "json_schema",
    "schema": {"type": "object", "required": ["readme"], "properties": {"readme": {"type": "string"}}}}})
print(json.dumps({"structured": structured.content[0].text}))
print(json.dumps(refused(model="assistant", max_tokens=10, messages=[{"role": "user", "content": [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]}])))
print(json.dumps(refused(**dict(ask, model="nobody"))))
wrong = anthropic.Anthropic(base_url=base, api_key="sk-wrong", max_retries=0)
try:
    wrong.messages.create(**ask)
except anthropic.AuthenticationError as error:
    print(json.dumps({"status": error.status_code, "type": error.body["error"]["type"]}))
raw = urllib.request.Request(base + "/v1/messages", data=b"{not json", method="POST", headers={
    "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01"})
try:
    urllib.request.urlopen(raw)
except urllib.error.HTTPError as error:
    print(json.dumps({"status": error.code, "body": json.loads(error.read())}))
print(json.dumps(refused(**ask, extra_headers={"X-Keel-Progress": "true"})))
"#;

const NODE_CLIENT: &str = r#"
const Anthropic = require("@anthropic-ai/sdk").default;
const [base, key] = process.argv.slice(-2);
const client = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const ask = { model: "assistant", max_tokens: 300, messages: [{ role: "user", content: "What does the README say?" }] };
(async () => {
  const message = await client.messages.create(ask);
  console.log(JSON.stringify({ whole: message.content[0].text, stop: message.stop_reason, usage: message.usage }));
  const stream = client.messages.stream(ask);
  let text = "";
  stream.on("text", (piece) => { text += piece; });
  const final = await stream.finalMessage();
  console.log(JSON.stringify({ stream: text, stop: final.stop_reason, output: final.usage.output_tokens }));
  try { await client.messages.create({ ...ask, stop_sequences: "END" }); } catch (error) {
    console.log(JSON.stringify({ status: error.status, class: error.constructor.name, type: error.error.error.type, message: error.error.error.message }));
  }
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn lines(output: &std::process::Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

const ANSWER: &str = "The README says: hello from the workspace";

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_asks_an_agent_with_a_tool_round_and_reads_its_errors() {
    let python = tokio::task::block_in_place(anthropic_python);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let base = format!("http://{}", server.serving.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new(python)
            .args(["-c", PYTHON_CLIENT, &base, KEY])
            .output()
            .unwrap()
    });
    let lines = lines(&output);
    assert_eq!(lines[0]["whole"], ANSWER);
    assert_eq!(lines[0]["stop"], "end_turn");
    assert!(lines[0]["id"].as_str().unwrap().starts_with("msg_"));
    assert!(lines[0]["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(lines[0]["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(lines[1]["stream"], ANSWER);
    assert_eq!(lines[1]["stop"], "end_turn");
    assert!(lines[1]["output"].as_u64().unwrap() > 0);
    // The client's system prompt and temperature reached the first run's model.
    let requests = mock.requests();
    assert_eq!(requests[0].body["temperature"], 0.2);
    assert!(
        requests[0].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "system" && m["content"] == "Answer from the files."),
        "{}",
        requests[0].body
    );

    let unknown = &lines[2];
    assert_eq!(unknown["status"], 400);
    assert_eq!(unknown["class"], "BadRequestError");
    assert_eq!(unknown["type"], "invalid_request_error");
    assert!(
        unknown["message"].as_str().unwrap().contains("not_a_field"),
        "{unknown}"
    );
    let top_k = &lines[3];
    assert_eq!(top_k["status"], 400);
    assert!(
        top_k["message"].as_str().unwrap().contains("top_k"),
        "{top_k}"
    );
    assert_eq!(lines[4]["structured"], r#"{"readme":"hello"}"#);
    let image = &lines[5];
    assert_eq!(image["status"], 400);
    assert!(
        image["message"]
            .as_str()
            .unwrap()
            .contains("messages[0].content[0] is a `image` block"),
        "{image}"
    );
    assert_eq!(lines[6]["status"], 404);
    assert_eq!(lines[6]["class"], "NotFoundError");
    assert_eq!(lines[6]["type"], "not_found_error");
    assert_eq!(lines[7]["status"], 401);
    assert_eq!(lines[7]["type"], "authentication_error");
    assert_eq!(lines[8]["status"], 400);
    assert_eq!(lines[8]["body"]["type"], "error");
    assert_eq!(lines[8]["body"]["error"]["type"], "invalid_request_error");
    assert_eq!(
        lines[9]["status"], 400,
        "progress events would break the SDK's stream"
    );
    assert!(
        lines[9]["message"]
            .as_str()
            .unwrap()
            .contains("x-keel-progress"),
        "{}",
        lines[9]
    );
    // Nothing refused reached a model: three runs of a tool round each.
    assert_eq!(mock.request_count(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_typescript_client_asks_an_agent_with_a_tool_round() {
    let packages = tokio::task::block_in_place(anthropic_node);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let base = format!("http://{}", server.serving.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new("node")
            .args(["-e", NODE_CLIENT, &base, KEY])
            .env("NODE_PATH", packages.join("node_modules"))
            .output()
            .unwrap()
    });
    let lines = lines(&output);
    assert_eq!(lines[0]["whole"], ANSWER);
    assert_eq!(lines[0]["stop"], "end_turn");
    assert!(lines[0]["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(lines[1]["stream"], ANSWER);
    assert_eq!(lines[1]["stop"], "end_turn");
    assert_eq!(lines[2]["status"], 400);
    assert_eq!(lines[2]["class"], "BadRequestError");
    assert_eq!(lines[2]["type"], "invalid_request_error");
    assert!(
        lines[2]["message"]
            .as_str()
            .unwrap()
            .contains("stop_sequences"),
        "{}",
        lines[2]
    );
    assert_eq!(mock.request_count(), 4);
}
