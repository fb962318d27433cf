//! The HTTP surfaces' client: one request to `keel serve` — `/v1`, AG-UI or A2A — its SSE
//! frames read off the socket as they arrive and read as that protocol's events, checked.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::report::{Sample, Surface};
use super::{AGENT, EXPECTED, PROMPT, Result};

/// What a frame is, for the timings.
enum Seen {
    /// Neither answer text nor the end.
    Other,
    /// A piece of the answer.
    Text(String),
    /// The run's last event.
    End,
}

/// The request's URL and body (`n` makes the ids AG-UI and A2A carry unique, and the
/// session of `/v1+session`).
fn request_of(surface: Surface, base: &str, n: usize) -> (String, Value) {
    match surface {
        Surface::Agui => (
            format!("{base}/api/agui/{AGENT}"),
            json!({
                "threadId": format!("thread-{n}"),
                "runId": format!("run-{n}"),
                "messages": [{ "id": format!("msg-{n}"), "role": "user", "content": PROMPT }],
                "tools": [], "context": [], "state": {}, "forwardedProps": {},
            }),
        ),
        Surface::A2a => (
            format!("{base}/a2a/{AGENT}"),
            json!({
                "jsonrpc": "2.0", "id": n, "method": "SendStreamingMessage",
                "params": { "message": {
                    "messageId": format!("msg-{n}"), "role": "ROLE_USER",
                    "parts": [{ "text": PROMPT }],
                } },
            }),
        ),
        // ACP is not HTTP; the caller sends it elsewhere.
        Surface::V1 | Surface::V1Session | Surface::Acp => (
            format!("{base}/v1/chat/completions"),
            json!({
                "model": AGENT, "stream": true,
                "messages": [{ "role": "user", "content": PROMPT }],
            }),
        ),
    }
}

/// A frame's `data` as `surface`'s event.
fn read_frame(surface: Surface, data: &str) -> Result<Seen> {
    if matches!(surface, Surface::V1 | Surface::V1Session) && data == "[DONE]" {
        return Ok(Seen::End);
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|_| format!("a frame is not JSON: {}", truncate(data, 80)))?;
    match surface {
        Surface::V1 | Surface::V1Session | Surface::Acp => {
            if value["object"] != "chat.completion.chunk" {
                return Err(format!("not a chunk: {}", truncate(data, 120)));
            }
            Ok(match value["choices"][0]["delta"]["content"].as_str() {
                Some(text) if !text.is_empty() => Seen::Text(text.to_owned()),
                _ => Seen::Other,
            })
        }
        Surface::Agui => match value["type"].as_str() {
            Some("TEXT_MESSAGE_CONTENT") => Ok(Seen::Text(
                value["delta"].as_str().unwrap_or_default().to_owned(),
            )),
            Some("RUN_FINISHED") => Ok(Seen::End),
            Some("RUN_ERROR") => Err(format!("RUN_ERROR: {}", truncate(data, 120))),
            Some(_) => Ok(Seen::Other),
            None => Err(format!("an event without a type: {}", truncate(data, 120))),
        },
        Surface::A2a => {
            if value.get("error").is_some() {
                return Err(format!("JSON-RPC error: {}", truncate(data, 120)));
            }
            let result = &value["result"];
            if let Some(update) = result.get("artifactUpdate") {
                let artifact = &update["artifact"];
                return Ok(match artifact["artifactId"].as_str() {
                    Some("answer") => Seen::Text(
                        artifact["parts"][0]["text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    ),
                    _ => Seen::Other,
                });
            }
            if let Some(update) = result.get("statusUpdate") {
                return match update["status"]["state"].as_str() {
                    Some("TASK_STATE_COMPLETED") => Ok(Seen::End),
                    Some("TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING") => Ok(Seen::Other),
                    _ => Err(format!("the task ended otherwise: {}", truncate(data, 160))),
                };
            }
            match result.get("task") {
                Some(_) => Ok(Seen::Other),
                None => Err(format!("not a stream response: {}", truncate(data, 120))),
            }
        }
    }
}

/// Request `n` through `surface`, read to the end of its stream; `Err` names what was wrong.
pub(crate) async fn request(
    client: &reqwest::Client,
    base: &str,
    surface: Surface,
    n: usize,
) -> Result<Sample> {
    let (url, body) = request_of(surface, base, n);
    let body = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if surface == Surface::V1Session {
        request = request.header("x-keel-session", format!("bench-{n}"));
    }
    let started = Instant::now();
    let mut response = request
        .send()
        .await
        .map_err(|e| format!("send: {}", describe(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(format!(
            "HTTP {}: {}",
            status.as_u16(),
            truncate(&text, 120)
        ));
    }
    let mut buffer: Vec<u8> = Vec::new();
    let mut answer = String::new();
    let (mut first, mut text, mut end): (Option<Duration>, Option<Duration>, Option<Duration>) =
        (None, None, None);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("body: {}", describe(&e)))?
    {
        let at = started.elapsed();
        buffer.extend_from_slice(&chunk);
        while let Some(cut) = buffer.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = buffer.drain(..cut + 2).collect();
            let frame = String::from_utf8_lossy(&frame);
            for line in frame.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                if end.is_some() {
                    return Err(format!("a frame after the end: {}", truncate(data, 80)));
                }
                first.get_or_insert(at);
                match read_frame(surface, data.trim())? {
                    Seen::Other => {}
                    Seen::Text(piece) => {
                        text.get_or_insert(at);
                        answer.push_str(&piece);
                    }
                    Seen::End => end = Some(at),
                }
            }
        }
    }
    let (Some(first), Some(end)) = (first, end) else {
        return Err("the stream ended before the run's last event".into());
    };
    if answer != EXPECTED {
        return Err(format!(
            "answer {:?} != {EXPECTED:?}",
            truncate(&answer, 60)
        ));
    }
    Ok(Sample {
        first,
        text: text.unwrap_or(end),
        end,
    })
}

fn describe(e: &reqwest::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message = format!("{message}: {s}");
        source = s.source();
    }
    truncate(&message, 160)
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}
