//! The official OpenAI clients against `keel serve`: the Python and the JavaScript SDK each do
//! a non-streamed and a streamed chat completion whose answer needs a tool round trip (the
//! model asks for `read_file`, Keel runs it through the gateway, the model answers).
//!
//! The clients are installed on first use from the package registries into `target/`
//! (a Python venv with `openai`, and `openai` from npm), so `cargo nextest run` works on a
//! fresh machine with `python3` and `node`/`npm`.

use std::process::Command;

use keel_test_support::test_clients::{openai_node, openai_python};
use keel_test_support::{MockLlm, Serving, TempWorkspace};

use crate::common::{keel_in, readme_workspace};

/// The server and its workspace (dropped after the server stops).
struct Server {
    serving: Serving,
    _dir: TempWorkspace,
}

/// `keel serve` on the README workspace (`common::readme_workspace`).
async fn serve(mock: &MockLlm) -> Server {
    let dir = readme_workspace(mock, None);
    Server {
        serving: keel_in(&dir).serve(),
        _dir: dir,
    }
}

const PYTHON_CLIENT: &str = r#"
import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="unused")
messages = [{"role": "user", "content": "What does the README say?"}]
reply = client.chat.completions.create(model="assistant", messages=messages)
print("non-stream:", reply.choices[0].message.content, "| tokens:", reply.usage.total_tokens)
text = ""
usage = None
for chunk in client.chat.completions.create(model="assistant", messages=messages, stream=True,
                                            stream_options={"include_usage": True}):
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage.total_tokens
print("stream:", text, "| tokens:", usage)
print("models:", [m.id for m in client.models.list()])
# Tools sent by the client are ignored: the workspace inventory applies. A session header
# makes the request a turn of a stored session.
reply = client.chat.completions.create(
    model="assistant", messages=messages,
    tools=[{"type": "function", "function": {"name": "delete_everything",
                                             "parameters": {"type": "object", "properties": {}}}}],
    extra_headers={"X-Keel-Session": "py-session"})
print("with client tools:", reply.choices[0].message.content)
"#;

const JS_CLIENT: &str = r#"
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.KEEL_BASE_URL, apiKey: "unused" });
  const messages = [{ role: "user", content: "What does the README say?" }];
  const reply = await client.chat.completions.create({ model: "assistant", messages });
  console.log("non-stream:", reply.choices[0].message.content, "| tokens:", reply.usage.total_tokens);
  let text = "";
  let usage = null;
  const stream = await client.chat.completions.create({ model: "assistant", messages, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.choices.length && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
    if (chunk.usage) usage = chunk.usage.total_tokens;
  }
  console.log("stream:", text, "| tokens:", usage);
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn assert_answers(output: &std::process::Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = "The README says: hello from the workspace";
    assert!(
        stdout.contains(&format!("non-stream: {expected} | tokens:")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("stream: {expected} | tokens:")),
        "{stdout}"
    );
    assert!(
        !stdout.contains("tokens: None") && !stdout.contains("tokens: null"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_completes_with_a_tool_round_trip() {
    let python = tokio::task::block_in_place(openai_python);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let base = format!("http://{}/v1", server.serving.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new(python)
            .args(["-c", PYTHON_CLIENT, &base])
            .output()
            .unwrap()
    });
    assert_answers(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("models: ['assistant']"), "{stdout}");
    assert!(
        stdout.contains("with client tools: The README says: hello from the workspace"),
        "{stdout}"
    );
    // Three completions, each with a tool round trip: six model requests, every one offering
    // the workspace's tool only.
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    for request in &requests {
        let tools: Vec<&str> = request.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["read_file"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_javascript_client_completes_with_a_tool_round_trip() {
    let prefix = tokio::task::block_in_place(openai_node);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let base = format!("http://{}/v1", server.serving.addr());
    let output = tokio::task::block_in_place(|| {
        Command::new("node")
            .args(["-e", JS_CLIENT])
            .env("KEEL_BASE_URL", &base)
            .env("NODE_PATH", prefix.join("node_modules"))
            .output()
            .unwrap()
    });
    assert_answers(&output);
    assert_eq!(mock.request_count(), 4);
}

#[tokio::test]
async fn sigterm_stops_keel_serve_gracefully() {
    let mock = MockLlm::start().await;
    let mut server = serve(&mock).await;
    let status = Command::new("kill")
        .args(["-TERM", &server.serving.child().id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exited = None;
    for _ in 0..200 {
        if let Some(status) = server.serving.child().try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let exited = exited.expect("keel serve exits after SIGTERM");
    assert_eq!(exited.code(), Some(0));
    assert!(std::net::TcpStream::connect(server.serving.addr()).is_err());
}
