//! The bench's client side: one streamed chat completion, checked frame by frame, and a
//! batch of them at a bounded concurrency.

use std::collections::BTreeMap;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{AGENT, EXPECTED, REQUEST_TIMEOUT, Result};

pub(crate) struct Sample {
    pub(crate) latency: Duration,
    pub(crate) first_content: Duration,
}

/// What a request goes to: `keel serve`'s facade, or (for the floor) straight to the mock.
#[derive(Clone)]
pub(crate) enum Target {
    Keel(String),
    /// The mock's chat completions URL: the client makes both model rounds itself, as Keel
    /// would, so the figures are what this machine does with no Keel in between.
    Floor(String),
}

/// One request, checked; `Err` names what was wrong.
pub(crate) async fn one_request(client: &reqwest::Client, target: &Target) -> Result<Sample> {
    let started = Instant::now();
    let streamed = match target {
        Target::Keel(url) => {
            let body = serde_json::json!({
                "model": AGENT,
                "stream": true,
                "messages": [{ "role": "user", "content": "Read the README." }],
            });
            stream(client, url, &body, started).await?
        }
        Target::Floor(url) => {
            let mut messages =
                vec![serde_json::json!({ "role": "user", "content": "Read the README." })];
            let body =
                serde_json::json!({ "model": "mock-model", "stream": true, "messages": messages });
            stream(client, url, &body, started).await?;
            messages.push(
                serde_json::json!({ "role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": { "name": "read_file", "arguments": "{\"path\":\"README.md\"}" } }] }),
            );
            messages.push(serde_json::json!({ "role": "tool", "tool_call_id": "call_1", "content": "# Bench" }));
            let body =
                serde_json::json!({ "model": "mock-model", "stream": true, "messages": messages });
            stream(client, url, &body, started).await?
        }
    };
    let Some(latency) = streamed.done else {
        return Err("the stream ended without [DONE]".into());
    };
    if streamed.content != EXPECTED {
        return Err(format!(
            "content {:?} != {EXPECTED:?}",
            truncate(&streamed.content, 60)
        ));
    }
    Ok(Sample {
        latency,
        first_content: streamed.first_content.unwrap_or(latency),
    })
}

pub(crate) struct Streamed {
    pub(crate) content: String,
    /// Since `started`.
    pub(crate) first_content: Option<Duration>,
    pub(crate) done: Option<Duration>,
}

/// Posts `body` and reads the event stream to its end: only `chat.completion.chunk` frames,
/// nothing after `[DONE]`.
pub(crate) async fn stream(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    started: Instant,
) -> Result<Streamed> {
    let mut response = client
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| format!("send: {}", error_kind(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        return Err(format!(
            "HTTP {}: {}",
            status.as_u16(),
            truncate(&message, 80)
        ));
    }
    let mut buffer: Vec<u8> = Vec::new();
    let mut streamed = Streamed {
        content: String::new(),
        first_content: None,
        done: None,
    };
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| format!("body: {}", error_kind(&e)))?;
        let Some(chunk) = chunk else { break };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..end + 2).collect();
            let frame = String::from_utf8_lossy(&frame);
            for line in frame.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim();
                if streamed.done.is_some() {
                    return Err("data after [DONE]".into());
                }
                if data == "[DONE]" {
                    streamed.done = Some(started.elapsed());
                    continue;
                }
                let value: Value = serde_json::from_str(data)
                    .map_err(|_| format!("frame is not JSON: {}", truncate(data, 80)))?;
                if value["object"] != "chat.completion.chunk" {
                    return Err(format!("frame is not a chunk: {}", truncate(data, 120)));
                }
                if let Some(text) = value["choices"][0]["delta"]["content"].as_str()
                    && !text.is_empty()
                {
                    streamed
                        .first_content
                        .get_or_insert_with(|| started.elapsed());
                    streamed.content.push_str(text);
                }
            }
        }
    }
    Ok(streamed)
}

pub(crate) fn error_kind(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message = format!("{message}: {s}");
        source = s.source();
    }
    format!("{kind} error ({})", truncate(&message, 120))
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

// ---------------------------------------------------------------------------------------------
// A batch

pub(crate) struct Batch {
    pub(crate) samples: Vec<Sample>,
    pub(crate) errors: BTreeMap<String, usize>,
    pub(crate) wall: Duration,
}

pub(crate) async fn batch(
    client: &reqwest::Client,
    target: &Target,
    requests: usize,
    concurrency: usize,
) -> Batch {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, target, next) = (client.clone(), target.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let result = tokio::time::timeout(REQUEST_TIMEOUT, one_request(&client, &target))
                    .await
                    .unwrap_or_else(|_| Err("timeout".into()));
                results.push(result);
            }
            results
        }));
    }
    let mut samples = Vec::with_capacity(requests);
    let mut errors = BTreeMap::new();
    for task in tasks {
        match task.await {
            Ok(results) => {
                for result in results {
                    match result {
                        Ok(sample) => samples.push(sample),
                        Err(e) => *errors.entry(e).or_insert(0) += 1,
                    }
                }
            }
            Err(e) => *errors.entry(format!("client task: {e}")).or_insert(0) += 1,
        }
    }
    Batch {
        samples,
        errors,
        wall: started.elapsed(),
    }
}
