//! Snapshots of what the server puts on the wire and no other test pins whole: the OpenAPI
//! document and the error table (every [`ApiError`] as status, `Retry-After` and body). The
//! `/v1` SSE frames are pinned next to the stream's assertions (`sse_frames`, in `main.rs`).
//! A change here is a change of the HTTP contract: review it as such.

use axum::response::IntoResponse;
use keel_server::ApiError;

use super::*;

#[tokio::test]
async fn the_openapi_document() {
    let ws = workspace();
    let (status, content_type, body) = send(
        app(&ws),
        Request::get("/api/openapi.json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let doc: Value = serde_json::from_slice(&body).unwrap();
    // The version follows the crate's; a release bump is not a contract change.
    insta::assert_json_snapshot!("openapi", doc, { ".info.version" => "[version]" });
}

#[tokio::test]
async fn the_error_table() {
    let errors = [
        ApiError::BadRequest {
            message: "messages: expected an array".into(),
            param: Some("messages"),
        },
        ApiError::InvalidType {
            param: "temperature".into(),
            expected: "a number",
            got: "a string",
        },
        ApiError::UnsupportedParameter {
            param: "top_p".into(),
            reason: "is not supported: the agent's Model document decides sampling".into(),
        },
        ApiError::UnsupportedValue {
            param: "n".into(),
            message: "`n` must be 1, not 2: Keel answers one choice per request".into(),
        },
        ApiError::UnknownParameter("temprature".into()),
        ApiError::MissingParameter("messages[0].role".into()),
        ApiError::InvalidSessionId {
            param: "X-Keel-Session",
            error: keel::SessionId::parse("../x").unwrap_err(),
        },
        ApiError::UnsupportedMediaType(Some("text/plain".into())),
        ApiError::UnsupportedMediaType(None),
        ApiError::PayloadTooLarge,
        ApiError::ModelNotFound("nobody".into()),
        ApiError::NotFound,
        ApiError::MethodNotAllowed,
        ApiError::RunFailed("the model answered 401: bad key".into()),
        ApiError::RunCancelled,
        ApiError::RunInterrupted("req_1".into()),
        ApiError::Unauthorized,
        ApiError::Forbidden,
        ApiError::ResourceNotFound("no request `req_1`".into()),
        ApiError::Conflict("approval `apr_1` was already approved".into()),
        ApiError::TooManyRequests { retry_after: 2 },
        ApiError::ShuttingDown,
        ApiError::Timeout("the request took longer than 30s".into()),
        ApiError::Internal("disk I/O error at /var/lib/keel/keel.db".into()),
    ];
    let mut table = Vec::new();
    for error in errors {
        let variant = format!("{error:?}");
        let response = error.into_response();
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        table.push(json!({
            "variant": variant,
            "status": status,
            "retryAfter": retry_after,
            "body": body,
        }));
    }
    insta::assert_json_snapshot!("error_table", table);
}
