//! Three `keel serve` replicas on a PostgreSQL server of the test's own (a private cluster in
//! a temp folder, so restarting it disturbs no other test), restarted again and again under
//! about a hundred runs in flight: every run completes, each log dense with one terminal
//! event.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keel_test_support::{MockLlm, TempWorkspace, WorkspaceBuilder};
use serde_json::Value;

use crate::replicas::{Replicas, assert_log, script};

const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL cluster of the test's own, on a free port, stopped and removed on drop.
struct PrivatePg {
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivatePg {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // initdb refuses root: the cluster belongs to `postgres` when the test runs as root.
        if is_root() {
            chown_postgres(dir.path());
        }
        let data = dir.path().join("data");
        let initdb = as_postgres(Command::new(format!("{BIN}/initdb")))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(initdb.status.success(), "{initdb:?}");
        let pg = Self { dir, port };
        pg.ctl("start");
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn ctl(&self, action: &str) {
        let mut command = as_postgres(Command::new(format!("{BIN}/pg_ctl")));
        command.arg("-D").arg(self.data()).args(["-w", "-l"]);
        command.arg(self.dir.path().join("log"));
        match action {
            "start" => command.args(["-o"]).arg(format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
                self.port,
                self.dir.path().display()
            )),
            _ => command.args(["-m", "immediate"]),
        };
        let output = command.arg(action).output().unwrap();
        assert!(output.status.success(), "pg_ctl {action}: {output:?}");
    }

    /// Stops the server at once (connections drop mid-statement) and starts it again.
    fn restart(&self) {
        self.ctl("stop");
        self.ctl("start");
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let mut command = as_postgres(Command::new(format!("{BIN}/pg_ctl")));
        let _ = command
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn chown_postgres(path: &Path) {
    let status = Command::new("chown")
        .args(["-R", "postgres"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// `command`, run as user `postgres` when the test runs as root.
fn as_postgres(command: Command) -> Command {
    if !is_root() {
        return command;
    }
    let mut wrapped = Command::new("runuser");
    wrapped
        .args(["-u", "postgres", "--"])
        .arg(command.get_program());
    wrapped
}

fn workspace(mock: &MockLlm, url: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: worker, limits: {{ maxConcurrentRuns: 40 }}, \
             store: {{ kind: postgres, url: '{url}', leaseTtl: 6s }} }}"
        ))
        .openai_model_at("mock", &mock.base_url())
        .agent("worker", "{ model: mock }")
        .build()
}

/// The statuses of the runs `ids` as replica `replica` lists them; `None` while it cannot
/// answer (the database is down).
async fn statuses(replicas: &Replicas, replica: usize, ids: &[String]) -> Option<Vec<String>> {
    let url = replicas.url(replica, "/api/requests?agent=worker&limit=1000");
    let response = replicas.http.get(url).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let page: Value = response.json().await.ok()?;
    let runs = page["data"].as_array()?;
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        let run = runs.iter().find(|r| r["requestId"] == id.as_str())?;
        found.push(run["status"].as_str()?.to_owned());
    }
    Some(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_flight_through_database_restarts_all_complete_with_whole_logs() {
    let pg = PrivatePg::start();
    let mock = MockLlm::start().await;
    script(&mock);
    let ws = workspace(&mock, &pg.url());
    let replicas = Replicas::start(&ws, &["a", "b", "c"]);
    let mut ids = Vec::new();
    for round in 0..3 {
        // Each run streams its answer in 40 chunks: its appends are in flight all the while.
        let wave = replicas.enqueue(100, &format!("stream job {round}")).await;
        // Most of the wave running, then the database goes away under them.
        let started = Instant::now();
        loop {
            let running = statuses(&replicas, 0, &wave)
                .await
                .map_or(0, |s| s.iter().filter(|s| *s != "queued").count());
            if running >= 60 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the wave never ran"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        pg.restart();
        ids.extend(wave);
    }

    // Every run ends, and ends completed: none failed, none stuck.
    let mut progress_at = Instant::now();
    let mut done = 0;
    loop {
        if let Some(statuses) = statuses(&replicas, 1, &ids).await {
            let ended: Vec<(&String, &String)> = ids
                .iter()
                .zip(&statuses)
                .filter(|(_, s)| matches!(s.as_str(), "completed" | "failed" | "cancelled"))
                .collect();
            if let Some((id, status)) = ended.iter().find(|(_, s)| s.as_str() != "completed") {
                let events = replicas.events(1, id).await;
                panic!("run {id} ended {status}: {events:#?}");
            }
            if ended.len() == ids.len() {
                break;
            }
            if ended.len() > done {
                done = ended.len();
                progress_at = Instant::now();
            }
            let unfinished: Vec<String> = ids
                .iter()
                .zip(&statuses)
                .filter(|(_, s)| s.as_str() != "completed")
                .map(|(id, s)| format!("{id} {s}"))
                .collect();
            assert!(
                progress_at.elapsed() < Duration::from_secs(90),
                "no run completed for 90 s; {done} of {} did. Unfinished:\n{}",
                ids.len(),
                unfinished.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for id in &ids {
        let events = replicas.events(2, id).await;
        assert_log(id, &events);
        let run: Value = replicas
            .http
            .get(replicas.url(2, &format!("/api/requests/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            run["eventCount"].as_u64(),
            Some(events.len() as u64),
            "run {id}: its record counts the events stored: {run}"
        );
    }
}
