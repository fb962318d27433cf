//! The model endpoint's wire: OpenAI Chat Completions requests from a program, read into a
//! [`ModelAsk`], and the run's [`ModelReply`] written back — whole, or as the chunks of a
//! streamed answer.
//!
//! What cannot be honoured is refused with a 400 naming it (images and audio: Keel's
//! messages carry text; `n` above 1; `logprobs`; `response_format`; a `tool_choice` other
//! than `auto`); parameters the run cannot change are accepted and documented
//! (`model`: the agent's `Model` answers; `user`, `metadata`, `store`, `stream_options`,
//! `parallel_tool_calls`).

use keel_runtime::adapter::{ModelAsk, ModelReply};
use keel_types::{Message, ModelParams, ModelStopReason, ToolCall, ToolSpec};
use serde_json::{Map, Value, json};

/// Why a request cannot be served, said to the program as a 400.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadRequest(pub String);

fn bad(message: impl Into<String>) -> BadRequest {
    BadRequest(message.into())
}

/// A Chat Completions request body: the ask, and whether it wants a stream (with usage).
pub(crate) struct ChatRequest {
    pub ask: ModelAsk,
    pub stream: bool,
    pub include_usage: bool,
}

/// Reads a request body.
pub(crate) fn read_request(body: &Value) -> Result<ChatRequest, BadRequest> {
    let Some(body) = body.as_object() else {
        return Err(bad("the body must be a JSON object"));
    };
    refuse_unhonoured(body)?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("`messages` must be an array"))?
        .iter()
        .enumerate()
        .map(|(i, m)| read_message(m).map_err(|e| bad(format!("messages[{i}]: {}", e.0))))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, t)| read_tool(t).map_err(|e| bad(format!("tools[{i}]: {}", e.0))))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(bad("`tools` must be an array")),
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(ChatRequest {
        ask: ModelAsk {
            messages,
            tools,
            params: read_params(body)?,
        },
        stream,
        include_usage,
    })
}

fn refuse_unhonoured(body: &Map<String, Value>) -> Result<(), BadRequest> {
    let set = |key: &str| body.get(key).filter(|v| !v.is_null());
    if let Some(n) = set("n").and_then(Value::as_u64)
        && n > 1
    {
        return Err(bad(
            "`n` above 1 is not supported: a run's round has one answer",
        ));
    }
    if set("logprobs").and_then(Value::as_bool) == Some(true) {
        return Err(bad("`logprobs` is not supported through Keel"));
    }
    if let Some(format) = set("response_format")
        && format.get("type").and_then(Value::as_str) != Some("text")
    {
        return Err(bad(
            "`response_format` is not carried to the model: declare `output.schema` on the agent",
        ));
    }
    if let Some(choice) = set("tool_choice")
        && choice.as_str() != Some("auto")
    {
        return Err(bad(
            "`tool_choice` other than \"auto\" is not carried to the model through Keel",
        ));
    }
    Ok(())
}

fn read_params(body: &Map<String, Value>) -> Result<ModelParams, BadRequest> {
    let number = |key: &str| -> Result<Option<f64>, BadRequest> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| bad(format!("`{key}` must be a number"))),
        }
    };
    let max_tokens = body
        .get("max_completion_tokens")
        .filter(|v| !v.is_null())
        .or_else(|| body.get("max_tokens").filter(|v| !v.is_null()))
        .map(|v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("`max_tokens` must be a positive integer"))
        })
        .transpose()?;
    let stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("`stop` must be a string or an array of strings"))?,
        Some(_) => return Err(bad("`stop` must be a string or an array of strings")),
    };
    let seed = match body.get("seed") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| bad("`seed` must be an integer"))?),
    };
    Ok(ModelParams {
        temperature: number("temperature")?,
        max_tokens,
        top_p: number("top_p")?,
        stop,
        seed,
        presence_penalty: number("presence_penalty")?,
        frequency_penalty: number("frequency_penalty")?,
    })
}

fn read_message(message: &Value) -> Result<Message, BadRequest> {
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("`role` is missing"))?;
    let content = read_content(message.get("content").unwrap_or(&Value::Null))?;
    Ok(match role {
        "system" | "developer" => Message::system(content),
        "user" => Message::user(content),
        "assistant" => {
            let calls = match message.get("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(calls)) => {
                    calls.iter().map(read_call).collect::<Result<Vec<_>, _>>()?
                }
                Some(_) => return Err(bad("`tool_calls` must be an array")),
            };
            Message::assistant(content, calls)
        }
        "tool" => {
            let id = message
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a tool message needs `tool_call_id`"))?;
            Message::tool_result(id, content)
        }
        other => return Err(bad(format!("unknown role `{other}`"))),
    })
}

/// A message's text: a string, or text parts joined; other parts are refused.
fn read_content(content: &Value) -> Result<String, BadRequest> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    Some(other) => {
                        return Err(bad(format!(
                            "content parts of type `{other}` are not carried: Keel's messages are text"
                        )));
                    }
                    None => return Err(bad("a content part needs a `type`")),
                }
            }
            Ok(text)
        }
        _ => Err(bad(
            "`content` must be a string, an array of parts, or null",
        )),
    }
}

