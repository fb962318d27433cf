//! `keel-mock-llm`: a fast, stateless OpenAI-compatible mock for benchmarks.
//!
//! Policy, per request: when the last message is from the user, answer with one tool call
//! (`read_file {"path":"README.md"}` unless `--tool`/`--args` say otherwise) whose arguments
//! are streamed in three chunks; otherwise (a tool result came back) answer with a short text
//! in three chunks. Both end with a usage chunk and `[DONE]`; `"stream": false` gets the same
//! answers as one JSON completion. Every body is rendered once at start-up, so serving a
//! request is a JSON scan of the request body plus a reference-counted copy.
//!
//! ```text
//! keel-mock-llm [--listen 127.0.0.1:0] [--latency-ms N] [--tool NAME] [--args JSON]
//! ```
//! The first stdout line is `listening on http://ADDR/v1`. `POST /v1/traces` and `/v1/metrics`
//! accept OTLP exports (answering 200, decoding nothing): a collector for benchmarks.

use std::borrow::Cow;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};

const USAGE: &str =
    "usage: keel-mock-llm [--listen ADDR] [--latency-ms N] [--tool NAME] [--args JSON]";
const FINAL_TEXT: [&str; 3] = ["Done: ", "I read ", "the file."];
const CALL_ID: &str = "call_mock_1";

struct Options {
    listen: String,
    latency: Duration,
    tool: String,
    args: String,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        listen: "127.0.0.1:0".into(),
        latency: Duration::ZERO,
        tool: "read_file".into(),
        args: r#"{"path":"README.md"}"#.into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--listen" => options.listen = value,
            "--latency-ms" => {
                let ms: u64 = value
                    .parse()
                    .map_err(|_| format!("--latency-ms wants a number, got `{value}`"))?;
                options.latency = Duration::from_millis(ms);
            }
            "--tool" => options.tool = value,
            "--args" => {
                serde_json::from_str::<Value>(&value)
                    .map_err(|e| format!("--args is not JSON: {e}"))?;
                options.args = value;
            }
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    Ok(options)
}

/// The four answers, rendered once.
struct Rendered {
    latency: Duration,
    tool_sse: Bytes,
    text_sse: Bytes,
    tool_json: Bytes,
    text_json: Bytes,
    /// The same answers in the Anthropic Messages API's wire format (`/v1/messages`).
    anthropic_tool_sse: Bytes,
    anthropic_text_sse: Bytes,
}

/// One Messages API SSE event.
fn event(data: &Value) -> String {
    let kind = data["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {data}\n\n")
}

/// A streamed Messages API answer: `message_start`, the block (its deltas), the end.
fn anthropic_sse(block: &Value, deltas: &[Value], stop: &str) -> Bytes {
    let mut sse = event(&json!({"type": "message_start", "message": {
        "id": "msg_mock", "type": "message", "role": "assistant", "model": "mock-model",
        "content": [], "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}));
    sse.push_str(&event(
        &json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    for delta in deltas {
        sse.push_str(&event(
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ));
    }
    sse.push_str(&event(&json!({"type": "content_block_stop", "index": 0})));
    sse.push_str(&event(
        &json!({"type": "message_delta", "delta": {"stop_reason": stop},
                                 "usage": {"output_tokens": 3}}),
    ));
    sse.push_str(&event(&json!({"type": "message_stop"})));
    Bytes::from(sse)
}

fn chunk(delta: &Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    });
    format!("data: {chunk}\n\n")
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    let chunk = json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "mock-model", "choices": [],
        "usage": { "prompt_tokens": prompt, "completion_tokens": completion,
                   "total_tokens": prompt + completion }
    });
    format!("data: {chunk}\n\n")
}

/// Splits `text` into three pieces on character boundaries.
fn thirds(text: &str) -> [&str; 3] {
    let chars = text.chars().count();
    let cut = |n: usize| {
        text.char_indices()
            .nth(n)
            .map_or(text.len(), |(index, _)| index)
    };
    let (a, b) = (cut(chars / 3), cut(2 * chars / 3));
    [&text[..a], &text[a..b], &text[b..]]
}

fn completion(message: &Value, finish: &str) -> Bytes {
    Bytes::from(
        json!({
            "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_700_000_000,
            "model": "mock-model",
            "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
            "usage": { "prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23 }
        })
        .to_string(),
    )
}

fn render(options: &Options) -> Rendered {
    let mut tool_sse = chunk(
        &json!({ "role": "assistant", "content": null, "tool_calls": [{
            "index": 0, "id": CALL_ID, "type": "function",
            "function": { "name": options.tool, "arguments": "" } }] }),
        None,
    );
    for piece in thirds(&options.args) {
        tool_sse.push_str(&chunk(
            &json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }),
            None,
        ));
    }
    tool_sse.push_str(&chunk(&json!({}), Some("tool_calls")));
    tool_sse.push_str(&usage_chunk(20, 3));
    tool_sse.push_str("data: [DONE]\n\n");

    let mut text_sse = chunk(&json!({ "role": "assistant", "content": "" }), None);
    for piece in FINAL_TEXT {
        text_sse.push_str(&chunk(&json!({ "content": piece }), None));
    }
    text_sse.push_str(&chunk(&json!({}), Some("stop")));
    text_sse.push_str(&usage_chunk(20, 3));
    text_sse.push_str("data: [DONE]\n\n");

    let tool_deltas: Vec<Value> = thirds(&options.args)
        .iter()
        .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
        .collect();
    let text_deltas: Vec<Value> = FINAL_TEXT
        .iter()
        .map(|piece| json!({"type": "text_delta", "text": piece}))
        .collect();
    Rendered {
        anthropic_tool_sse: anthropic_sse(
            &json!({"type": "tool_use", "id": CALL_ID, "name": options.tool, "input": {}}),
            &tool_deltas,
            "tool_use",
        ),
        anthropic_text_sse: anthropic_sse(
            &json!({"type": "text", "text": ""}),
            &text_deltas,
            "end_turn",
        ),
        latency: options.latency,
        tool_sse: Bytes::from(tool_sse),
        text_sse: Bytes::from(text_sse),
        tool_json: completion(
            &json!({ "role": "assistant", "content": null, "tool_calls": [{
                "id": CALL_ID, "type": "function",
                "function": { "name": options.tool, "arguments": options.args } }] }),
            "tool_calls",
        ),
        text_json: completion(
            &json!({ "role": "assistant", "content": FINAL_TEXT.concat() }),
            "stop",
        ),
    }
}

#[derive(Deserialize)]
struct ChatRequest<'a> {
    #[serde(borrow, default)]
    messages: Vec<RoleOnly<'a>>,
    #[serde(default)]
    stream: bool,
}

