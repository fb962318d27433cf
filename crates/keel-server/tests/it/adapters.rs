//! The OpenAI facade in front of a process-backed agent (docs/adapters.md): `model` names the
//! agent, and its program's own model round (through the run's model endpoint) answers,
//! whole or streamed.

use keel_test_support::WorkspaceBuilder;
use serde_json::{Value, json};

use crate::{app, post_json, send};

/// A program in plain Python: one round through the run's model endpoint, then its answer.
const PROGRAM: &str = r#"
import json, os, sys, urllib.request

run = json.load(sys.stdin)
body = json.dumps({
    "model": os.environ["KEEL_MODEL"],
    "messages": [{"role": "system", "content": run["instructions"]},
                 {"role": "user", "content": run["input"]}],
}).encode()
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=body,
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"},
)
answer = json.load(urllib.request.urlopen(request))
print(json.dumps({"type": "final", "output": "program: " + answer["choices"][0]["message"]["content"]}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_answers_for_a_process_backed_agent_whole_and_streamed() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello there"}]}]}),
        )
        .agent(
            "bot",
            "{ model: m, instructions: Be brief., backend: { kind: process, command: [python3, agent.py] } }",
        )
        .file("agent.py", PROGRAM)
        .build();
    let request = json!({"model": "bot", "messages": [{"role": "user", "content": "Hi"}]});
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "program: Hello there"
    );

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (status, content_type, body) = send(app(&ws), post_json(&streamed)).await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let text = String::from_utf8(body).unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    // The program's answer is what streams, not its model round's text.
    let streamed: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(streamed, "program: Hello there");
}
