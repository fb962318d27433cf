//! Long-term memory in whole runs, on real SQLite files and the mock model over a socket:
//! recall into the prompt (snapshot), namespaces from request metadata that keep two users
//! apart, the write policies (`auto`, `approve`, `reject`) behind `remember`, redaction,
//! versions, expiry, compaction, export and import, hybrid ranking with embeddings, and bad
//! input that stores nothing.

use std::collections::BTreeMap;

use keel::{
    ApprovalScope, Error, MaintenanceRequest, MemoryDraft, RequestOptions, RunFilter, RunResponse,
    RunStatus, Runtime, RuntimeError,
};
use keel::{EventPayload, MemoryFilter, MemoryKind, MemoryStatus, MemoryUpdate, WriteDecision};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};
use serde_json::json;

use crate::common::{self, stored};

/// A workspace with `user-notes` (`users/{metadata.user}`, policy `write`) read and written
/// by `assistant`, and an optional embeddings model on the same mock.
fn memory_workspace(mock: &MockLlm, write: &str, extra: &str) -> TempWorkspace {
    let model = |name: &str| {
        format!(
            "{{ provider: openai, baseUrl: \"{}\", model: {name}, timeout: 5s }}",
            mock.base_url()
        )
    };
    WorkspaceBuilder::new()
        .model("mock", &model(keel_test_support::OPENAI_MOCK_MODEL))
        .model("embedder", &model("mock-embeddings"))
        .agent(
            "assistant",
            "  model: mock\n  instructions: You are a test agent.\n  tools: []\n",
        )
        .runtime("{ defaultAgent: assistant }")
        .document(
            "Memory",
            "user-notes",
            &format!(
                "  namespace: \"users/{{metadata.user}}\"\n  readers: [assistant]\n  writers: [assistant]\n  write: {write}\n  recall: {{ topK: 3, maxChars: 400 }}\n  maxChars: 200\n{extra}"
            ),
        )
        .file(".env", "SERVICE_TOKEN=tok-4f9a8b7c6d5e\n")
        .build()
}

fn runtime(ws: &TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

fn user(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("user".to_owned(), name.to_owned())])
}

fn draft(text: &str) -> MemoryDraft {
    MemoryDraft {
        kind: MemoryKind::Preference,
        text: text.into(),
        tags: vec!["drinks".into()],
    }
}

async fn run_as(runtime: &Runtime, who: &str, input: &str) -> Result<RunResponse, Error> {
    let handle = runtime
        .request(RequestOptions {
            input: input.into(),
            metadata: user(who),
            ..Default::default()
        })
        .await?;
    Ok(handle.wait().await?)
}

/// The messages of the last model request as `role: content` lines.
fn transcript(mock: &MockLlm) -> Vec<String> {
    common::transcript(mock.last_request().unwrap().messages())
}

fn recalled(events: &[keel::Event]) -> (Vec<String>, Vec<String>, String) {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::MemoryRecallCompleted {
                namespaces,
                record_ids,
                mode,
                ..
            } => Some((namespaces.clone(), record_ids.clone(), mode.clone())),
            _ => None,
        })
        .expect("a runtime.memory.recall.completed event")
}

fn remember(text: &str) -> MockResponse {
    MockResponse::tool_calls([MockToolCall::new(
        "call_1",
        "remember",
        [json!({"text": text, "kind": "preference", "tags": ["drinks"]}).to_string()],
    )])
}

#[tokio::test]
async fn recall_puts_the_users_own_records_in_the_prompt_and_never_anothers() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    let tea = memory
        .add(
            "users/alice",
            draft("Alice drinks green tea without sugar."),
            "ana",
        )
        .await
        .unwrap();
    memory
        .add("users/alice", draft("Alice is allergic to peanuts."), "ana")
        .await
        .unwrap();
    memory
        .add(
            "users/bob",
            draft("Bob drinks black tea with lots of sugar."),
            "ana",
        )
        .await
        .unwrap();

    mock.push(MockResponse::text(["Green tea, no sugar."]));
    let response = run_as(&runtime, "alice", "Which tea should I order?")
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let prompt = transcript(&mock);
    let redacted: Vec<String> = prompt
        .iter()
        .map(|line| line.replace(&tea.id, "mem_TEA"))
        .collect();
    insta::assert_yaml_snapshot!("memory_prompt", redacted);
    assert!(
        !prompt.iter().any(|l| l.contains("Bob")),
        "Alice's run never sees Bob's records: {prompt:?}"
    );
    let events = stored(&runtime, &response).await;
    let (namespaces, ids, mode) = recalled(&events);
    assert_eq!(namespaces, ["users/alice"]);
    assert_eq!(ids, std::slice::from_ref(&tea.id));
    assert_eq!(mode, "fulltext");
    let sections: Vec<String> = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::PromptAssembled { sections, .. } => {
                Some(sections.iter().map(|s| s.name.clone()).collect())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(sections, ["instructions", "memory", "input", "tools"]);

    // Bob, asking the same, recalls only his own record.
    mock.push(MockResponse::text(["Black tea."]));
    let response = run_as(&runtime, "bob", "Which tea should I order?")
        .await
        .unwrap();
    let events = stored(&runtime, &response).await;
    let (_, ids, _) = recalled(&events);
    assert_eq!(ids.len(), 1);
    assert!(
        transcript(&mock)
            .iter()
            .any(|l| l.contains("Bob drinks black tea"))
    );
    assert!(!transcript(&mock).iter().any(|l| l.contains("Alice")));
}

