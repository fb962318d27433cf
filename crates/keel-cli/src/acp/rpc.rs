//! JSON-RPC 2.0 over newline-delimited stdio, both ways: what the client sends is parsed into
//! [`Incoming`] (a request, a notification, or the answer to one of ours); [`Peer`] writes
//! answers and notifications, and sends the client requests of its own
//! (`session/request_permission`, `fs/*`) and routes their answers back.
//!
//! Stdout carries protocol only: every line is written by one thread, whole, in the order it
//! was queued, so a prompt's `session/update` notifications reach the client before its
//! answer. Nothing here panics on input: a line that is not a JSON-RPC message is answered
//! with an error naming what is wrong (`id: null` when its id cannot be read).

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::out;

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Box<Value>>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The line is not JSON.
    pub(super) fn parse_error(message: impl std::fmt::Display) -> Self {
        Self::new(-32700, format!("parse error: {message}"))
    }

    /// The message is JSON but not a JSON-RPC request, or not one this agent takes now.
    pub(super) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(-32600, message)
    }

    pub(super) fn method_not_found(method: &str) -> Self {
        Self::new(-32601, format!("unknown method `{method}`"))
    }

    /// The params do not fit the method.
    pub(super) fn invalid_params(message: impl std::fmt::Display) -> Self {
        Self::new(-32602, format!("invalid params: {message}"))
    }

    pub(super) fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(-32603, message.to_string())
    }

    /// ACP's "resource not found" (an unknown session).
    pub(super) fn not_found(message: impl Into<String>) -> Self {
        Self::new(-32002, message)
    }

    pub(super) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = (**data).clone();
        }
        error
    }

    fn from_json(error: &Value) -> Self {
        Self {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the client answered an error without a message")
                .to_owned(),
            data: error.get("data").cloned().map(Box::new),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// One message from the client.
#[derive(Debug, PartialEq)]
pub(super) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// The answer to a request this agent sent.
    Response {
        id: Value,
        outcome: Result<Value, RpcError>,
    },
}

/// Parses one line. `Err` carries the id to answer (`null` when none can be read) and why the
/// line is not a message; a notification that is malformed has no answer, so the caller logs
/// it instead.
pub(super) fn parse(line: &str) -> Result<Incoming, (Value, RpcError)> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| (Value::Null, RpcError::parse_error(e)))?;
    let Value::Object(mut message) = value else {
        let what = match value {
            Value::Array(_) => "a batch (ACP does not use JSON-RPC batches)",
            _ => "not a JSON object",
        };
        return Err((
            Value::Null,
            RpcError::invalid_request(format!("invalid request: the message is {what}")),
        ));
    };
    let id = message.remove("id");
    let id_value = id.clone().unwrap_or(Value::Null);
    if !matches!(
        id,
        None | Some(Value::Null | Value::Number(_) | Value::String(_))
    ) {
        return Err((
            Value::Null,
            RpcError::invalid_request("invalid request: `id` must be a number or a string"),
        ));
    }
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id_value,
            RpcError::invalid_request(r#"invalid request: `jsonrpc` must be "2.0""#),
        ));
    }
    let params = message.remove("params").unwrap_or(Value::Null);
    match (message.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err((
            id_value,
            RpcError::invalid_request("invalid request: `method` must be a string"),
        )),
        (None, Some(id)) => {
            let outcome = match (message.remove("result"), message.remove("error")) {
                (_, Some(error)) => Err(RpcError::from_json(&error)),
                (Some(result), None) => Ok(result),
                (None, None) => Err(RpcError::invalid_request(
                    "the response has neither `result` nor `error`",
                )),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err((
            Value::Null,
            RpcError::invalid_request("invalid request: no `method`"),
        )),
    }
}

/// Reads stdin on a thread of its own, line by line, until it closes. A line that is not
/// UTF-8 arrives as `Err` with what is wrong.
pub(super) fn read_stdin() -> mpsc::UnboundedReceiver<Result<String, String>> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match input.read_until(b'\n', &mut buffer) {
                Ok(0) => return,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "Reading stdin failed; the connection ends.");
                    return;
                }
            }
            let line = match std::str::from_utf8(&buffer) {
                Ok(text) => Ok(text.trim().to_owned()),
                Err(error) => Err(format!("the line is not UTF-8: {error}")),
            };
            if matches!(&line, Ok(text) if text.is_empty()) {
                continue;
            }
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The client as the agent talks to it: answers, notifications and requests, written to
/// stdout by one thread.
pub(super) struct Peer {
    out: Mutex<Option<std::sync::mpsc::Sender<String>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
}

