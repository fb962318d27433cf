//! Real clients with their usual model parameters against `keel serve`: the official OpenAI
//! Python and JavaScript SDKs, LangChain's `ChatOpenAI(temperature=0, max_tokens=…)` and the
//! OpenAI Agents SDK with `ModelSettings` — each sets sampling parameters and asks for a
//! structured answer (`response_format`), and Keel honours them: the mock model behind Keel
//! receives the parameters in every round, and the structured answer comes back as JSON the
//! client parses into its own type.
//!
//! The clients are installed on first use into `target/test-clients` (pinned, see
//! `keel_test_support::test_clients`).

use std::path::Path;
use std::process::{Command, Output};

use keel_test_support::test_clients::{
    langchain_openai, openai_agents, openai_node, openai_python,
};
use keel_test_support::{MockLlm, MockResponse, Serving, TempWorkspace, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

/// The server and its workspace (dropped after the server stops).
struct Server {
    serving: Serving,
    _dir: TempWorkspace,
}

impl Server {
    fn base(&self) -> String {
        format!("http://{}/v1", self.serving.addr())
    }
}

/// What the mock model answers when Keel's prompt asks for JSON (a structured output).
const WEATHER: &str = r#"{"city": "Paris", "celsius": 21}"#;

/// `keel serve` whose agent `assistant` runs on the mock: a JSON answer when the prompt asks
/// for a JSON Schema, text otherwise.
async fn serve(mock: &MockLlm) -> Server {
    mock.respond_with(|request| {
        let asks_for_json = request.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["role"] == "system"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("JSON Schema"))
            });
        match asks_for_json {
            true => MockResponse::text([WEATHER]),
            false => MockResponse::text(["Hello ", "from Keel."]),
        }
    });
    let dir = WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent(
            "assistant",
            "{ model: mock, facade: { clamp: { maxTokens: 64 } } }",
        )
        .build();
    Server {
        serving: keel_in(&dir).serve(),
        _dir: dir,
    }
}