#[tokio::test]
async fn a_request_without_the_metadata_its_namespace_needs_is_refused_and_nothing_runs() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    let error = runtime
        .request(RequestOptions {
            input: "Hello".into(),
            ..Default::default()
        })
        .await
        .map(|_| ())
        .unwrap_err();
    let Error::Runtime(RuntimeError::Memory(message)) = error else {
        panic!("expected a memory error, got {error:?}");
    };
    assert!(
        message.contains("`{metadata.user}` needs request metadata `user`"),
        "{message}"
    );
    assert!(
        runtime
            .runs()
            .list(&RunFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(mock.request_count(), 0);
}

#[tokio::test]
async fn remember_under_auto_stores_at_once_with_provenance_and_no_secret() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    mock.push(remember(
        "Alice's deploy token is tok-4f9a8b7c6d5e; she prefers tea.",
    ));
    mock.push(MockResponse::text(["Noted."]));
    let response = run_as(&runtime, "alice", "Remember that I like tea.")
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = stored(&runtime, &response).await;
    let (record_id, decision) = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::MemoryCandidateSubmitted {
                record_id,
                decision,
                call_id,
                ..
            } => {
                assert_eq!(call_id.as_deref(), Some("call_1"));
                Some((record_id.clone().unwrap(), *decision))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(decision, WriteDecision::Auto);
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::MemoryLifecycle { record_id: id, .. } if *id == record_id
    )));
    let record = runtime
        .memory()
        .service()
        .unwrap()
        .get(&record_id)
        .await
        .unwrap();
    assert_eq!(record.namespace, "users/alice");
    assert!(!record.text.contains("tok-4f9a8b7c6d5e"), "{}", record.text);
    assert!(record.text.contains("[REDACTED]"), "{}", record.text);
    let origin = &record.provenance[0];
    assert_eq!(origin.request_id.as_ref(), Some(&response.request_id));
    assert_eq!(origin.agent.as_deref(), Some("assistant"));
    assert_eq!(origin.call_id.as_deref(), Some("call_1"));
    // The source event: the call's start in the run's log.
    let start = events
        .iter()
        .find(|e| e.seq == origin.seq.unwrap())
        .unwrap();
    assert_eq!(start.payload.type_name(), "runtime.adapter.event");
    assert_eq!(origin.approved_by.as_deref(), Some("auto"));
}

