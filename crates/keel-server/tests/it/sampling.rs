//! The facade honours a request's model parameters (`temperature`, `max_tokens` /
//! `max_completion_tokens`, `top_p`, `stop`, `seed`, the penalties) and `response_format`:
//! they reach the model in every round of that request, are recorded in
//! `runtime.request.started` and in each `runtime.model.started`, and are held to the agent's
//! `facade` (`allow`: refused naming the parameter; `clamp`: clamped, and the clamped value
//! recorded). Only what cannot be honoured is refused, saying why.

use keel_test_support::workflows::triage_workspace;
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use super::*;

/// Agents on the mock: `assistant` (no `facade`: every parameter, no bounds), `bounded`
/// (clamped), `strict` (allows `temperature` only). `read_file` makes a second round.
fn mock_workspace(mock: &MockLlm) -> TempWorkspace {
    WorkspaceBuilder::new()
        .openai_model_at("mock", &mock.base_url())
        .agent("assistant", "{ model: mock, tools: [read_file] }")
        .agent(
            "bounded",
            "{ model: mock, facade: { clamp: { maxTokens: 100, temperature: { min: 0.2, max: 1 }, topP: { max: 0.5 } } } }",
        )
        .agent("strict", "{ model: mock, facade: { allow: [temperature] } }")
        .file("notes.txt", "the notes\n")
        .build()
}

async fn chat(app: &Router, request: Value) -> (StatusCode, Value) {
    let (status, _, body) = send(app.clone(), post_json(&request)).await;
    (status, serde_json::from_slice(&body).unwrap())
}

/// The events of the run behind a completion id.
async fn events_of(app: &Router, completion: &Value) -> Vec<Value> {
    let id = completion["id"]
        .as_str()
        .unwrap()
        .strip_prefix("chatcmpl-")
        .unwrap();
    let request = Request::get(format!("/api/requests/{id}/events"))
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = send(app.clone(), request).await;
    assert_eq!(status, StatusCode::OK);
    let page: Value = serde_json::from_slice(&body).unwrap();
    page["data"].as_array().unwrap().clone()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test]