/// Runs `program` and asserts it succeeded; returns its stdout.
fn run(mut command: Command) -> String {
    let output: Output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn python(python: &Path, script: &str, base: &str) -> String {
    let mut command = Command::new(python);
    command
        .args(["-c", script, base])
        // No client reaches for the network or a user's settings.
        .env("OPENAI_API_KEY", "unused")
        .env_remove("OPENAI_BASE_URL")
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1");
    tokio::task::block_in_place(|| run(command))
}

/// Every request Keel sent the model carried `temperature` 0 and `max_tokens` `max`.
fn assert_every_round_has(mock: &MockLlm, max: u64, at_least: usize) -> Vec<Value> {
    let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    assert!(bodies.len() >= at_least, "{} model requests", bodies.len());
    for body in &bodies {
        assert_eq!(body["temperature"].as_f64(), Some(0.0), "{body}");
        assert_eq!(body["max_tokens"].as_u64(), Some(max), "{body}");
    }
    bodies
}

const OPENAI_PYTHON: &str = r#"
import sys
from openai import OpenAI
from pydantic import BaseModel

class Weather(BaseModel):
    city: str
    celsius: int

client = OpenAI(base_url=sys.argv[1], api_key="unused")
messages = [{"role": "user", "content": "Say hello"}]
settings = dict(temperature=0, max_tokens=32, top_p=1, stop=["END"], seed=7,
                presence_penalty=0, frequency_penalty=0)
reply = client.chat.completions.create(model="assistant", messages=messages, **settings)
print("non-stream:", reply.choices[0].message.content)
text = ""
for chunk in client.chat.completions.create(model="assistant", messages=messages, stream=True,
                                            **settings):
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
print("stream:", text)
# max_completion_tokens over the agent's clamp (64): clamped, still answered.
reply = client.chat.completions.create(model="assistant", messages=messages, temperature=0,
                                       max_completion_tokens=4096)
print("clamped:", reply.choices[0].message.content)
parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
weather = parse(model="assistant", messages=[{"role": "user", "content": "Weather?"}],
                response_format=Weather, temperature=0, max_tokens=32)
print("parsed:", repr(weather.choices[0].message.parsed))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_sets_sampling_parameters_and_parses_structured_output() {
    let interpreter = tokio::task::block_in_place(openai_python);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let stdout = python(&interpreter, OPENAI_PYTHON, &server.base());
    assert!(stdout.contains("non-stream: Hello from Keel."), "{stdout}");
    assert!(stdout.contains("stream: Hello from Keel."), "{stdout}");
    assert!(stdout.contains("clamped: Hello from Keel."), "{stdout}");
    assert!(
        stdout.contains("parsed: Weather(city='Paris', celsius=21)"),
        "{stdout}"
    );
    let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    for body in &bodies[..2] {
        for (key, expected) in [
            ("temperature", 0.0),
            ("top_p", 1.0),
            ("presence_penalty", 0.0),
            ("frequency_penalty", 0.0),
        ] {
            assert_eq!(body[key].as_f64(), Some(expected), "{key}: {body}");
        }
        assert_eq!(body["max_tokens"], 32, "{body}");
        assert_eq!(body["seed"], 7, "{body}");
        assert_eq!(body["stop"], serde_json::json!(["END"]), "{body}");
    }
    assert_eq!(bodies[2]["max_tokens"], 64, "clamped: {}", bodies[2]);
    assert_eq!(bodies[3]["max_tokens"], 32, "{}", bodies[3]);
}

const OPENAI_JS: &str = r#"
const OpenAI = require("openai");
(async () => {
  const client = new OpenAI({ baseURL: process.env.KEEL_BASE_URL, apiKey: "unused" });
  const settings = { temperature: 0, max_tokens: 64, top_p: 1, seed: 7, stop: "END" };
  const messages = [{ role: "user", content: "Say hello" }];
  const reply = await client.chat.completions.create({ model: "assistant", messages, ...settings });
  console.log("non-stream:", reply.choices[0].message.content);
  let text = "";
  const stream = await client.chat.completions.create({ model: "assistant", messages, stream: true, ...settings });
  for await (const chunk of stream) {
    if (chunk.choices.length && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
  }
  console.log("stream:", text);
  const weather = await client.chat.completions.create({
    model: "assistant", messages: [{ role: "user", content: "Weather?" }], ...settings,
    response_format: { type: "json_schema", json_schema: { name: "weather", strict: true, schema: {
      type: "object", properties: { city: { type: "string" }, celsius: { type: "integer" } },
      required: ["city", "celsius"], additionalProperties: false } } },
  });
  const value = JSON.parse(weather.choices[0].message.content);
  console.log("parsed:", value.city, value.celsius);
})().catch((e) => { console.error(e); process.exit(1); });
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_official_javascript_client_sets_sampling_parameters_and_structured_output() {
    let prefix = tokio::task::block_in_place(openai_node);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let mut command = Command::new("node");
    command
        .args(["-e", OPENAI_JS])
        .env("KEEL_BASE_URL", server.base())
        .env("NODE_PATH", prefix.join("node_modules"));
    let stdout = tokio::task::block_in_place(|| run(command));
    assert!(stdout.contains("non-stream: Hello from Keel."), "{stdout}");
    assert!(stdout.contains("stream: Hello from Keel."), "{stdout}");
    assert!(stdout.contains("parsed: Paris 21"), "{stdout}");
    for body in assert_every_round_has(&mock, 64, 3) {
        assert_eq!(body["seed"], 7, "{body}");
        assert_eq!(body["stop"], serde_json::json!(["END"]), "{body}");
    }
}

const LANGCHAIN: &str = r#"
import sys
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

class Weather(BaseModel):
    city: str
    celsius: int

llm = ChatOpenAI(model="assistant", base_url=sys.argv[1], api_key="unused",
                 temperature=0, max_tokens=64)
print("invoke:", llm.invoke("Say hello").content)
print("stream:", "".join(chunk.content for chunk in llm.stream("Say hello")))
print("structured:", repr(llm.with_structured_output(Weather).invoke("Weather?")))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn langchain_chat_openai_with_temperature_and_max_tokens() {
    let interpreter = tokio::task::block_in_place(langchain_openai);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let stdout = python(&interpreter, LANGCHAIN, &server.base());
    assert!(stdout.contains("invoke: Hello from Keel."), "{stdout}");
    assert!(stdout.contains("stream: Hello from Keel."), "{stdout}");
    assert!(
        stdout.contains("structured: Weather(city='Paris', celsius=21)"),
        "{stdout}"
    );
    assert_every_round_has(&mock, 64, 3);
}

const AGENTS_SDK: &str = r#"
import sys
from openai import AsyncOpenAI
from pydantic import BaseModel
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, Runner,
                    set_tracing_disabled)

class Weather(BaseModel):
    city: str
    celsius: int

set_tracing_disabled(True)
model = OpenAIChatCompletionsModel(model="assistant",
                                   openai_client=AsyncOpenAI(base_url=sys.argv[1], api_key="unused"))
settings = ModelSettings(temperature=0, max_tokens=64, top_p=1)
helper = Agent(name="helper", instructions="Be brief.", model=model, model_settings=settings)
print("final:", Runner.run_sync(helper, "Say hello").final_output)
forecaster = Agent(name="forecaster", instructions="Report the weather.", model=model,
                   model_settings=settings, output_type=Weather)
print("typed:", repr(Runner.run_sync(forecaster, "Weather?").final_output))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_agents_sdk_with_model_settings() {
    let interpreter = tokio::task::block_in_place(openai_agents);
    let mock = MockLlm::start().await;
    let server = serve(&mock).await;
    let stdout = python(&interpreter, AGENTS_SDK, &server.base());
    assert!(stdout.contains("final: Hello from Keel."), "{stdout}");
    assert!(
        stdout.contains("typed: Weather(city='Paris', celsius=21)"),
        "{stdout}"
    );
    for body in assert_every_round_has(&mock, 64, 2) {
        assert_eq!(body["top_p"].as_f64(), Some(1.0), "{body}");
    }
}
