//! What clients send in paths and ids is checked before anything reaches the store: a path
//! parameter that is not UTF-8 once percent-decoded is a JSON 400 `invalid_encoding` naming
//! the parameter on every route; an artifact id longer than 128 bytes is a 400 with a short
//! message (never the filesystem's "name too long" as a 500); `/v1` `metadata` values are
//! strings, and a value of another type is refused naming `metadata.<key>`.

use super::*;

/// The OpenAPI document the server serves.
async fn openapi(ws: &TempWorkspace) -> Value {
    let request = request_with("GET", "/api/openapi.json", None, None);
    let (status, _, body) = send(app(ws), request).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn a_path_parameter_that_is_not_utf8_is_a_json_400_naming_it_on_every_route() {
    let ws = workspace();
    let app = app(&ws);
    let doc = openapi(&ws).await;
    let mut checked = 0;
    for (path, operations) in doc["paths"].as_object().unwrap() {
        let Some((before, rest)) = path.split_once('{') else {
            continue;
        };
        let (param, after) = rest.split_once('}').unwrap();
        // Any later parameter gets a valid value, so the first is the one named.
        let after = after.replace("{id}", "x").replace("{name}", "x");
        let uri = format!("{before}%ff%fe{after}");
        for method in operations.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let body = matches!(method.as_str(), "POST" | "PUT" | "PATCH").then(|| json!({}));
            let request = request_with(&method, &uri, None, body.as_ref());
            let (status, content_type, body) = send(app.clone(), request).await;
            let shown = String::from_utf8_lossy(&body);
            assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {uri}: {shown}");
            assert_eq!(
                content_type.as_deref(),
                Some("application/json"),
                "{method} {uri}: {shown}"
            );
            let value = assert_error(&body, "invalid_request_error");
            assert_eq!(value["error"]["code"], "invalid_encoding", "{method} {uri}");
            assert_eq!(value["error"]["param"], param, "{method} {uri}");
            let message = value["error"]["message"].as_str().unwrap();
            assert!(message.contains("not valid UTF-8"), "{message}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} routes with path parameters");
}

#[tokio::test]
async fn a_long_artifact_id_is_a_400_with_a_short_message() {
    let ws = workspace();
    let app = app(&ws);
    for id in [
        "a".repeat(129),
        "a".repeat(300),
        format!("keel:%2F%2Fartifacts%2F{}", "b".repeat(4000)),
    ] {
        let uri = format!("/api/artifacts/{id}");
        let (status, _, body) = send(app.clone(), request_with("GET", &uri, None, None)).await;
        let shown = String::from_utf8_lossy(&body);
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{} bytes: {shown}",
            id.len()
        );
        let value = assert_error(&body, "invalid_request_error");
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains("more than 128"), "{message}");
        assert!(message.len() < 200, "the message stays short: {message}");
        assert_eq!(value["error"]["param"], "id");
    }
    // At the limit the id is well-formed, and simply not there.
    let uri = format!("/api/artifacts/{}", "a".repeat(128));
    let (status, _, body) = send(app.clone(), request_with("GET", &uri, None, None)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "{}",
        String::from_utf8_lossy(&body)
    );
}

#[tokio::test]
async fn metadata_values_are_strings_and_a_wrong_one_is_named() {
    let ws = workspace();
    for (value, got) in [
        (json!(7), "an integer"),
        (json!({"a": 1}), "an object"),
        (json!(true), "a boolean"),
    ] {
        let request = json!({
            "model": "assistant",
            "messages": [{"role": "user", "content": "Hi"}],
            "metadata": {"team": "red", "tier": value},
        });
        let (status, _, body) = send(app(&ws), post_json(&request)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let error = assert_error(&body, "invalid_request_error");
        assert_eq!(error["error"]["param"], "metadata.tier", "{error}");
        assert_eq!(error["error"]["code"], "invalid_type", "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(got),
            "{error}"
        );
    }
    let request = json!({
        "model": "assistant",
        "messages": [{"role": "user", "content": "Hi"}],
        "metadata": {"team": "red"},
    });
    let (status, _, body) = send(app(&ws), post_json(&request)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn the_openapi_document_declares_metadata_strings_and_the_at_seq_range() {
    let ws = workspace();
    let doc = openapi(&ws).await;
    let chat = &doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    let chat = resolve(&doc, chat);
    let metadata = &chat["properties"]["metadata"];
    assert_eq!(
        metadata["additionalProperties"]["type"], "string",
        "{metadata}"
    );
    let fork = &doc["paths"]["/api/requests/{id}/fork"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    let at_seq = &resolve(&doc, fork)["properties"]["atSeq"];
    assert_eq!(at_seq["maximum"], json!(i64::MAX), "{at_seq}");
    assert_eq!(at_seq["minimum"], json!(1), "{at_seq}");
    assert!(
        doc.to_string().contains("[A-Za-z0-9_-]{1,128}"),
        "artifact ids are 1-128 characters"
    );

    // The declared maximum is what the server takes.
    let request = json!({"atSeq": 9_223_372_036_854_775_808_u64});
    let (status, _, body) = send(
        app(&ws),
        request_with("POST", "/api/requests/req_x/fork", None, Some(&request)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error = assert_error(&body, "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("from 1 to 9223372036854775807"),
        "{error}"
    );
}

/// `schema`, or the component its `$ref` names.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let pointer = reference.trim_start_matches('#');
            doc.pointer(pointer)
                .unwrap_or_else(|| panic!("no {reference}"))
        }
        None => schema,
    }
}
