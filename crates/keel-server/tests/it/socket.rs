//! Over a real socket: SSE resume after a dropped connection, and graceful shutdown.

use std::time::Duration;

use super::*;

/// A workspace whose answers stream slowly (20 deltas, 50 ms apart) or, for `stuck`, not for
/// two minutes, with a shutdown grace (8 s) far longer than a slow answer and far shorter than
/// a stuck one, so the outcome does not depend on the machine's load.
fn slow_workspace() -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant, server: { shutdownGrace: 8s } }")
        .scripted_model(
            "m",
            &json!({"conversations": [
                {"match": "(?i)stuck", "steps": [{"text": "never", "delay": "120s"}]},
                {"steps": [{"text": "abcdefghijklmnopqrst", "chunkSize": 1, "chunkDelay": "50ms"}]}
            ]}),
        )
        .agent("assistant", "{ model: m }")
        .build()
}

pub(super) struct Server {
    pub(super) base: String,
    pub(super) stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<keel_server::ShutdownSummary>>,
    runtime: keel::Runtime,
}

/// `keel_server::serve` over `ws` on a free loopback port.
pub(super) async fn start(ws: &TempWorkspace) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let telemetry = keel_server::Telemetry::new();
    let runtime = keel::Runtime::builder()
        .workspace(ws.path())
        .observer(telemetry.observer())
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(keel_server::serve(
        runtime.clone(),
        telemetry,
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    Server {
        base,
        stop: Some(stop),
        task,
        runtime,
    }
}

/// Reads SSE frames from `response` until `count` frames were read or the stream ends;
/// returns (seq, type) of each.
async fn read_frames(
    response: &mut reqwest::Response,
    count: usize,
    buffer: &mut String,
) -> Vec<(u64, String)> {
    let mut frames = Vec::new();
    while frames.len() < count {
        if let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let mut seq = None;
            let mut kind = String::new();
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    seq = Some(v.parse().unwrap());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = v.to_owned();
                }
            }
            if let Some(seq) = seq {
                frames.push((seq, kind));
            }
            continue;
        }
        match response.chunk().await.unwrap() {
            Some(chunk) => buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
            None => break,
        }
    }
    frames
}

#[tokio::test]
async fn a_reconnecting_sse_client_gets_every_event_exactly_once() {
    let ws = slow_workspace();
    let server = start(&ws).await;
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/api/requests", server.base))
        .json(&json!({"input": "hi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["requestId"].as_str().unwrap().to_owned();
    let events_url = format!("{}/api/requests/{id}/events", server.base);

    let mut received = Vec::new();
    let mut last = None;
    // Three connections, each dropped after a few events while the run goes on.
    for _ in 0..3 {
        let mut request = client
            .get(&events_url)
            .header("accept", "text/event-stream");
        if let Some(seq) = last {
            request = request.header("last-event-id", format!("{seq}"));
        }
        let mut response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        let frames = read_frames(&mut response, 4, &mut String::new()).await;
        assert_eq!(frames.len(), 4);
        last = frames.last().map(|f| f.0);
        received.extend(frames);
        drop(response);
    }
    // The last connection follows the run to its end.
    let mut response = client
        .get(&events_url)
        .header("accept", "text/event-stream")
        .header("last-event-id", format!("{}", last.unwrap()))
        .send()
        .await
        .unwrap();
    let rest = read_frames(&mut response, usize::MAX, &mut String::new()).await;
    received.extend(rest);

    let stored: Value = client
        .get(&events_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stored: Vec<u64> = stored["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let seqs: Vec<u64> = received.iter().map(|f| f.0).collect();
    assert_eq!(seqs, stored, "every stored event exactly once, in order");
    assert!(
        stored.len() > 20,
        "the run streamed many events: {}",
        stored.len()
    );
    assert_eq!(received.last().unwrap().1, "runtime.request.completed");
    let _ = server.stop.map(|s| s.send(()));
}

#[tokio::test]
async fn shutdown_lets_short_runs_finish_and_interrupts_the_rest() {
    let ws = slow_workspace();
    let mut server = start(&ws).await;
    let client = reqwest::Client::new();
    let chat = |input: &str| {
        client
            .post(format!("{}/v1/chat/completions", server.base))
            .json(&json!({"model": "assistant", "stream": true, "messages": [{"role": "user", "content": input}]}))
            .send()
    };
    let stuck = chat("stuck").await.unwrap();
    assert_eq!(stuck.status(), 200);
    let mut short = chat("hi").await.unwrap();
    assert_eq!(short.status(), 200);
    // Once the short run streams (the stuck one started before it), stop the server.
    let first = short.chunk().await.unwrap().expect("the short run streams");
    server.stop.take().unwrap().send(()).unwrap();
    let body = tokio::time::timeout(Duration::from_secs(60), stuck.text())
        .await
        .expect("the stream ends after the grace period")
        .unwrap();
    assert!(body.contains("\"code\":\"interrupted\""), "{body}");
    // The short run (1 s) finished within the grace period (8 s).
    let short = String::from_utf8_lossy(&first).into_owned() + &short.text().await.unwrap();
    assert!(short.contains("\"finish_reason\":\"stop\""), "{short}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let summary = tokio::time::timeout(Duration::from_secs(60), server.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(summary.interrupted, 1, "{summary:?}");
    assert_eq!(summary.finished, 1, "{summary:?}");

    let runs = server
        .runtime
        .runs()
        .list(&keel::RunFilter::default())
        .await
        .unwrap();
    let mut statuses: Vec<_> = runs.iter().map(|r| r.status).collect();
    statuses.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(
        statuses,
        [keel::RunStatus::Completed, keel::RunStatus::Interrupted]
    );
    // Nothing listens any more.
    assert!(chat("hi").await.is_err());
}
