//! Several `keel serve` replicas on one PostgreSQL database (the local server, a fresh schema
//! per test, dropped afterwards): queued runs spread over the replicas, a replica killed with
//! SIGKILL has its runs taken over, an approval asked on one replica is decided through
//! another, a live stream follows a run executing elsewhere and resumes on a third replica
//! with `Last-Event-ID`, and a replica frozen past its lease cannot write once it wakes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use keel_test_support::{
    MockLlm, MockResponse, MockToolCall, Serving, TempWorkspace, WorkspaceBuilder,
};
use serde_json::{Value, json};

use crate::common::keel_in;

pub(crate) use keel_test_support::database_url;

/// A schema of the test's own, dropped when the test ends (even when it fails).
pub(crate) struct Schema(pub(crate) String);

impl Schema {
    pub(crate) fn new() -> Self {
        Self(format!(
            "t_replicas_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let schema = self.0.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let options = keel_store::PgOptions {
                    schema: Some(schema),
                    ..keel_store::PgOptions::new(database_url())
                };
                if let Ok(store) = keel_store::PgStore::lazy(options) {
                    let _ = store.drop_schema().await;
                }
            });
        })
        .join();
    }
}

/// The model: slow answers for queued jobs (slower for `slow …`), a long trickling answer
/// for `stream`, a `write_file` call (which asks for approval) for `approval`.
pub(crate) fn script(mock: &MockLlm) {
    mock.respond_with(|request| {
        if request.last_role() == Some("tool") {
            return MockResponse::text(["written"]);
        }
        let input = request
            .last_content_of("user")
            .unwrap_or_default()
            .to_owned();
        if input.contains("approval") {
            return MockResponse::tool_calls([MockToolCall::new(
                "call_1",
                "write_file",
                [r#"{"path": "approved.txt", "content": "yes"}"#],
            )]);
        }
        if input.contains("stream") {
            return MockResponse::text((0..40).map(|i| format!("w{i} ")))
                .chunk_delay(Duration::from_millis(50));
        }
        let delay = match input.starts_with("slow") {
            true => Duration::from_secs(1),
            false => Duration::from_millis(300),
        };
        MockResponse::text(["done: ", input.as_str()]).delay(delay)
    });
}

fn workspace(mock: &MockLlm, schema: &Schema, lease_ttl: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: worker, limits: {{ maxConcurrentRuns: 8 }}, \
             store: {{ kind: postgres, url: '{}', schema: {}, leaseTtl: {lease_ttl} }} }}",
            database_url(),
            schema.0
        ))
        .openai_model_at("mock", &mock.base_url())
        .agent("worker", "{ model: mock }")
        .agent("streamer", "{ model: mock }")
        .agent("approver", "{ model: mock, tools: [write_file] }")
        .agent("victim", "{ model: mock }")
        .build()
}

pub(crate) struct Replicas {
    pub(crate) http: reqwest::Client,
    servers: Vec<Option<Serving>>,
}

impl Replicas {
    pub(crate) fn start(ws: &TempWorkspace, names: &[&str]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let servers = names
            .iter()
            .map(|name| {
                // Takeovers, fencing and failures are logged, and shown if the test fails.
                let keel = keel_in(ws)
                    .env("KEEL_REPLICA", name)
                    .env("KEEL_LOG", "warn");
                Some(keel.serve())
            })
            .collect();
        Self {
            http: reqwest::Client::new(),
            servers,
        }
    }

    pub(crate) fn url(&self, replica: usize, path: &str) -> String {
        let serving = self.servers[replica].as_ref().expect("replica is running");
        format!("http://{}{path}", serving.addr())
    }

