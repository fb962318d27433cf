//! The floor: the run of `agent_runs` written as the smallest reasonable hand-written loop,
//! with no Keel in it. Two streamed Chat Completions rounds against the same mock and the
//! `read_file` call between them, done in-process: hyper's HTTP/1 client on a stack of kept-alive
//! connections (each driven by a task of its own, as hyper's examples do), the SSE split and
//! its `data:` lines parsed by hand, each chunk decoded with serde_json, the file read with
//! tokio. No events, no store, no gateway, no policy: what any agent loop must do at least.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpStream;

type Sender = SendRequest<Full<Bytes>>;

/// The hand-written loop's client: the mock's address and a stack of idle connections.
pub(crate) struct Floor {
    addr: SocketAddr,
    authority: String,
    path: String,
    /// Where `read_file` reads from (the bench workspace).
    root: PathBuf,
    idle: Mutex<Vec<Sender>>,
}

/// One streamed chunk, only the parts the loop reads.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallDelta>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// What one round streamed back: the text, and the tool call if there was one.
#[derive(Default)]
struct Answer {
    text: String,
    call: Option<(String, String, String)>,
}

impl Floor {
    /// A client of the mock at `base_url` (`http://ADDR/v1`), reading files under `root`.
    pub(crate) fn new(base_url: &str, root: PathBuf) -> Self {
        let rest = base_url.strip_prefix("http://").expect("an http:// URL");
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        Self {
            addr: authority.parse().expect("a socket address"),
            authority: authority.to_owned(),
            path: format!("/{prefix}/chat/completions"),
            root,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// One run: a round that asks for `read_file`, the call, a round that answers. Returns the
    /// answer's text.
    pub(crate) async fn run(&self, input: &str) -> String {
        let tools = json!([{ "type": "function", "function": {
            "name": "read_file", "description": "Read a text file of the workspace.",
            "parameters": { "type": "object", "properties": { "path": { "type": "string" } },
                            "required": ["path"] } } }]);
        let mut messages = vec![
            json!({ "role": "system", "content": "You are a benchmark agent." }),
            json!({ "role": "user", "content": input }),
        ];
        let first = self.round(&messages, &tools).await;
        let (id, name, arguments) = first.call.expect("the mock asks for a tool first");
        assert_eq!(name, "read_file");
        let args: Value = serde_json::from_str(&arguments).expect("arguments are JSON");
        let path = args["path"].as_str().expect("a path");
        let content = tokio::fs::read_to_string(self.root.join(path))
            .await
            .expect("the file reads");
        messages.push(
            json!({ "role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": { "name": name, "arguments": arguments } }] }),
        );
        messages.push(json!({ "role": "tool", "tool_call_id": id, "content": content }));
        let second = self.round(&messages, &tools).await;
        assert!(second.call.is_none(), "the mock answers after the tool");
        second.text
    }

    /// One streamed round: the request, then the SSE read to `[DONE]`.
    async fn round(&self, messages: &[Value], tools: &Value) -> Answer {
        let body = serde_json::to_vec(&json!({
            "model": "mock-model", "stream": true,
            "stream_options": { "include_usage": true },
            "messages": messages, "tools": tools,
        }))
        .expect("a request serialises");
        let request = hyper::Request::post(&self.path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "text/event-stream")
            .body(Full::new(Bytes::from(body)))
            .expect("a request builds");
        let mut sender = self.connection().await;
        let response = sender
            .send_request(request)
            .await
            .expect("the mock answers");
        assert!(response.status().is_success(), "{}", response.status());
        let mut body = response.into_body();
        let mut buffer = BytesMut::new();
        let mut answer = Answer::default();
        let mut done = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.expect("the stream reads");
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                let event = buffer.split_to(end + 2);
                done |= parse_event(&event[..end], &mut answer);
            }
        }
        assert!(done, "the stream ends with [DONE]");
        self.idle.lock().unwrap().push(sender);
        answer
    }

    /// An idle connection, or a new one.
    async fn connection(&self) -> Sender {
        loop {
            let Some(mut sender) = self.idle.lock().unwrap().pop() else {
                break;
            };
            if sender.ready().await.is_ok() {
                return sender;
            }
        }
        let stream = TcpStream::connect(self.addr)
            .await
            .expect("the mock accepts");
        stream.set_nodelay(true).expect("nodelay");
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("a handshake");
        tokio::spawn(connection);
        sender
    }
}

/// Reads one SSE event's `data:` lines into `answer`; true at `[DONE]`.
fn parse_event(event: &[u8], answer: &mut Answer) -> bool {
    let mut done = false;
    for line in event.split(|b| *b == b'\n') {
        let Some(data) = line.strip_prefix(b"data:") else {
            continue;
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if data == b"[DONE]" {
            done = true;
            continue;
        }
        let chunk: Chunk = serde_json::from_slice(data).expect("a chunk is JSON");
        for choice in chunk.choices {
            if let Some(text) = choice.delta.content {
                answer.text.push_str(&text);
            }
            for call in choice.delta.tool_calls {
                let (id, name, arguments) = answer.call.get_or_insert_default();
                if let Some(new) = call.id {
                    *id = new;
                }
                if let Some(function) = call.function {
                    if let Some(new) = function.name {
                        *name = new;
                    }
                    if let Some(more) = function.arguments {
                        arguments.push_str(&more);
                    }
                }
            }
        }
    }
    done
}
