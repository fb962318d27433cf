//! The facade checks a Chat Completions request as the OpenAI API does — every field's type,
//! unknown fields, values Keel does not support — and every JSON route refuses a body that is
//! not JSON with a 415.

use super::*;

/// A valid request with `extra` merged in at the top level.
fn chat_with(extra: Value) -> Value {
    let mut request =
        json!({"model": "assistant", "messages": [{"role": "user", "content": "Hi"}]});
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    request
}

/// Asserts a 400 with `param` and `code`.
async fn assert_refused(ws: &TempWorkspace, request: Value, param: &str, code: &str) -> Value {
    let (status, _, body) = send(app(ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{request}");
    let value = assert_error(&body, "invalid_request_error");
    assert_eq!(value["error"]["param"], param, "{request} → {value}");
    assert_eq!(value["error"]["code"], code, "{request} → {value}");
    value
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_a_400_naming_it() {
    let ws = workspace();
    let cases = [
        (json!({"n": "2"}), "n"),
        (json!({"n": 1.5}), "n"),
        (json!({"max_tokens": "100"}), "max_tokens"),
        (json!({"temperature": "hot"}), "temperature"),
        (json!({"tools": "all"}), "tools"),
        (json!({"tool_choice": 3}), "tool_choice"),
        (json!({"stream": "yes"}), "stream"),
        (
            json!({"stream_options": {"include_usage": "x"}}),
            "stream_options.include_usage",
        ),
        (json!({"user": 7}), "user"),
        (json!({"model": 3}), "model"),
        (json!({"messages": "Hi"}), "messages"),
        (
            json!({"messages": [{"role": "user", "content": 7}]}),
            "messages[0].content",
        ),
        (
            json!({"messages": [{"role": 1, "content": "Hi"}]}),
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}),
            "messages[0].content[0].text",
        ),
        (
            json!({"messages": [
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]},
                {"role": "user", "content": "Hi"}
            ]}),
            "messages[0].tool_calls[0].function.arguments",
        ),
    ];
    for (extra, param) in cases {
        let value = assert_refused(&ws, chat_with(extra), param, "invalid_type").await;
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{param}`")), "{message}");
    }
}

#[tokio::test]
async fn sampling_parameters_are_accepted_and_unsupported_values_refused() {
    let ws = workspace();
    // Honoured (sampling.rs shows what they do); a scripted model takes them without effect.
    let (status, _, body) = send(
        app(&ws),
        post_json(&chat_with(json!({
            "temperature": 0.2, "top_p": 0.9, "max_tokens": 100, "stop": ["\n"], "seed": 7,
            "presence_penalty": 0.5, "frequency_penalty": 0.5,
            "response_format": {"type": "text"}
        }))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let value = assert_refused(&ws, chat_with(json!({"n": 2})), "n", "unsupported_value").await;
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be 1"),
        "{value}"
    );
    assert_refused(
        &ws,
        chat_with(json!({"logprobs": true})),
        "logprobs",
        "unsupported_value",
    )
    .await;
}

#[tokio::test]
async fn unknown_and_missing_fields_are_400() {
    let ws = workspace();
    let value = assert_refused(
        &ws,
        chat_with(json!({"temprature": 0.2})),
        "temprature",
        "unknown_parameter",
    )
    .await;
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unrecognized request argument"),
        "{value}"
    );
    assert_refused(
        &ws,
        json!({"messages": [{"role": "user", "content": "Hi"}]}),
        "model",
        "missing_required_parameter",
    )
    .await;
    assert_refused(
        &ws,
        chat_with(json!({"messages": [{"content": "Hi"}]})),
        "messages[0].role",
        "missing_required_parameter",
    )
    .await;
}

#[tokio::test]
async fn supported_values_nulls_and_fields_without_effect_are_accepted() {
    let ws = workspace();
    let request = chat_with(json!({
        "n": 1,
        "logprobs": false,
        "temperature": null,
        "max_tokens": null,
        "stream": null,
        "tools": [{"type": "function", "function": {"name": "anything", "parameters": {}}}],
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "user": "someone",
        "metadata": {"k": "v"},
        "store": false,
        "messages": [
            {"role": "system", "content": "Be brief.", "name": null},
            {"role": "assistant", "content": "Hello.", "tool_calls": null, "refusal": null},
            {"role": "user", "content": "Hi"}
        ]
    }));
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    let value: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["choices"][0]["message"]["content"], "Hello there");
}

fn with_type(method: &str, uri: &str, content_type: Option<&str>, body: &str) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(content_type) = content_type {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

#[tokio::test]
async fn a_body_that_is_not_json_is_415_on_v1_and_api() {
    let ws = workspace();
    let chat = chat_with(json!({})).to_string();
    let create = json!({"input": "Hi"}).to_string();
    for (uri, body) in [("/v1/chat/completions", &chat), ("/api/requests", &create)] {
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let (status, _, answer) =
                send(app(&ws), with_type("POST", uri, content_type, body)).await;
            assert_eq!(
                status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{uri} {content_type:?}"
            );
            let value = assert_error(&answer, "invalid_request_error");
            assert_eq!(value["error"]["code"], "unsupported_media_type", "{value}");
        }
    }
    // JSON with a charset, or in any case, is JSON.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let (status, _, answer) = send(
            app(&ws),
            with_type("POST", "/v1/chat/completions", Some(content_type), &chat),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{content_type}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
}

#[tokio::test]
async fn a_request_without_a_body_needs_no_content_type() {
    let ws = workspace();
    let (status, _, answer) = send(
        app(&ws),
        with_type("POST", "/api/requests/run_none/cancel", None, ""),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// Over a real socket, as curl's `-d` sends it (a form type).
#[tokio::test]
async fn a_form_body_over_a_socket_is_415() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = workspace();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(axum::serve(listener, app(&ws)).into_future());
    let client = reqwest::Client::new();
    for uri in ["/v1/chat/completions", "/api/requests"] {
        let response = client
            .post(format!("{base}{uri}"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(r#"{"input":"Hi"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 415, "{uri}");
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["error"]["code"], "unsupported_media_type", "{value}");
    }
    server.abort();
}