    async fn get(&self, replica: usize, path: &str) -> Value {
        let response = self.http.get(self.url(replica, path)).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    async fn post(&self, replica: usize, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(self.url(replica, path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Queues `count` runs of the default agent, spread over the replicas in turn, with
    /// inputs `{prefix} {i}`; their ids.
    pub(crate) async fn enqueue(&self, count: usize, prefix: &str) -> Vec<String> {
        let mut ids = Vec::with_capacity(count);
        for i in 0..count {
            let input = format!("{prefix} {i}");
            let (status, body) = self
                .post(
                    i % self.servers.len(),
                    "/api/requests",
                    json!({"input": input}),
                )
                .await;
            assert_eq!(status, 202, "{body}");
            ids.push(body["requestId"].as_str().unwrap().to_owned());
        }
        ids
    }

    /// The runs of `agent` (newest first), as replica `replica` lists them.
    async fn runs_of(&self, replica: usize, agent: &str) -> Vec<Value> {
        let page = self
            .get(replica, &format!("/api/requests?agent={agent}&limit=1000"))
            .await;
        page["data"].as_array().cloned().unwrap_or_default()
    }

    pub(crate) async fn events(&self, replica: usize, id: &str) -> Vec<Value> {
        let page = self
            .get(replica, &format!("/api/requests/{id}/events?limit=10000"))
            .await;
        page["data"].as_array().cloned().unwrap_or_default()
    }
}

/// Waits for `condition`, checking every 100 ms, failing after `limit` with `what`.
async fn until<F, Fut>(limit: Duration, what: &str, condition: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    poll(limit, what, || async { condition().await.then_some(()) }).await;
}

/// Waits until `probe` gives a value, checking every 100 ms, failing after `limit`.
async fn poll<T, F, Fut>(limit: Duration, what: &str, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads SSE frames from `response` until `stop` says so; returns the `(id, event)` pairs.
async fn read_frames(
    response: &mut reqwest::Response,
    mut stop: impl FnMut(&[(u64, String)]) -> bool,
) -> Vec<(u64, String)> {
    let mut frames = Vec::new();
    let mut buffer = String::new();
    while !stop(&frames) {
        let Some(chunk) = response.chunk().await.unwrap() else {
            break;
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let id = frame
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .and_then(|v| v.trim().parse().ok());
            let event = frame
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_owned);
            if let (Some(id), Some(event)) = (id, event) {
                frames.push((id, event));
            }
        }
    }
    frames
}

/// Every run's log: dense from 1, one terminal event, last, and it is `completed`.
pub(crate) fn assert_log(id: &str, events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "run {id}: seq dense from 1, no event lost or duplicated"
    );
    let terminal: Vec<&str> = events
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|t| {
            matches!(
                *t,
                "runtime.request.completed"
                    | "runtime.request.failed"
                    | "runtime.request.cancelled"
            )
        })
        .collect();
    assert_eq!(
        terminal,
        ["runtime.request.completed"],
        "run {id}: completed exactly once"
    );
    assert_eq!(
        events.last().unwrap()["type"],
        "runtime.request.completed",
        "run {id}: the terminal event is last"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_queue_approvals_and_streams_and_survive_a_sigkill() {
    let mock = MockLlm::start().await;
    script(&mock);
    let schema = Schema::new();
    let ws = workspace(&mock, &schema, "2s");
    let mut replicas = Replicas::start(&ws, &["a", "b", "c"]);

    // A live stream from a replica that is not executing the run, resumed on a third.
    let on_a = {
        let http = replicas.http.clone();
        let url = replicas.url(0, "/api/requests");
        tokio::spawn(async move {
            let body = json!({"agent": "streamer", "input": "stream please", "wait": true});
            http.post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let stream_id = poll(
        Duration::from_secs(60),
        "the streamed run to start",
        || async {
            let runs = replicas.runs_of(1, "streamer").await;
            Some(runs.first()?["requestId"].as_str()?.to_owned())
        },
    )
    .await;
    let mut first = replicas
        .http
        .get(replicas.url(1, &format!("/api/requests/{stream_id}/events")))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let head = read_frames(&mut first, |frames| frames.len() >= 5).await;
    drop(first);
    let last_seen = head.last().unwrap().0;
    let mut second = replicas
        .http
        .get(replicas.url(2, &format!("/api/requests/{stream_id}/events")))
        .header("accept", "text/event-stream")
        .header("last-event-id", last_seen.to_string())
        .send()
        .await
        .unwrap();
    let tail = read_frames(&mut second, |frames| {
        frames
            .last()
            .is_some_and(|(_, event)| event == "runtime.request.completed")
    })
    .await;
    assert_eq!(on_a.await.unwrap(), 200, "the run executed on replica a");
    let seen: Vec<u64> = head.iter().chain(&tail).map(|(id, _)| *id).collect();
    let stored = replicas.events(0, &stream_id).await;
    assert_eq!(
        seen,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "every event once, in order, across two replicas"
    );
    assert_log(&stream_id, &stored);

    // An approval asked on replica a, decided through replica c.
    let on_a = {
        let http = replicas.http.clone();
        let url = replicas.url(0, "/api/requests");
        tokio::spawn(async move {
            let body = json!({"agent": "approver", "input": "needs approval", "wait": true});
            let response = http.post(url).json(&body).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        })
    };
    let approval = poll(
        Duration::from_secs(60),
        "the approval on replica c",
        || async {
            let page = replicas.get(2, "/api/approvals?status=pending").await;
            Some(
                page["data"].as_array()?.first()?["approvalId"]
                    .as_str()?
                    .to_owned(),
            )
        },
    )
    .await;
    let (status, _) = replicas
        .post(2, &format!("/api/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, answer) = on_a.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("approved.txt")).unwrap(),
        "yes"
    );

    // A cancel sent to replica c stops the run executing on replica a.
    let on_a = {
        let http = replicas.http.clone();
        let url = replicas.url(0, "/api/requests");
        tokio::spawn(async move {
            let body = json!({"agent": "victim", "input": "stream please", "wait": true});
            let response = http.post(url).json(&body).send().await.unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    let victim = poll(
        Duration::from_secs(60),
        "the run to cancel to start",
        || async {
            let runs = replicas.runs_of(2, "victim").await;
            let id = runs.first()?["requestId"].as_str()?.to_owned();
            (replicas.events(2, &id).await.len() >= 3).then_some(id)
        },
    )
    .await;
    let (status, body) = replicas
        .post(2, &format!("/api/requests/{victim}/cancel"), json!({}))
        .await;
    assert_eq!((status, &body["cancelled"]), (200, &json!(true)), "{body}");
    let answer = on_a.await.unwrap();
    assert_eq!(answer["status"], "cancelled", "{answer}");

    // 200 queued runs over the three replicas; replica b is killed on the way.
    let ids = replicas.enqueue(200, "job").await;
    until(
        Duration::from_secs(120),
        "a third of the runs to complete",
        || async {
            let page = replicas
                .get(0, "/api/requests?agent=worker&status=completed&limit=1000")
                .await;
            page["data"].as_array().map_or(0, Vec::len) >= 60
        },
    )
    .await;
    let mut killed = replicas.servers[1].take().unwrap();
    killed.child().kill().unwrap();
    killed.child().wait().unwrap();
    every_run_completes(&replicas, &ids).await;
    let mut answered = BTreeSet::new();
    let mut total_events = 0;
    for id in &ids {
        let events = replicas.events(2, id).await;
        assert_log(id, &events);
        total_events += events.len();
        let run = replicas.get(0, &format!("/api/requests/{id}")).await;
        assert_eq!(run["status"], "completed");
        answered.insert(run["output"].as_str().unwrap().to_owned());
    }
    assert_eq!(answered.len(), 200, "each run answered its own job");
    // The survivors report their leases, and between them took over what b held.
    let mut taken_over = 0;
    for replica in [0, 2] {
        let health = replicas.get(replica, "/api/health").await;
        let cluster = &health["store"]["cluster"];
        assert!(cluster["lease"]["token"].as_i64().is_some(), "{health}");
        assert_eq!(cluster["queueDepth"], 0, "{health}");
        taken_over += cluster["takenOver"].as_u64().unwrap();
        // The console's overview shows the same replicas and queue.
        let overview = replicas.get(replica, "/api/overview").await;
        assert_eq!(
            overview["cluster"]["replicas"], cluster["replicas"],
            "{overview}"
        );
        assert_eq!(overview["cluster"]["queueDepth"], 0, "{overview}");
        let metrics = replicas
            .http
            .get(replicas.url(replica, "/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(metrics.contains("keel_queue_depth 0"), "{metrics}");
        assert!(metrics.contains("keel_lease_takeovers"), "{metrics}");
    }
    let resumed = resumed_count(&replicas, &ids).await;
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "replica b killed: {resumed} run(s) taken over and resumed, {} events across 200 runs",
        total_events
    );
    assert!(resumed >= 1, "replica b held runs when it was killed");
    assert_eq!(
        taken_over, resumed,
        "the runs taken over are the runs resumed"
    );
}

/// Waits until every run of `ids` has completed. Fails at once, showing the run, when one
/// ends otherwise, and when none ends for a minute, showing the runs still unfinished.
async fn every_run_completes(replicas: &Replicas, ids: &[String]) {
    let mut completed = 0;
    let mut progress_at = Instant::now();
    loop {
        let page = replicas
            .get(0, "/api/requests?agent=worker&limit=1000")
            .await;
        let runs = page["data"].as_array().cloned().unwrap_or_default();
        let ours: Vec<&Value> = runs
            .iter()
            .filter(|run| ids.iter().any(|id| run["requestId"] == id.as_str()))
            .collect();
        assert_eq!(ours.len(), ids.len(), "every queued run is listed");
        let unfinished: Vec<&Value> = ours
            .into_iter()
            .filter(|run| run["status"] != "completed")
            .collect();
        if let Some(run) = unfinished
            .iter()
            .find(|run| matches!(run["status"].as_str(), Some("failed" | "cancelled")))
        {
            let id = run["requestId"].as_str().unwrap_or_default();
            let events = replicas.events(0, id).await;
            panic!("run {id} did not complete: {run:#}\nits events: {events:#?}");
        }
        let done = ids.len() - unfinished.len();
        if done == ids.len() {
            return;
        }
        if done > completed {
            completed = done;
            progress_at = Instant::now();
        }
        if progress_at.elapsed() > Duration::from_secs(60) {
            let shown: Vec<String> = unfinished
                .iter()
                .map(|run| format!("{} {} {}", run["requestId"], run["status"], run["links"]))
                .collect();
            let health = [
                replicas.get(0, "/api/health").await,
                replicas.get(2, "/api/health").await,
            ];
            panic!(
                "no run completed for a minute; {done} of {} did. Unfinished:\n{}\nhealth: {health:#?}",
                ids.len(),
                shown.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many times `ids` were resumed (taken over from a replica whose lease expired).
async fn resumed_count(replicas: &Replicas, ids: &[String]) -> u64 {
    let mut resumed = 0;
    for id in ids {
        let run = replicas.get(0, &format!("/api/requests/{id}")).await;
        resumed += run["links"]["resumed"].as_u64().unwrap_or(0);
    }
    resumed
}

/// Sends `signal` (`STOP`, `CONT`) to a replica's process.
fn signal(serving: &mut Serving, signal: &str) {
    let pid = serving.child().id().to_string();
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_frozen_past_its_lease_cannot_append_when_it_wakes() {
    let mock = MockLlm::start().await;
    script(&mock);
    let schema = Schema::new();
    let ws = workspace(&mock, &schema, "3s");
    let mut replicas = Replicas::start(&ws, &["a", "b"]);

    // A long answer trickles into replica a's run; a is frozen in the middle of it.
    let on_a = {
        let http = replicas.http.clone();
        let url = replicas.url(0, "/api/requests");
        tokio::spawn(async move {
            let body = json!({"agent": "streamer", "input": "stream please", "wait": true});
            // The connection outlives the freeze; whatever a answers does not matter here.
            let _ = http.post(url).json(&body).send().await;
        })
    };
    let id = poll(
        Duration::from_secs(60),
        "the run to stream on replica a",
        || async {
            let runs = replicas.runs_of(1, "streamer").await;
            let id = runs.first()?["requestId"].as_str()?.to_owned();
            (replicas.events(1, &id).await.len() >= 5).then_some(id)
        },
    )
    .await;
    let before =
        replicas.get(0, "/api/health").await["store"]["cluster"]["lease"]["token"].as_i64();
    assert!(before.is_some(), "replica a holds a lease while it runs");
    signal(replicas.servers[0].as_mut().unwrap(), "STOP");
    let frozen_at = replicas.events(1, &id).await.len();

    // Replica b takes the run over once a's lease expires, and finishes it.
    until(
        Duration::from_secs(120),
        "replica b to finish the run",
        || async { replicas.get(1, &format!("/api/requests/{id}")).await["status"] == "completed" },
    )
    .await;
    let finished = replicas.events(1, &id).await;
    assert_log(&id, &finished);
    let run = replicas.get(1, &format!("/api/requests/{id}")).await;
    assert_eq!(run["links"]["resumed"], 1, "{run}");
    assert!(finished.len() > frozen_at);

    // Replica a wakes: its stream goes on, but none of it reaches the log.
    signal(replicas.servers[0].as_mut().unwrap(), "CONT");
    let _ = on_a.await;
    let after = replicas.events(1, &id).await;
    assert_eq!(after, finished, "a woken replica appended nothing");
    assert_log(&id, &after);
    // It noticed: it registers a new lease (the old token is dead).
    until(
        Duration::from_secs(60),
        "replica a to hold a new lease",
        || async {
            let health = replicas.get(0, "/api/health").await;
            let token = health["store"]["cluster"]["lease"]["token"].as_i64();
            token.is_some() && token != before
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_frozen_past_their_leases_while_a_queue_drains_still_complete_every_run() {
    let mock = MockLlm::start().await;
    script(&mock);
    let schema = Schema::new();
    let ws = workspace(&mock, &schema, "2s");
    let mut replicas = Replicas::start(&ws, &["a", "b", "c"]);
    let ids = replicas.enqueue(240, "slow job").await;
    // Each replica in turn sleeps past its lease while it runs some of them: the others take
    // its runs over, or it takes them back itself when it wakes to find its lease gone.
    for replica in [0, 2, 1] {
        let before = completed_count(&replicas).await;
        until(
            Duration::from_secs(120),
            "a run to complete before the next freeze",
            || async {
                let now = completed_count(&replicas).await;
                now > before || now == ids.len()
            },
        )
        .await;
        let health = replicas.get(replica, "/api/health").await;
        assert!(
            health["store"]["cluster"]["lease"]["token"].is_i64(),
            "replica {replica} holds a lease: {health}"
        );
        signal(replicas.servers[replica].as_mut().unwrap(), "STOP");
        let other = (replica + 1) % 3;
        until(
            Duration::from_secs(60),
            "the frozen replica's lease to expire",
            || async {
                let health = replicas.get(other, "/api/health").await;
                health["store"]["cluster"]["replicas"].as_u64() == Some(2)
            },
        )
        .await;
        signal(replicas.servers[replica].as_mut().unwrap(), "CONT");
    }
    every_run_completes(&replicas, &ids).await;
    for id in &ids {
        assert_log(id, &replicas.events(1, id).await);
    }
    let resumed = resumed_count(&replicas, &ids).await;
    assert!(
        resumed >= 1,
        "the frozen replicas held runs that were taken over"
    );
}

/// How many runs of agent `worker` have completed, as replica 0 lists them.
async fn completed_count(replicas: &Replicas) -> usize {
    let page = replicas
        .get(0, "/api/requests?agent=worker&status=completed&limit=1000")
        .await;
    page["data"].as_array().map_or(0, Vec::len)
}