#[tokio::test]
async fn remember_under_approve_does_not_wait_and_the_approval_makes_it_recallable() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "approve", "");
    let runtime = runtime(&ws);
    mock.push(remember("Alice prefers oolong tea."));
    mock.push(MockResponse::text(["I will remember once approved."]));
    let response = run_as(&runtime, "alice", "Remember my tea.").await.unwrap();
    // The answer did not wait for a person.
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = stored(&runtime, &response).await;
    let approval_id = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::MemoryApprovalRequested {
                approval_id, text, ..
            } => {
                assert_eq!(text, "Alice prefers oolong tea.");
                Some(approval_id.clone())
            }
            _ => None,
        })
        .unwrap();
    let pending = runtime.approvals().memory_candidates().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].arguments["text"], "Alice prefers oolong tea.");
    let memory = runtime.memory().service().unwrap();
    assert!(
        memory
            .search(Some("users/alice"), "oolong", 5)
            .await
            .unwrap()
            .is_empty()
    );

    // Approved through a second runtime on the same files (as another process would).
    let other = Runtime::builder().workspace(ws.path()).build().unwrap();
    let decided = other
        .approvals()
        .decide(&approval_id, true, ApprovalScope::Once, "ana", None)
        .await
        .unwrap();
    let stored_id = decided.memory_record.unwrap();
    let hits = memory
        .search(Some("users/alice"), "oolong", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.id, stored_id);
    assert_eq!(
        hits[0].record.provenance[0].approved_by.as_deref(),
        Some("ana")
    );
    assert!(
        runtime
            .approvals()
            .memory_candidates()
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn remember_under_reject_keeps_nothing_and_tells_the_model() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "reject", "");
    let runtime = runtime(&ws);
    mock.push(remember("Alice prefers oolong tea."));
    mock.push(MockResponse::text(["Understood."]));
    let response = run_as(&runtime, "alice", "Remember my tea.").await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    let events = stored(&runtime, &response).await;
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::MemoryCandidateSubmitted {
            decision: WriteDecision::Reject,
            reason: Some(_),
            ..
        }
    )));
    let told = transcript(&mock);
    assert!(
        told.iter().any(|l| l.contains("Not remembered")),
        "{told:?}"
    );
    let all = MemoryFilter {
        all_versions: true,
        ..MemoryFilter::default()
    };
    assert!(
        runtime
            .memory()
            .service()
            .unwrap()
            .list(&all)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        runtime
            .approvals()
            .memory_candidates()
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_error_and_nothing_is_stored() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    let too_long = "tea ".repeat(60);
    let error = memory
        .add("users/alice", draft(&too_long), "ana")
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("has 239 characters; Memory `user-notes` keeps at most 200"),
        "{error}"
    );
    let error = memory
        .add("teams/alice", draft("Team tea."), "ana")
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown namespace `teams/alice`"),
        "{error}"
    );
    assert!(
        error.to_string().contains("`users/{metadata.user}`"),
        "{error}"
    );
    let error = memory
        .add("users/alice/notes", draft("Nested."), "ana")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unknown namespace"), "{error}");

    // A model's oversized `remember` is refused to the model; the run goes on.
    mock.push(remember(&too_long));
    mock.push(MockResponse::text(["Too long, sorry."]));
    let response = run_as(&runtime, "alice", "Remember this.").await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    let all = MemoryFilter {
        all_versions: true,
        ..MemoryFilter::default()
    };
    assert!(memory.list(&all).await.unwrap().is_empty());
    let told = transcript(&mock);
    assert!(
        told.iter().any(|l| l.contains("keeps at most 200")),
        "{told:?}"
    );
}

#[tokio::test]
async fn updates_keep_history_and_maintenance_expires_by_ttl_as_a_recorded_run() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "  ttl: 1ms\n");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    let first = memory
        .add("users/alice", draft("Alice drinks green tea."), "ana")
        .await
        .unwrap();
    let updated = memory
        .update(
            &first.id,
            MemoryUpdate {
                text: Some("Alice drinks oolong tea.".into()),
                ..MemoryUpdate::default()
            },
            "bo",
        )
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    let history = memory.history(&first.id).await.unwrap();
    assert_eq!(
        history
            .iter()
            .map(|r| (r.text.as_str(), r.status))
            .collect::<Vec<_>>(),
        [
            ("Alice drinks green tea.", MemoryStatus::Superseded),
            ("Alice drinks oolong tea.", MemoryStatus::Active),
        ]
    );
    // Everything here expires after 1 ms; maintenance closes it and records a run.
    let (run_id, report) = runtime
        .memory()
        .maintain(&MaintenanceRequest::default(), Some("ana".into()))
        .await
        .unwrap();
    assert_eq!(report.expired.len(), 1);
    assert_eq!(
        memory.get(&first.id).await.unwrap().status,
        MemoryStatus::Expired
    );
    let events = runtime.runs().events(&run_id, 0).await.unwrap();
    let types: Vec<&str> = events.iter().map(|e| e.payload.type_name()).collect();
    assert_eq!(
        types,
        [
            "runtime.request.started",
            "runtime.memory.maintenance.started",
            "runtime.memory.lifecycle",
            "runtime.memory.maintenance.completed",
            "runtime.request.completed",
        ]
    );
}