#[derive(Deserialize)]
struct RoleOnly<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

async fn chat(State(rendered): State<Arc<Rendered>>, body: Bytes) -> Response {
    let request: ChatRequest<'_> = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error = json!({ "error": { "message": format!("invalid request body: {e}"),
                                           "type": "invalid_request_error" } });
            return respond(
                StatusCode::BAD_REQUEST,
                "application/json",
                error.to_string().into(),
            );
        }
    };
    if !rendered.latency.is_zero() {
        tokio::time::sleep(rendered.latency).await;
    }
    let wants_tool = request.messages.last().is_some_and(|m| m.role == "user");
    let (content_type, body) = match (request.stream, wants_tool) {
        (true, true) => ("text/event-stream", &rendered.tool_sse),
        (true, false) => ("text/event-stream", &rendered.text_sse),
        (false, true) => ("application/json", &rendered.tool_json),
        (false, false) => ("application/json", &rendered.text_json),
    };
    respond(StatusCode::OK, content_type, body.clone())
}

#[derive(Deserialize)]
struct MessagesRequest<'a> {
    #[serde(borrow, default)]
    messages: Vec<Turn<'a>>,
}

#[derive(Deserialize)]
struct Turn<'a> {
    #[serde(borrow, default)]
    content: Vec<BlockType<'a>>,
}

#[derive(Deserialize)]
struct BlockType<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
}

/// `POST /v1/messages`: a tool call for a new question, the text answer once a tool result
/// came back (streamed; the bench's provider streams).
async fn messages(State(rendered): State<Arc<Rendered>>, body: Bytes) -> Response {
    let request: MessagesRequest<'_> = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            let error = json!({"type": "error", "error": {"type": "invalid_request_error",
                               "message": format!("invalid request body: {e}")}});
            return respond(
                StatusCode::BAD_REQUEST,
                "application/json",
                error.to_string().into(),
            );
        }
    };
    if !rendered.latency.is_zero() {
        tokio::time::sleep(rendered.latency).await;
    }
    let answered = request
        .messages
        .last()
        .is_some_and(|turn| turn.content.iter().any(|b| b.kind == "tool_result"));
    let body = match answered {
        true => &rendered.anthropic_text_sse,
        false => &rendered.anthropic_tool_sse,
    };
    respond(StatusCode::OK, "text/event-stream", body.clone())
}

/// An OTLP export, accepted: the empty `Export…ServiceResponse` is zero bytes of protobuf.
async fn otlp_sink() -> Response {
    respond(StatusCode::OK, "application/x-protobuf", Bytes::new())
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn serve(options: Options) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(&options.listen).await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/messages", post(messages))
        // An OTLP/HTTP sink: accepts exports without decoding them (the benchmark's cheapest
        // collector; the tests' receiver decodes).
        .route("/v1/traces", post(otlp_sink))
        .route("/v1/metrics", post(otlp_sink))
        .with_state(Arc::new(render(&options)));
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}/v1")?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, app).await
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "{message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "keel-mock-llm: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "keel-mock-llm: {e}");
            ExitCode::FAILURE
        }
    }
}