fn read_call(call: &Value) -> Result<ToolCall, BadRequest> {
    let function = call
        .get("function")
        .ok_or_else(|| bad("a tool call needs `function`"))?;
    let text = |v: Option<&Value>, what: &str| {
        v.and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad(format!("a tool call needs `{what}`")))
    };
    Ok(ToolCall {
        id: text(call.get("id"), "id")?,
        name: text(function.get("name"), "function.name")?,
        arguments: function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}")
            .to_owned(),
    })
}

fn read_tool(tool: &Value) -> Result<ToolSpec, BadRequest> {
    if tool.get("type").and_then(Value::as_str) != Some("function") {
        return Err(bad("only tools of type `function` are carried"));
    }
    let function = tool
        .get("function")
        .ok_or_else(|| bad("a tool needs `function`"))?;
    Ok(ToolSpec {
        name: function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a tool needs `function.name`"))?
            .to_owned(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        parameters: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

fn finish_reason(stop: ModelStopReason) -> &'static str {
    match stop {
        ModelStopReason::ToolCalls => "tool_calls",
        ModelStopReason::Length => "length",
        ModelStopReason::ContentFilter => "content_filter",
        ModelStopReason::Stop | ModelStopReason::Unknown | ModelStopReason::Paused => "stop",
    }
}

fn wire_calls(calls: &[ToolCall]) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            json!({
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            })
        })
        .collect()
}

fn usage(reply: &ModelReply) -> Value {
    json!({
        "prompt_tokens": reply.usage.prompt_tokens,
        "completion_tokens": reply.usage.completion_tokens,
        "total_tokens": reply.usage.total_tokens,
    })
}

/// The whole answer (`chat.completion`).
pub(crate) fn completion(id: &str, created: u64, reply: &ModelReply) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if !reply.calls.is_empty() {
        message["tool_calls"] = Value::Array(wire_calls(&reply.calls));
        if reply.text.is_empty() {
            message["content"] = Value::Null;
        }
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply.stop)}],
        "usage": usage(reply),
    })
}

/// The answer as `chat.completion.chunk`s: the text, the calls, the finish, and the usage
/// when asked for. The run makes the round whole first, so they come together.
pub(crate) fn chunks(
    id: &str,
    created: u64,
    reply: &ModelReply,
    include_usage: bool,
) -> Vec<Value> {
    let chunk = |choices: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "choices": choices,
        })
    };
    let mut out = vec![chunk(json!([{
        "index": 0,
        "delta": {"role": "assistant", "content": reply.text},
        "finish_reason": null,
    }]))];
    if !reply.calls.is_empty() {
        out.push(chunk(json!([{
            "index": 0,
            "delta": {"tool_calls": wire_calls(&reply.calls)},
            "finish_reason": null,
        }])));
    }
    out.push(chunk(json!([{
        "index": 0,
        "delta": {},
        "finish_reason": finish_reason(reply.stop),
    }])));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage(reply);
        out.push(last);
    }
    out
}

/// An error body in OpenAI's shape.
pub(crate) fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_into_an_ask_and_refuses_what_cannot_be_honoured() {
        let body = json!({
            "model": "anything",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "2"},
            ],
            "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
            "temperature": 0.2,
            "max_completion_tokens": 64,
            "stop": "END",
            "stream": true,
            "stream_options": {"include_usage": true},
            "parallel_tool_calls": true,
        });
        let request = read_request(&body).unwrap();
        assert!(request.stream && request.include_usage);
        let ask = request.ask;
        assert_eq!(ask.messages.len(), 4);
        assert_eq!(ask.messages[1].content, "hi there");
        assert_eq!(ask.messages[2].tool_calls[0].name, "add");
        assert_eq!(ask.messages[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(ask.tools[0].name, "add");
        assert_eq!(ask.params.temperature, Some(0.2));
        assert_eq!(ask.params.max_tokens, Some(64));
        assert_eq!(ask.params.stop, ["END"]);

        let refused = |extra: Value| {
            let mut body = json!({"messages": [{"role": "user", "content": "x"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            read_request(&body).err().map(|e| e.0)
        };
        assert!(refused(json!({"n": 2})).unwrap().contains("`n`"));
        assert!(
            refused(json!({"tool_choice": "required"}))
                .unwrap()
                .contains("tool_choice")
        );
        assert!(refused(json!({"response_format": {"type": "json_object"}})).is_some());
        assert!(refused(json!({"n": 1, "tool_choice": "auto", "seed": 3})).is_none());
        let image = json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]});
        let error = read_request(&image).err().unwrap().0;
        assert!(
            error.starts_with("messages[0]: content parts of type `image_url`"),
            "{error}"
        );
    }

    #[test]
    fn an_answer_with_calls_is_written_whole_and_as_chunks() {
        let reply = ModelReply {
            text: String::new(),
            calls: vec![ToolCall {
                id: "c1".into(),
                name: "add".into(),
                arguments: "{}".into(),
            }],
            stop: ModelStopReason::ToolCalls,
            usage: keel_types::Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                total_tokens: 5,
                ..keel_types::Usage::default()
            },
            model: "mock".into(),
        };
        let whole = completion("chatcmpl-1", 7, &reply);
        assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(whole["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(whole["choices"][0]["message"]["tool_calls"][0]["id"], "c1");
        assert_eq!(whole["usage"]["total_tokens"], 5);
        let chunks = chunks("chatcmpl-1", 7, &reply, true);
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
            "add"
        );
        assert_eq!(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(chunks[3]["usage"]["prompt_tokens"], 3);
    }
}
