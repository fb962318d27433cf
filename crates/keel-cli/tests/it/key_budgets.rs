//! A per-key daily budget holds across replicas: two `keel serve` replicas on one PostgreSQL
//! store; the key's runs on the first spend its budget, and the second refuses the key (429
//! `insufficient_quota`) because it reads the spend from the store.

use keel_test_support::WorkspaceBuilder;
use serde_json::{Value, json};

use keel_test_support::test_clients::openai_python;

use crate::replicas::{Replicas, Schema, database_url};

const KEY: &str = "sk-budgeted-client";

async fn chat(replicas: &Replicas, replica: usize) -> (u16, Value) {
    let response = replicas
        .http
        .post(replicas.url(replica, "/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keys_daily_budget_spent_on_one_replica_is_refused_on_another() {
    let schema = Schema::new();
    let ws = WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: assistant, store: {{ kind: postgres, url: '{}', schema: {} }}, \
             server: {{ apiKeys: [ {{ env: BUDGETED_KEY, role: client, name: acme, budget: 0.08 }} ] }} }}",
            database_url(),
            schema.0
        ))
        .file(".env", format!("BUDGETED_KEY={KEY}\n"))
        .priced_scripted_model("m", (12, 3), "{ inputPerMTok: 1000, outputPerMTok: 10000 }")
        .agent("assistant", "{ model: m }")
        .build();
    let replicas = Replicas::start(&ws, &["one", "two"]);
    // 0.042 a run: two runs on the first replica spend 0.084 of 0.08.
    for _ in 0..2 {
        let (status, body) = chat(&replicas, 0).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = chat(&replicas, 1).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "insufficient_quota", "{body}");
    assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has spent 0.084 USD today"),
        "{body}"
    );
    let (status, _) = chat(&replicas, 0).await;
    assert_eq!(status, 429, "the first replica refuses too");

    // The official OpenAI client reads it as its rate-limit error, with the code.
    let python = tokio::task::block_in_place(openai_python);
    let base = replicas.url(1, "/v1");
    let output = tokio::task::block_in_place(|| {
        std::process::Command::new(python)
            .args(["-c", OPENAI_CLIENT, &base, KEY])
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.trim(),
        "RateLimitError 429 budget_exceeded insufficient_quota"
    );
}

const OPENAI_CLIENT: &str = r#"
import sys
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
try:
    client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "Hi"}])
    print("answered")
except openai.RateLimitError as error:
    print(type(error).__name__, error.status_code, error.code, error.type)
"#;
