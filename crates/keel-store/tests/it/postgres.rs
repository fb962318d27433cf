//! What only the PostgreSQL store does: leases and fencing, takeover, the queue claimed with
//! `FOR UPDATE SKIP LOCKED`, and signals between processes (LISTEN/NOTIFY). Each test works
//! in a schema of its own in the local database, dropped afterwards.

use keel_types::RunLog;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_store::PgStore;
use keel_types::{Cluster, RequestId, RunStatus, Signal, SignalSink, StoreError};
use serde_json::json;

use crate::backends::{Backend, database_url, pg_options};
use crate::{completed, delta, record, started, stored_seqs};

/// Makes a lease expire now, as a process frozen past its lease would find it.
fn expire(schema: &str, token: i64) {
    let output = std::process::Command::new("psql")
        .arg(database_url())
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c"])
        .arg(format!(
            "UPDATE {schema}.leases SET expires_at = clock_timestamp() - interval '1 second' \
             WHERE token = {token}"
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
}

fn schema_of(backend: &Backend) -> String {
    backend.schema_name().to_owned()
}

async fn second(backend: &Backend) -> PgStore {
    PgStore::connect(pg_options(&schema_of(backend)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_lost_its_lease_cannot_append_and_the_taker_continues_the_log() {
    let backend = Backend::postgres().await;
    let first = backend.postgres.clone().unwrap();
    first
        .create_run(&record("run_1", "a", RunStatus::Running))
        .await
        .unwrap();
    first.append(&[started("run_1", 1)]).await.unwrap();
    let old = first.lease().await.unwrap().token;

    // Frozen past its lease: the next append is refused before anyone took the run.
    expire(&schema_of(&backend), old);
    let refused = first.append(&[delta("run_1", 2)]).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");

    // Another process takes the run over and continues its log.
    let taker = second(&backend).await;
    assert_eq!(taker.recover().await.unwrap(), [RequestId::from("run_1")]);
    let claimed = taker.claim(&RequestId::from("run_1")).await.unwrap();
    assert_eq!(claimed.status, RunStatus::Running);
    assert_eq!(claimed.links.resumed, 1);
    taker.append(&[delta("run_1", 2)]).await.unwrap();

    // The first process registers a new lease, but the run is no longer its own.
    let renewed = first.lease().await.unwrap();
    assert_ne!(renewed.token, old);
    let refused = first.append(&[delta("run_1", 3)]).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    let mut stale = claimed.clone();
    stale.status = RunStatus::Failed;
    let refused = first.update_run(&stale).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");

    let seqs: Vec<u64> = taker
        .events(&RequestId::from("run_1"), 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2], "one history, written by the owner only");
    assert_eq!(taker.status().await.unwrap().taken_over, 1);
}

/// A `psql` session holding the row lock of one run until it is dropped.
struct RowLock {
    psql: std::process::Child,
    /// The session's backend, whose lock others wait on.
    pid: String,
}

impl RowLock {
    /// Locks the row of run `id` (a `LIKE` pattern: every run it matches).
    fn take(schema: &str, id: &str) -> Self {
        use std::io::{BufRead, Write};
        let mut psql = std::process::Command::new("psql")
            .arg(database_url())
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-A", "-t"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = psql.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "BEGIN; SELECT count(*) > 0 FROM (SELECT 1 FROM {schema}.runs \
             WHERE request_id LIKE '{id}' FOR UPDATE) AS locked; SELECT pg_backend_pid();"
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut lines = std::io::BufReader::new(psql.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "t", "the rows are locked");
        let pid = lines.next().unwrap().unwrap();
        Self { psql, pid }
    }

    /// Waits until another session waits on this lock.
    async fn wait_for_a_waiter(&self) {
        self.wait_for_waiters(1).await;
    }

    /// Waits until `n` other sessions wait on this lock.
    async fn wait_for_waiters(&self, n: usize) {
        let started = std::time::Instant::now();
        loop {
            let output = std::process::Command::new("psql")
                .arg(database_url())
                .args(["-A", "-t", "-c"])
                .arg(format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE {} = ANY(pg_blocking_pids(pid))",
                    self.pid
                ))
                .output()
                .unwrap();
            let waiting: usize = String::from_utf8_lossy(&output.stdout)
                .trim()
                .parse()
                .unwrap_or(0);
            if waiting >= n {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "nothing waited on the lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for RowLock {
    fn drop(&mut self) {
        // Closing its input ends the session, which rolls back and frees the row.
        drop(self.psql.stdin.take());
        let _ = self.psql.wait();
    }
}

/// Polls `future` once (an append: it is queued for the writer by then).
fn send(future: &mut std::pin::Pin<Box<impl std::future::Future>>) {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        future.as_mut().poll(&mut cx).is_pending(),
        "the writer is busy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_queued_across_a_new_lease_are_each_judged_by_their_own_token() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    let schema = schema_of(&backend);
    // Runs whose appends block the store's writers: each run's appends go to one of its
    // group-commit tasks, and eight runs reach both.
    let blockers: Vec<String> = (0..8).map(|i| format!("blk_{i}")).collect();
    for id in blockers.iter().map(String::as_str).chain(["run_1"]) {
        store
            .create_run(&record(id, "a", RunStatus::Running))
            .await
            .unwrap();
    }
    let old = store.lease().await.unwrap().token;

    // Every writer is stuck in a statement on a locked run while more appends queue behind
    // them.
    let lock = RowLock::take(&schema, "blk_%");
    let blocked: Vec<_> = blockers
        .iter()
        .map(|id| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.append(&[started(&id, 1)]).await })
        })
        .collect();
    lock.wait_for_waiters(2).await;
    // Sent under the old token, which then expires.
    let stale_events = [started("run_1", 1)];
    let mut stale = Box::pin(store.append(&stale_events));
    send(&mut stale);
    expire(&schema, old);
    assert!(matches!(
        store.heartbeat().await,
        Err(StoreError::Fenced(_))
    ));
    // A run created under the new lease, whose first append waits behind the stale one.
    store
        .create_run(&record("run_2", "a", RunStatus::Running))
        .await
        .unwrap();
    assert_ne!(store.lease().await.unwrap().token, old);
    let fresh_events = [started("run_2", 1)];
    let mut fresh = Box::pin(store.append(&fresh_events));
    send(&mut fresh);
    drop(lock);

    // The statements that waited began under the live lease, so they may land; either way
    // the writers go on.
    for blocked in blocked {
        let _ = blocked.await.unwrap();
    }
    let refused = stale.await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    fresh.await.unwrap();
    store.append(&[delta("run_2", 2)]).await.unwrap();
    for (id, seqs) in [("run_1", vec![]), ("run_2", vec![1, 2])] {
        let stored = stored_seqs(&store, id).await;
        assert_eq!(stored, seqs, "{id}: only what its owner's live lease wrote");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lease_expires_as_it_ends_keeps_a_log_and_record_that_agree() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    let schema = schema_of(&backend);
    let mut run = record("run_1", "a", RunStatus::Running);
    store
        .create_run_with(&run, &[started("run_1", 1), delta("run_1", 2)])
        .await
        .unwrap();
    let token = store.lease().await.unwrap().token;

    // The run's end waits on its row while the lease expires.
    let lock = RowLock::take(&schema, "run_1");
    run.status = RunStatus::Completed;
    run.output = Some("done".into());
    run.event_count = 3;
    let ending = tokio::spawn({
        let (store, run) = (store.clone(), run.clone());
        async move {
            store
                .append_and_update(&[completed("run_1", 3)], &run)
                .await
        }
    });
    lock.wait_for_a_waiter().await;
    expire(&schema, token);
    drop(lock);
    let ended = ending.await.unwrap();

    // Either the end was stored whole, or not at all: never a log that ended beside a
    // record of a run still going, which no process could take over and finish.
    let seqs = stored_seqs(&store, "run_1").await;
    let stored = store.get_run(&run.request_id).await.unwrap().unwrap();
    match ended {
        Ok(()) => {
            assert_eq!(seqs, [1, 2, 3]);
            assert_eq!(stored, run);
        }
        Err(error) => {
            assert!(matches!(error, StoreError::Fenced(_)), "{error}");
            assert_eq!(seqs, [1, 2]);
            assert_eq!(stored.status, RunStatus::Running);
        }
    }
    let taker = second(&backend).await;
    let taken = taker.recover().await.unwrap();
    assert_eq!(taken.is_empty(), stored.status == RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_ran_under_a_lost_lease_stays_refused_when_its_process_takes_the_run_back() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    let mut run = record("run_1", "a", RunStatus::Running);
    store
        .create_run_with(&run, &[started("run_1", 1)])
        .await
        .unwrap();
    let old = store.lease().await.unwrap().token;
    expire(&schema_of(&backend), old);

    // The process finds its lease lost, registers a new one and takes its own run back.
    assert!(matches!(
        store.heartbeat().await,
        Err(StoreError::Fenced(_))
    ));
    assert_eq!(store.recover().await.unwrap(), [RequestId::from("run_1")]);
    assert_ne!(store.lease().await.unwrap().token, old);

    // What still runs of the run under the old lease cannot write it…
    let refused = store.append(&[delta("run_1", 2)]).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    run.status = RunStatus::Failed;
    let refused = store.update_run(&run).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    let stored = store.get_run(&run.request_id).await.unwrap().unwrap();
    assert_eq!(
        stored.status,
        RunStatus::Interrupted,
        "reserved for its resume"
    );

    // …and the resume that claims it does.
    let claimed = store.claim(&RequestId::from("run_1")).await.unwrap();
    assert_eq!(claimed.links.resumed, 1);
    store.append(&[delta("run_1", 2)]).await.unwrap();
    let mut ended = claimed.clone();
    ended.status = RunStatus::Completed;
    store
        .append_and_update(&[completed("run_1", 3)], &ended)
        .await
        .unwrap();
    let stored = store.get_run(&run.request_id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(
        stored_seqs(&store, "run_1").await,
        [1, 2, 3],
        "one history, written by the claimed run only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_claimed_exactly_once_by_competing_processes() {
    let backend = Backend::postgres().await;
    let one = backend.postgres.clone().unwrap();
    let two = second(&backend).await;
    for i in 0..40 {
        let mut run = record(&format!("run_{i:02}"), "a", RunStatus::Queued);
        run.started_at = format!("2026-11-25T12:00:{i:02}.000Z");
        one.enqueue(&run, &json!({"n": i})).await.unwrap();
    }
    assert_eq!(one.status().await.unwrap().queue_depth, 40);
    let claim = |store: PgStore| async move {
        let mut mine = Vec::new();
        loop {
            let batch = store.claim_queued(3).await.unwrap();
            if batch.is_empty() {
                return mine;
            }
            mine.extend(batch);
        }
    };
    let (a, b) = tokio::join!(claim(one.clone()), claim(two.clone()));
    let ids: Vec<&str> = a
        .iter()
        .chain(&b)
        .map(|c| c.run.request_id.as_str())
        .collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 40, "every queued run claimed");
    assert_eq!(unique.len(), 40, "no run claimed twice");
    assert!(
        a.iter()
            .chain(&b)
            .all(|c| c.run.status == RunStatus::Running)
    );
    for claimed in a.iter().chain(&b) {
        let n: u64 = claimed.run.request_id.as_str()[4..].parse().unwrap();
        assert_eq!(claimed.request["n"], n, "the request queued with the run");
    }
    assert_eq!(one.status().await.unwrap().queue_depth, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_run_interrupted_before_its_first_event_goes_back_to_the_queue() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    store
        .enqueue(
            &record("run_e", "a", RunStatus::Queued),
            &json!({"params": {}}),
        )
        .await
        .unwrap();
    let claimed = store.claim_queued(1).await.unwrap();
    assert_eq!(claimed.len(), 1);
    // Its first append failed (the database went away) and the run settled as interrupted
    // under the claimer's own lease, which is alive: there is no log to resume.
    let mut interrupted = claimed[0].run.clone();
    interrupted.status = RunStatus::Interrupted;
    store.update_run(&interrupted).await.unwrap();
    assert!(
        store.recover().await.unwrap().is_empty(),
        "an empty log is not taken to be resumed"
    );
    let run = store
        .get_run(&RequestId::from("run_e"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status, RunStatus::Queued);
    let again = store.claim_queued(1).await.unwrap();
    assert_eq!(again[0].run.request_id.as_str(), "run_e");
    assert_eq!(again[0].request, json!({"params": {}}), "its options kept");
    // A run interrupted with events in its log is still the claimer's to resume.
    store.append(&[started("run_e", 1)]).await.unwrap();
    let mut interrupted = again[0].run.clone();
    interrupted.status = RunStatus::Interrupted;
    store.update_run(&interrupted).await.unwrap();
    assert_eq!(store.recover().await.unwrap(), [RequestId::from("run_e")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_answer_was_lost_goes_back_to_the_queue() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    for id in ["run_kept", "run_lost"] {
        store
            .enqueue(&record(id, "a", RunStatus::Queued), &json!({}))
            .await
            .unwrap();
    }
    let kept = store.claim_queued(1).await.unwrap();
    assert_eq!(kept[0].run.request_id.as_str(), "run_kept");
    // The second claim commits, but its answer is lost with the connection: the run is
    // ours in the database and no launch here knows it.
    let token = store.lease().await.unwrap().token;
    let output = std::process::Command::new("psql")
        .arg(database_url())
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c"])
        .arg(format!(
            "UPDATE {}.runs SET status = 'running', owner_token = {token} \
             WHERE request_id = 'run_lost'",
            schema_of(&backend)
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(store.recover().await.unwrap().is_empty());
    let status = |id: &'static str| {
        let store = store.clone();
        async move {
            let run = store.get_run(&RequestId::from(id)).await.unwrap().unwrap();
            run.status
        }
    };
    assert_eq!(status("run_lost").await, RunStatus::Queued);
    // The claim it holds stays running: its launch has it.
    assert_eq!(status("run_kept").await, RunStatus::Running);
    let again = store.claim_queued(1).await.unwrap();
    assert_eq!(again[0].run.request_id.as_str(), "run_lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_run_that_never_started_goes_back_to_the_queue() {
    let backend = Backend::postgres().await;
    let claimer = backend.postgres.clone().unwrap();
    claimer
        .enqueue(&record("run_q", "a", RunStatus::Queued), &json!({}))
        .await
        .unwrap();
    let claimed = claimer.claim_queued(1).await.unwrap();
    assert_eq!(claimed.len(), 1);
    // The claimer dies before the run stores an event.
    let token = claimer.lease().await.unwrap().token;
    expire(&schema_of(&backend), token);
    let other = second(&backend).await;
    assert!(
        other.recover().await.unwrap().is_empty(),
        "nothing to resume"
    );
    let run = other
        .get_run(&RequestId::from("run_q"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.status, RunStatus::Queued);
    // The claimer wakes and records the end it reached: refused, the run is the queue's.
    let mut stale = claimed[0].run.clone();
    stale.status = RunStatus::Completed;
    let refused = claimer.update_run(&stale).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    let again = other.claim_queued(1).await.unwrap();
    assert_eq!(again[0].run.request_id.as_str(), "run_q");
    // Cancelling a queued run ends it without starting it.
    other
        .enqueue(&record("run_c", "a", RunStatus::Queued), &json!({}))
        .await
        .unwrap();
    assert!(
        other
            .cancel_queued(&RequestId::from("run_c"))
            .await
            .unwrap()
    );
    assert!(
        !other
            .cancel_queued(&RequestId::from("run_c"))
            .await
            .unwrap()
    );
    let cancelled = other
        .get_run(&RequestId::from("run_c"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
}

/// Collects signals.
#[derive(Default)]
struct Inbox {
    signals: Mutex<Vec<Signal>>,
    wake: tokio::sync::Notify,
}

impl SignalSink for Inbox {
    fn signal(&self, signal: &Signal) {
        self.signals.lock().unwrap().push(signal.clone());
        self.wake.notify_waiters();
    }
}

impl Inbox {
    async fn wait_for(&self, wanted: &Signal) {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let woken = self.wake.notified();
                if self.signals.lock().unwrap().contains(wanted) {
                    return;
                }
                woken.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {wanted:?} within 30 s"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_reach_other_processes() {
    let backend = Backend::postgres().await;
    let listener = backend.postgres.clone().unwrap();
    let inbox = Arc::new(Inbox::default());
    listener.listen(inbox.clone());
    let sender = second(&backend).await;
    // The listener connects in the background: publish until it hears one.
    tokio::time::timeout(Duration::from_secs(30), async {
        while inbox.signals.lock().unwrap().is_empty() {
            sender.publish(&Signal::Queued).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    let id = RequestId::from("run_s");
    sender.publish(&Signal::Cancel(id.clone())).await.unwrap();
    inbox.wait_for(&Signal::Cancel(id.clone())).await;
    // Appends announce themselves as they commit.
    sender
        .create_run(&record("run_s", "a", RunStatus::Running))
        .await
        .unwrap();
    sender
        .append(&[started("run_s", 1), delta("run_s", 2)])
        .await
        .unwrap();
    inbox.wait_for(&Signal::Appended(id, 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_kept_in_the_database_round_trip_in_chunks_and_check_their_hash() {
    use keel_types::ArtifactStore;
    let backend = Backend::postgres().await;
    let artifacts = keel_store::PgArtifacts::new(backend.postgres.clone().unwrap());
    // Three chunks of at most 1 MiB.
    let content: Vec<u8> = (0..(2 * 1024 * 1024 + 17))
        .map(|i| (i % 251) as u8)
        .collect();
    let stored = artifacts
        .put(
            &RequestId::from("run_a"),
            "shell output (call_1)",
            "text/plain",
            &content,
        )
        .await
        .unwrap();
    assert_eq!(stored.bytes, content.len() as u64);
    // Another replica reads it.
    let other = keel_store::PgArtifacts::new(second(&backend).await);
    let (record, read) = other.get(&stored.uri).await.unwrap().unwrap();
    assert_eq!(record, stored);
    assert_eq!(read, content);
    assert!(
        other
            .get("keel://artifacts/art_missing")
            .await
            .unwrap()
            .is_none()
    );
    let refused = other.get("file:///etc/passwd").await.unwrap_err();
    assert!(matches!(refused, StoreError::Invalid(_)), "{refused}");
}

/// Run `id`'s `owner_token` column, as psql shows it (empty when NULL).
fn owner_token(schema: &str, id: &str) -> String {
    let output = std::process::Command::new("psql")
        .arg(database_url())
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-At", "-c"])
        .arg(format!(
            "SELECT owner_token FROM {schema}.runs WHERE request_id = '{id}'"
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ended_gives_up_its_owner_token_and_its_record_is_final() {
    let backend = Backend::postgres().await;
    let store = backend.postgres.clone().unwrap();
    let schema = schema_of(&backend);
    // Ended with its last events (the agent loop), and by its record alone (a workflow).
    let mut run = record("run_1", "a", RunStatus::Running);
    store
        .create_run_with(&run, &[started("run_1", 1)])
        .await
        .unwrap();
    let token = store.lease().await.unwrap().token;
    assert_eq!(owner_token(&schema, "run_1"), token.to_string());
    run.status = RunStatus::Completed;
    run.event_count = 2;
    store
        .append_and_update(&[completed("run_1", 2)], &run)
        .await
        .unwrap();
    assert_eq!(
        owner_token(&schema, "run_1"),
        "",
        "an ended run has no owner"
    );
    let mut other = record("run_2", "a", RunStatus::Running);
    store
        .create_run_with(&other, &[started("run_2", 1)])
        .await
        .unwrap();
    other.status = RunStatus::Failed;
    store.update_run(&other).await.unwrap();
    assert_eq!(owner_token(&schema, "run_2"), "");
    // A waiting run keeps its owner.
    let mut waiting = record("run_3", "a", RunStatus::Running);
    store
        .create_run_with(&waiting, &[started("run_3", 1)])
        .await
        .unwrap();
    waiting.status = RunStatus::WaitingApproval;
    store.update_run(&waiting).await.unwrap();
    assert_eq!(owner_token(&schema, "run_3"), token.to_string());

    // A process that still holds a run another process finished cannot write it, owner or
    // not: the first process lost its lease while running run_4, the taker ended it.
    let stale = record("run_4", "a", RunStatus::Running);
    store
        .create_run_with(&stale, &[started("run_4", 1)])
        .await
        .unwrap();
    expire(&schema, token);
    let taker = second(&backend).await;
    taker.recover().await.unwrap();
    let mut taken = taker.claim(&RequestId::from("run_4")).await.unwrap();
    taken.status = RunStatus::Completed;
    taken.event_count = 2;
    taker
        .append_and_update(&[completed("run_4", 2)], &taken)
        .await
        .unwrap();
    assert_eq!(owner_token(&schema, "run_4"), "");
    let mut late = stale.clone();
    late.status = RunStatus::Failed;
    let refused = store.update_run(&late).await.unwrap_err();
    assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
    let stored = taker.get_run(&late.request_id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_on_a_new_schema_all_create_and_migrate_it() {
    let schema = crate::backends::fresh_schema();
    let stores: Vec<PgStore> = (0..12)
        .map(|_| PgStore::lazy(pg_options(&schema)).unwrap())
        .collect();
    let starts = stores.iter().map(|store| {
        let store = store.clone();
        tokio::spawn(async move { store.get_run(&RequestId::from("none")).await })
    });
    let mut failures = Vec::new();
    for start in starts.collect::<Vec<_>>() {
        if let Err(error) = start.await.unwrap() {
            failures.push(error.to_string());
        }
    }
    let _ = stores[0].drop_schema().await;
    assert!(
        failures.is_empty(),
        "replicas failed to start: {failures:?}"
    );
}
