//! `GET /api/usage`: what runs used and cost, by one grouping or several; and the overview's
//! last hour, which counts the same runs minute by minute.

use axum::http::StatusCode;
use serde_json::json;

use crate::routes::{call, chat, rich_app, rich_workspace};

#[tokio::test]
async fn usage_sums_the_runs_by_agent_and_refuses_an_unknown_grouping() {
    let ws = rich_workspace("");
    let app = rich_app(&ws);
    for _ in 0..2 {
        let (status, _) = call(
            &app,
            "POST",
            "/v1/chat/completions",
            Some(&chat("hi", false)),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, usage) = call(&app, "GET", "/api/usage", None).await;
    assert_eq!(status, StatusCode::OK, "{usage}");
    assert_eq!(usage["data"][0]["group"], "assistant");
    assert_eq!(usage["data"][0]["runs"], 2);
    assert!(usage["data"][0]["usage"]["totalTokens"].as_u64().unwrap() > 0);
    let (status, by_day) = call(&app, "GET", "/api/usage?by=day", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(by_day["data"].as_array().unwrap().len(), 1);
    // By two groupings at once: each agent's usage per day, with both values.
    let (status, both) = call(&app, "GET", "/api/usage?by=day,agent", None).await;
    assert_eq!(status, StatusCode::OK, "{both}");
    let row = &both["data"][0];
    let day = by_day["data"][0]["group"].as_str().unwrap();
    assert_eq!(row["groups"], json!([day, "assistant"]));
    assert_eq!(row["group"], format!("{day} / assistant"));
    assert_eq!(row["runs"], 2);
    assert_eq!(row["usage"], usage["data"][0]["usage"]);
    // The overview's last hour counts them in the minutes they started.
    let (status, overview) = call(&app, "GET", "/api/overview", None).await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    let hour = &overview["lastHour"];
    assert_eq!(hour["started"], 2, "{hour}");
    assert_eq!(hour["ended"], 2, "{hour}");
    assert_eq!(hour["errorRate"], 0.0, "{hour}");
    let per_minute: u64 = hour["minutes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(per_minute, 2, "{hour}");
    let (status, wrong) = call(&app, "GET", "/api/usage?by=planet", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{wrong}");
    let (status, wrong) = call(&app, "GET", "/api/usage?by=day,planet", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{wrong}");
}