#[tokio::test]
async fn compaction_merges_exact_and_near_duplicates_and_keeps_both_provenances() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    // Two runs remember the same thing in slightly different words, plus one exact copy.
    for (text, answer) in [
        ("Alice prefers oolong tea in the morning.", "ok"),
        ("alice prefers oolong tea in the morning", "ok"),
        ("Alice prefers oolong tea in the early morning.", "ok"),
    ] {
        mock.push(remember(text));
        mock.push(MockResponse::text([answer]));
        run_as(&runtime, "alice", "Remember.").await.unwrap();
    }
    let kept_apart = memory
        .add("users/alice", draft("Alice's cat is called Miso."), "ana")
        .await
        .unwrap();
    let (_, report) = runtime
        .memory()
        .maintain(&MaintenanceRequest::default(), None)
        .await
        .unwrap();
    assert_eq!(report.merged.len(), 2, "{report:?}");
    let active = memory.list(&MemoryFilter::default()).await.unwrap();
    assert_eq!(active.len(), 2, "{active:?}");
    let merged = active.iter().find(|r| r.id != kept_apart.id).unwrap();
    assert_eq!(
        merged.text,
        "Alice prefers oolong tea in the early morning."
    );
    assert_eq!(merged.merged_from.len(), 2);
    let runs: std::collections::BTreeSet<_> = merged
        .provenance
        .iter()
        .filter_map(|p| p.request_id.clone())
        .collect();
    assert_eq!(
        runs.len(),
        3,
        "the provenance of every merged record stays: {merged:?}"
    );
}

#[tokio::test]
async fn an_export_imports_into_a_fresh_workspace_exactly() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    let tea = memory
        .add("users/alice", draft("Alice drinks green tea."), "ana")
        .await
        .unwrap();
    memory
        .update(
            &tea.id,
            MemoryUpdate {
                tags: Some(vec!["tea".into(), "morning".into()]),
                ..MemoryUpdate::default()
            },
            "ana",
        )
        .await
        .unwrap();
    let gone = memory
        .add("users/bob", draft("Bob likes maps."), "ana")
        .await
        .unwrap();
    memory
        .delete(&gone.id, "ana", Some("asked to forget"))
        .await
        .unwrap();
    let exported = memory.export(None).await.unwrap();
    // Two versions of the tea record, and the deleted one (closed, not removed).
    assert_eq!(exported.lines().count(), 3);

    let fresh = memory_workspace(&mock, "auto", "");
    let fresh_runtime = Runtime::builder().workspace(fresh.path()).build().unwrap();
    let fresh_memory = fresh_runtime.memory().service().unwrap();
    assert_eq!(fresh_memory.import(&exported).await.unwrap(), 3);
    assert_eq!(fresh_memory.export(None).await.unwrap(), exported);
    let hits = fresh_memory
        .search(Some("users/alice"), "tea", 5)
        .await
        .unwrap();
    assert_eq!(hits[0].record.version, 2);

    // A broken line names itself and imports nothing.
    let other = memory_workspace(&mock, "auto", "");
    let other_runtime = Runtime::builder().workspace(other.path()).build().unwrap();
    let broken = format!("{}\n{{\"id\": 1}}\n", exported.lines().next().unwrap());
    let error = other_runtime
        .memory()
        .service()
        .unwrap()
        .import(&broken)
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with("line 2: not a memory record"),
        "{error}"
    );
    assert_eq!(
        other_runtime
            .memory()
            .service()
            .unwrap()
            .export(None)
            .await
            .unwrap(),
        ""
    );
}

#[tokio::test]
async fn hybrid_recall_finds_by_meaning_what_full_text_misses() {
    let mock = MockLlm::start().await;
    mock.embedding_synonym("puppy", "dog");
    let ws = memory_workspace(&mock, "auto", "  embeddings: { model: embedder }\n");
    let runtime = runtime(&ws);
    let memory = runtime.memory().service().unwrap();
    let dog = memory
        .add(
            "users/alice",
            draft("Alice walks her dog Rex every evening."),
            "ana",
        )
        .await
        .unwrap();
    memory
        .add("users/alice", draft("Alice drinks green tea."), "ana")
        .await
        .unwrap();
    // Full text alone finds nothing for "puppy".
    let plain = memory
        .search(Some("users/alice"), "puppy", 5)
        .await
        .unwrap();
    assert!(
        plain.iter().all(|h| h.text_score.is_none()),
        "no record has the word: {plain:?}"
    );

    mock.push(MockResponse::text(["Rex!"]));
    let response = run_as(&runtime, "alice", "What is my puppy called?")
        .await
        .unwrap();
    let events = stored(&runtime, &response).await;
    let (_, ids, mode) = recalled(&events);
    assert_eq!(mode, "hybrid");
    assert_eq!(ids.first(), Some(&dog.id), "{ids:?}");
    assert!(mock.embedding_requests() >= 2);
    let prompt = transcript(&mock);
    assert!(prompt.iter().any(|l| l.contains("dog Rex")), "{prompt:?}");
}

