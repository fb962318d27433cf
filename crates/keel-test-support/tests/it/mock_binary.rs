//! The `keel-mock-llm` benchmark binary: address on the first line, tool call then text.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::client;

async fn start(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel-mock-llm"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await.unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, url)
}

/// The JSON chunks of an SSE body, without `[DONE]`.
fn chunks(body: &str) -> Vec<Value> {
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    body.split_terminator("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

async fn ask(url: &str, messages: Value) -> Vec<Value> {
    let response = client()
        .post(format!("{url}/chat/completions"))
        .json(&json!({ "model": "m", "stream": true, "messages": messages }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    chunks(&response.text().await.unwrap())
}

#[tokio::test]
async fn a_user_message_gets_a_tool_call_and_a_tool_result_gets_text() {
    let (_child, url) = start(&["--tool", "grep", "--args", r#"{"pattern":"fn main"}"#]).await;

    let call = ask(&url, json!([{ "role": "user", "content": "go" }])).await;
    let text = ask(
        &url,
        json!([
            { "role": "user", "content": "go" },
            { "role": "assistant", "content": null, "tool_calls": [] },
            { "role": "tool", "tool_call_id": "call_mock_1", "content": "found" }
        ]),
    )
    .await;

    let name = &call[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"];
    assert_eq!(name, "grep");
    let pieces: Vec<&str> = call
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .filter(|a| !a.is_empty())
        .collect();
    assert_eq!(pieces.len(), 3);
    assert_eq!(pieces.concat(), r#"{"pattern":"fn main"}"#);
    assert!(call.iter().any(|c| c["usage"]["total_tokens"].is_number()));
    let words: String = text
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(words, "Done: I read the file.");
    assert!(
        text.iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop")
    );
}

/// The data of each event of a Messages API SSE body.
fn anthropic_events(body: &str) -> Vec<Value> {
    body.split_terminator("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn the_messages_api_answers_a_tool_use_then_text_after_the_tool_result() {
    let (_child, url) = start(&[]).await;
    let base = url.trim_end_matches("/v1");
    let ask = |messages: Value| {
        let base = base.to_owned();
        async move {
            let response = client()
                .post(format!("{base}/v1/messages"))
                .json(
                    &json!({"model": "m", "max_tokens": 10, "stream": true, "messages": messages}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(response.headers()["content-type"], "text/event-stream");
            anthropic_events(&response.text().await.unwrap())
        }
    };
    let first = ask(json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])).await;
    assert_eq!(first[1]["content_block"]["type"], "tool_use");
    let input: String = first
        .iter()
        .filter_map(|e| e["delta"]["partial_json"].as_str())
        .collect();
    assert!(serde_json::from_str::<Value>(&input).is_ok(), "{input}");
    assert_eq!(first.last().unwrap()["type"], "message_stop");
    let second = ask(json!([
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok"}]},
    ]))
    .await;
    assert_eq!(second[1]["content_block"]["type"], "text");
    let stop = second
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "end_turn");
}
