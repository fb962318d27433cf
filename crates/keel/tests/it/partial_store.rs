//! An embedder's store implements what it stores: a store that keeps only runs and their
//! events (`RunLog`, with empty impls of the other parts of `RunStore`) runs an agent through
//! the SDK, and what it does not keep is refused with a typed error naming it — never a
//! panic, never a silent loss.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel::{
    ApprovalStore, Event, RequestId, RequestOptions, RunFilter, RunLog, RunRecord, RunStatus,
    Runtime, RuntimeError, SessionId, SessionStore, SkillCandidateStore, StoreError, TaskRequest,
    TaskStore,
};
use keel_test_support::{MockLlm, MockResponse};

use crate::common;

/// Runs and their events in memory; nothing else.
#[derive(Default)]
struct RunsOnly {
    runs: Mutex<BTreeMap<String, (RunRecord, Vec<Event>)>>,
}

#[async_trait]
impl RunLog for RunsOnly {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let mut runs = self.runs.lock().unwrap();
        runs.insert(run.request_id.to_string(), (run.clone(), Vec::new()));
        Ok(())
    }

    async fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut runs = self.runs.lock().unwrap();
        for event in events {
            let id = event.request_id.to_string();
            let (_, log) = runs
                .get_mut(&id)
                .ok_or_else(|| StoreError::NotFound(id.clone()))?;
            if event.seq != log.len() as u64 + 1 {
                return Err(StoreError::Invalid(format!(
                    "seq {} out of order",
                    event.seq
                )));
            }
            log.push(event.clone());
        }
        Ok(())
    }

    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let mut runs = self.runs.lock().unwrap();
        let id = run.request_id.to_string();
        let entry = runs.get_mut(&id).ok_or(StoreError::NotFound(id))?;
        entry.0 = run.clone();
        Ok(())
    }

    async fn get_run(&self, id: &RequestId) -> Result<Option<RunRecord>, StoreError> {
        let runs = self.runs.lock().unwrap();
        Ok(runs.get(id.as_str()).map(|(run, _)| run.clone()))
    }

    async fn list_runs(&self, _filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let runs = self.runs.lock().unwrap();
        Ok(runs.values().map(|(run, _)| run.clone()).collect())
    }

    async fn run_counts(&self) -> Result<Vec<(RunStatus, u64)>, StoreError> {
        Ok(Vec::new())
    }

    async fn started_by_minute(
        &self,
        _since: &str,
    ) -> Result<Vec<(String, RunStatus, u64)>, StoreError> {
        Ok(Vec::new())
    }

    async fn events(&self, id: &RequestId, after: u64) -> Result<Vec<Event>, StoreError> {
        let runs = self.runs.lock().unwrap();
        let (_, log) = runs
            .get(id.as_str())
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        Ok(log.iter().filter(|e| e.seq > after).cloned().collect())
    }

    async fn recover(&self) -> Result<Vec<RequestId>, StoreError> {
        Ok(Vec::new())
    }

    async fn claim(&self, id: &RequestId) -> Result<RunRecord, StoreError> {
        Err(StoreError::Invalid(format!(
            "run {id} cannot be claimed here"
        )))
    }

    async fn prune(&self, _before: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
}

impl SessionStore for RunsOnly {}
impl ApprovalStore for RunsOnly {}
impl TaskStore for RunsOnly {}
impl SkillCandidateStore for RunsOnly {}
impl keel_types::EvalStore for RunsOnly {}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_runs_alone_runs_agents_and_refuses_what_it_does_not_keep() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Hello from a partial store."]));
    let ws = common::workspace(&mock.base_url(), &["read_file"], "");
    let store = Arc::new(RunsOnly::default());
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .unwrap();

    // A run without a session needs runs and events only.
    let (response, _) = common::run(&runtime, "Hi").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        response.output.as_deref(),
        Some("Hello from a partial store.")
    );
    let events = common::stored(&runtime, &response).await;
    common::assert_well_formed(&events);
    assert_eq!(store.runs.lock().unwrap().len(), 1);

    // What it does not keep is refused, naming what.
    let task = runtime
        .tasks()
        .create(TaskRequest {
            tool: "read_file".into(),
            arguments: r#"{"path":"README.md"}"#.into(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(
            task,
            Err(RuntimeError::Store(StoreError::Unsupported("tasks")))
        ),
        "{task:?}"
    );
    let sessions = runtime.sessions().list(None).await;
    assert!(
        matches!(
            sessions,
            Err(RuntimeError::Store(StoreError::Unsupported("sessions")))
        ),
        "{sessions:?}"
    );

    // A run in a session fails, saying the store keeps no sessions; nothing panics.
    let refused = runtime
        .request(RequestOptions {
            input: "Hi again".into(),
            session_id: Some(SessionId::parse("chat").unwrap()),
            ..Default::default()
        })
        .await;
    let message = match refused {
        Err(error) => error.to_string(),
        Ok(handle) => format!("{:?}", handle.wait().await.unwrap().error),
    };
    assert!(message.contains("does not keep sessions"), "{message}");
}