async fn sampling_parameters_reach_every_round_and_are_recorded() {
    let mock = MockLlm::start().await;
    mock.respond_with(|request| match request.last_role() {
        Some("tool") => MockResponse::text(["Read it."]),
        _ => MockResponse::tool_calls([MockToolCall::new(
            "c1",
            "read_file",
            [r#"{"path":"notes.txt"}"#],
        )]),
    });
    let ws = mock_workspace(&mock);
    let app = app(&ws);
    let (status, value) = chat(
        &app,
        json!({
            "model": "assistant",
            "messages": [{"role": "user", "content": "Read the notes"}],
            "temperature": 0,
            "max_completion_tokens": 50,
            "top_p": 0.9,
            "stop": "END",
            "seed": 42,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5
        }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["choices"][0]["message"]["content"], "Read it.");
    let sent = json!({
        "temperature": 0.0, "max_tokens": 50, "top_p": 0.9, "stop": ["END"], "seed": 42,
        "presence_penalty": 0.5, "frequency_penalty": -0.5
    });
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "a tool round and an answer round");
    for request in &requests {
        for (key, expected) in sent.as_object().unwrap() {
            assert_eq!(&request.body[key], expected, "{key} in {}", request.body);
        }
    }
    let recorded = json!({
        "temperature": 0.0, "maxTokens": 50, "topP": 0.9, "stop": ["END"], "seed": 42,
        "presencePenalty": 0.5, "frequencyPenalty": -0.5
    });
    let events = events_of(&app, &value).await;
    assert_eq!(
        of_type(&events, "runtime.request.started")[0]["params"],
        recorded
    );
    let rounds = of_type(&events, "runtime.model.started");
    assert_eq!(rounds.len(), 2);
    for round in rounds {
        assert_eq!(round["params"], recorded, "{round}");
    }
}

#[tokio::test]
async fn the_agents_facade_clamps_and_refuses_what_it_does_not_allow() {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| MockResponse::text(["ok"]));
    let ws = mock_workspace(&mock);
    let app = app(&ws);
    let hi = json!([{"role": "user", "content": "Hi"}]);

    // Over the bounds: clamped, and the clamped values are what the model gets and the run
    // records.
    let (status, value) = chat(
        &app,
        json!({"model": "bounded", "messages": hi, "max_tokens": 5000, "temperature": 1.7,
               "top_p": 0.9, "seed": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let body = mock.last_request().unwrap().body;
    assert_eq!(body["max_tokens"], 100);
    assert_eq!(body["temperature"], 1.0);
    assert_eq!(body["top_p"], 0.5);
    assert_eq!(body["seed"], 1);
    let events = events_of(&app, &value).await;
    assert_eq!(
        of_type(&events, "runtime.request.started")[0]["params"],
        json!({"temperature": 1.0, "maxTokens": 100, "topP": 0.5, "seed": 1})
    );
    // Under a minimum: raised to it; within the bounds: as sent.
    chat(
        &app,
        json!({"model": "bounded", "messages": hi, "temperature": 0, "max_tokens": 7}),
    )
    .await;
    let body = mock.last_request().unwrap().body;
    assert_eq!(
        (body["temperature"].as_f64(), body["max_tokens"].as_u64()),
        (Some(0.2), Some(7))
    );

    // Not allowed: a 400 naming the parameter and the agent's setting; nothing reaches the model.
    let before = mock.request_count();
    for (field, value) in [
        ("seed", json!(3)),
        ("max_tokens", json!(10)),
        ("stop", json!("x")),
    ] {
        let mut request = json!({"model": "strict", "messages": hi});
        request[field] = value;
        let (status, error) = chat(&app, request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert_eq!(error["error"]["param"], field, "{error}");
        assert_eq!(error["error"]["code"], "unsupported_parameter", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("facade.allow") && message.contains("`strict`"),
            "{message}"
        );
    }
    assert_eq!(mock.request_count(), before);
    let (status, value) = chat(
        &app,
        json!({"model": "strict", "messages": hi, "temperature": 0.3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(mock.last_request().unwrap().body["temperature"], 0.3);
}

#[tokio::test]
async fn values_the_api_does_not_take_are_refused_saying_why() {
    let mock = MockLlm::start().await;
    let ws = mock_workspace(&mock);
    let app = app(&ws);
    let hi = json!([{"role": "user", "content": "Hi"}]);
    for (extra, param, code, says) in [
        (
            json!({"temperature": 2.5}),
            "temperature",
            "unsupported_value",
            "between 0 and 2",
        ),
        (
            json!({"top_p": -0.1}),
            "top_p",
            "unsupported_value",
            "between 0 and 1",
        ),
        (
            json!({"presence_penalty": 3}),
            "presence_penalty",
            "unsupported_value",
            "between -2 and 2",
        ),
        (
            json!({"max_tokens": 0}),
            "max_tokens",
            "unsupported_value",
            "from 1",
        ),
        (
            json!({"max_tokens": 10, "max_completion_tokens": 20}),
            "max_completion_tokens",
            "unsupported_value",
            "same limit",
        ),
        (
            json!({"stop": ["a", "b", "c", "d", "e"]}),
            "stop",
            "unsupported_value",
            "at most 4",
        ),
        (
            json!({"stop": ["a", 1]}),
            "stop[1]",
            "invalid_type",
            "a string",
        ),
        (
            json!({"response_format": {"type": "xml"}}),
            "response_format.type",
            "unsupported_value",
            "json_schema",
        ),
        (
            json!({"response_format": {"type": "json_schema"}}),
            "response_format.json_schema",
            "missing_required_parameter",
            "json_schema",
        ),
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}),
            "response_format.json_schema.name",
            "missing_required_parameter",
            "name",
        ),
        (
            json!({"response_format": {"type": "text", "extra": 1}}),
            "response_format.extra",
            "unknown_parameter",
            "extra",
        ),
        (
            json!({"logit_bias": {"1": 2}}),
            "logit_bias",
            "unsupported_parameter",
            "not this",
        ),
    ] {
        let mut request = json!({"model": "assistant", "messages": hi});
        for (key, value) in extra.as_object().unwrap() {
            request[key] = value.clone();
        }
        let (status, error) = chat(&app, request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}: {error}");
        assert_eq!(error["error"]["param"], param, "{extra}: {error}");
        assert_eq!(error["error"]["code"], code, "{extra}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{extra}: {message}");
    }
    // An unusable schema is refused before the run starts.
    let bad_schema = json!({"model": "assistant", "messages": hi, "response_format":
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}});
    let (status, error) = chat(&app, bad_schema).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON Schema"),
        "{error}"
    );
    assert_eq!(mock.request_count(), 0);
}

#[tokio::test]
async fn a_json_schema_response_format_is_the_runs_checked_structured_output() {
    let mock = MockLlm::start().await;
    // The first answer does not match: the model is asked again (as for `output.schema`).
    mock.push(MockResponse::text([r#"{"city": "Paris"}"#]));
    mock.push(MockResponse::text([
        "```json\n",
        r#"{"city": "Paris", "celsius": 21}"#,
        "\n```",
    ]));
    mock.push(MockResponse::text(["{\"a\": 1}"]));
    mock.push(MockResponse::text(["not json"]));
    mock.push(MockResponse::text(["[1]"]));
    mock.push(MockResponse::text(["{\"b\": 2}"]));
    let ws = mock_workspace(&mock);
    let app = app(&ws);
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
        "required": ["city", "celsius"],
        "additionalProperties": false
    });
    let (status, value) = chat(
        &app,
        json!({"model": "assistant", "messages": [{"role": "user", "content": "Weather?"}],
               "response_format": {"type": "json_schema",
                                   "json_schema": {"name": "weather", "schema": schema, "strict": true}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    // The checked value, as compact JSON (the fence is gone).
    assert_eq!(
        value["choices"][0]["message"]["content"],
        r#"{"city":"Paris","celsius":21}"#
    );
    let first = &mock.requests()[0].body;
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("\"celsius\""),
        "the prompt asks for the schema: {first}"
    );
    let events = events_of(&app, &value).await;
    assert_eq!(
        of_type(&events, "runtime.request.started")[0]["outputSchema"],
        schema
    );
    assert_eq!(of_type(&events, "runtime.output.rejected").len(), 1);
    assert_eq!(
        of_type(&events, "runtime.request.completed")[0]["value"],
        json!({"city": "Paris", "celsius": 21})
    );

    // `json_object`: any JSON object; streamed, the answer comes whole once checked.
    let request = json!({"model": "assistant", "messages": [{"role": "user", "content": "JSON"}],
                         "response_format": {"type": "json_object"}, "stream": true});
    let (status, _, body) = send(app.clone(), post_json(&request)).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains(r#""content":"{\"a\":1}""#), "{text}");
    // Not JSON, then not an object: asked again until an object comes.
    let (status, value) = chat(
        &app,
        json!({"model": "assistant", "messages": [{"role": "user", "content": "JSON"}],
               "response_format": {"type": "json_object"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["choices"][0]["message"]["content"], r#"{"b":2}"#);
    // `text` is the default: nothing changes.
    mock.push(MockResponse::text(["plain"]));
    let (status, value) = chat(
        &app,
        json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}],
               "response_format": {"type": "text"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["choices"][0]["message"]["content"], "plain");
}

#[tokio::test]
async fn what_a_model_cannot_take_is_refused_saying_why() {
    let mock = MockLlm::start().await;
    let ws = triage_workspace(&mock.base_url()).build();
    let app = app(&ws);
    let hi = json!([{"role": "user", "content": "Hi"}]);
    // An agent with its own output schema takes no other.
    let (status, error) = chat(
        &app,
        json!({"model": "classifier", "messages": hi, "response_format": {"type": "json_object"}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("output.schema"),
        "{error}"
    );
    // A workflow's nodes run on their own agents' models.
    let (status, error) = chat(
        &app,
        json!({"model": "workflow/triage", "messages": hi, "temperature": 0}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "temperature");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("workflow"),
        "{error}"
    );
    assert_eq!(mock.request_count(), 0);
}