/// The extraction run of `parent`, once it has ended.
async fn extraction_run(runtime: &Runtime, parent: &keel::RequestId) -> keel::RunRecord {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let runs = runtime.runs().list(&RunFilter::default()).await.unwrap();
        if let Some(run) = runs
            .into_iter()
            .find(|r| r.links.parent_id.as_ref() == Some(parent) && r.status.is_terminal())
        {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no extraction run ended for {parent}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn post_run_extraction_submits_candidates_after_the_answer_as_a_run_of_its_own() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(
        &mock,
        "auto",
        "  extraction: { model: mock, maxCandidates: 2 }\n",
    );
    let runtime = runtime(&ws);
    mock.push(MockResponse::text(["Noted, no sugar."]));
    mock.push(MockResponse::text([json!({"memories": [
        {"text": "Alice takes her tea without sugar.", "kind": "preference", "tags": ["tea"]},
        {"text": "Alice asked about tea.", "kind": "episode"},
        {"text": "A third one, over the limit.", "kind": "fact"}
    ]})
    .to_string()]));
    let response = run_as(&runtime, "alice", "I take my tea without sugar.")
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    assert_eq!(response.output.as_deref(), Some("Noted, no sugar."));

    let extraction = extraction_run(&runtime, &response.request_id).await;
    assert_eq!(extraction.status, RunStatus::Completed, "{extraction:?}");
    assert_eq!(extraction.agent, "memory");
    let events = runtime
        .runs()
        .events(&extraction.request_id, 0)
        .await
        .unwrap();
    let submitted = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::MemoryCandidateSubmitted { .. }))
        .count();
    assert_eq!(submitted, 2, "maxCandidates caps what is taken");
    let records = runtime
        .memory()
        .service()
        .unwrap()
        .list(&MemoryFilter::default())
        .await
        .unwrap();
    assert_eq!(records.len(), 2);
    for record in &records {
        let origin = &record.provenance[0];
        assert_eq!(origin.source, keel::MemorySource::Extraction);
        assert_eq!(origin.request_id.as_ref(), Some(&response.request_id));
        assert_eq!(record.namespace, "users/alice");
    }
    // The extraction model saw the conversation.
    let asked = transcript(&mock);
    assert!(
        asked
            .iter()
            .any(|l| l.contains("I take my tea without sugar.") && l.contains("Noted, no sugar.")),
        "{asked:?}"
    );
}

#[tokio::test]
async fn an_extraction_answer_that_is_not_the_json_asked_for_fails_its_run_and_stores_nothing() {
    let mock = MockLlm::start().await;
    let ws = memory_workspace(&mock, "auto", "  extraction: { model: mock }\n");
    let runtime = runtime(&ws);
    mock.push(MockResponse::text(["Noted."]));
    mock.push(MockResponse::text(["Sure! Alice likes tea."]));
    let response = run_as(&runtime, "alice", "I like tea.").await.unwrap();
    assert_eq!(response.status, RunStatus::Completed);
    let extraction = extraction_run(&runtime, &response.request_id).await;
    assert_eq!(extraction.status, RunStatus::Failed);
    let message = extraction.error.unwrap().message;
    assert!(message.contains("not JSON of the form"), "{message}");
    let all = MemoryFilter {
        all_versions: true,
        ..MemoryFilter::default()
    };
    assert!(
        runtime
            .memory()
            .service()
            .unwrap()
            .list(&all)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn recall_falls_back_to_full_text_when_the_embeddings_model_fails() {
    let mock = MockLlm::start().await;
    // Nothing listens on the embeddings model's port: every embeddings call fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let ws = WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: {}, timeout: 5s }}",
                mock.base_url(),
                keel_test_support::OPENAI_MOCK_MODEL
            ),
        )
        .model(
            "embedder",
            &format!("{{ provider: openai, baseUrl: \"{dead}\", model: e, timeout: 2s }}"),
        )
        .agent("assistant", "  model: mock\n  instructions: Test.\n  tools: []\n")
        .runtime("{ defaultAgent: assistant }")
        .document(
            "Memory",
            "user-notes",
            "  namespace: \"users/{metadata.user}\"\n  readers: [assistant]\n  writers: [assistant]\n  embeddings: { model: embedder }\n",
        )
        .build();
    let runtime = runtime(&ws);
    let tea = runtime
        .memory()
        .service()
        .unwrap()
        .add("users/alice", draft("Alice drinks green tea."), "ana")
        .await
        .unwrap();
    mock.push(MockResponse::text(["Green tea."]));
    let response = run_as(&runtime, "alice", "Which tea do I drink?")
        .await
        .unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = stored(&runtime, &response).await;
    let (_, ids, _) = recalled(&events);
    assert_eq!(ids, std::slice::from_ref(&tea.id));
}