impl Peer {
    /// A peer writing to stdout.
    pub(super) fn stdout() -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let writer = std::thread::spawn(move || {
            for line in rx {
                out::line(&line);
            }
        });
        Self {
            out: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    fn send(&self, message: &Value) {
        let line = message.to_string();
        let out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(out) = out.as_ref() {
            let _ = out.send(line);
        }
    }

    /// Answers request `id`.
    pub(super) fn respond(&self, id: Value, outcome: Result<Value, RpcError>) {
        let message = match outcome {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
        };
        self.send(&message);
    }

    /// Sends a notification.
    pub(super) fn notify(&self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request; returns its id (for [`Self::withdraw`]) and where its answer arrives.
    /// The answer's sender is dropped (the receiver errs) when the request is withdrawn or
    /// the connection ends.
    pub(super) fn request(
        &self,
        method: &str,
        params: Value,
    ) -> (u64, oneshot::Receiver<Result<Value, RpcError>>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        (id, rx)
    }

    /// Sends a request and waits for its answer; a call dropped before the answer withdraws
    /// its request ([`Self::withdraw`]).
    pub(super) async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        /// Withdraws the request when the call ends, answered or not (a no-op once answered).
        struct Withdraw<'a>(&'a Peer, u64);
        impl Drop for Withdraw<'_> {
            fn drop(&mut self) {
                self.0.withdraw(self.1);
            }
        }
        let (id, answer) = self.request(method, params);
        let _withdraw = Withdraw(self, id);
        answer
            .await
            .unwrap_or_else(|_| Err(RpcError::internal("the client left before answering")))
    }

    /// Withdraws request `id` if it is still unanswered: the client is told
    /// (`$/cancel_request`) and its answer, should it come, is dropped.
    pub(super) fn withdraw(&self, id: u64) {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if pending.is_some() {
            self.notify("$/cancel_request", json!({ "requestId": id }));
        }
    }

    /// Routes the client's answer to the request that awaits it.
    pub(super) fn answered(&self, id: &Value, outcome: Result<Value, RpcError>) {
        let waiting = id.as_u64().and_then(|id| {
            self.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id)
        });
        match waiting {
            Some(waiting) => {
                let _ = waiting.send(outcome);
            }
            None => tracing::debug!(%id, "An answer to no pending request was dropped."),
        }
    }

    /// Stops writing: pending requests fail, queued lines are written, and this returns once
    /// they are.
    pub(super) async fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        drop(
            self.out
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_requests_notifications_and_answers() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#),
            Ok(Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({"a": 1})
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Ok(Incoming::Notification {
                method: "session/cancel".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Ok(Incoming::Response {
                id: json!("x"),
                outcome: Ok(json!({}))
            })
        );
        let Ok(Incoming::Response { outcome, .. }) =
            parse(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}"#)
        else {
            panic!("not a response");
        };
        assert_eq!(outcome.unwrap_err().code, -32601);
    }

    #[test]
    fn what_is_not_a_message_is_an_error_naming_why() {
        let cases = [
            ("{not json", -32700, "parse error"),
            ("[1,2]", -32600, "batch"),
            ("42", -32600, "not a JSON object"),
            (r#"{"id":1,"method":"x"}"#, -32600, "`jsonrpc`"),
            (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600, "`method`"),
            (r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, -32600, "`id`"),
            (r#"{"jsonrpc":"2.0","id":3}"#, -32600, "neither"),
        ];
        for (line, code, says) in cases {
            match parse(line) {
                Err((_, error)) => {
                    assert_eq!(error.code, code, "{line}");
                    assert!(error.message.contains(says), "{line}: {}", error.message);
                }
                Ok(Incoming::Response { outcome, .. }) => {
                    let error = outcome.unwrap_err();
                    assert_eq!(error.code, code, "{line}");
                    assert!(error.message.contains(says), "{line}: {}", error.message);
                }
                Ok(other) => panic!("{line} parsed as {other:?}"),
            }
        }
        // The id is kept when it can be read, so the error answers the request.
        let (id, _) = parse(r#"{"id":9,"method":"x"}"#).unwrap_err();
        assert_eq!(id, json!(9));
    }
}
