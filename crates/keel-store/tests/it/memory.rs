//! Memory records on both stores (contract tests): full-text recall per namespace, versions
//! that are closed rather than overwritten, merges that keep both provenances, expiry, an
//! approval that stores its candidate exactly once, import of an export, and an online backup
//! (SQLite; PostgreSQL refuses and names pg_dump).

use keel_types::{
    ApprovalRecord, ApprovalScope, ApprovalStatus, MemoryCandidate, MemoryFilter, MemoryKind,
    MemoryMerge, MemorySource, MemoryStatus, MemoryStore, MemoryUpdate, Provenance, RequestId,
    RunRecord, StoreError,
};

use crate::backends::Backend;

/// A memory candidate of `namespace` (also used by other contract tests).
pub(crate) fn candidate(namespace: &str, text: &str) -> MemoryCandidate {
    MemoryCandidate {
        namespace: namespace.into(),
        memory: "user-notes".into(),
        kind: MemoryKind::Preference,
        text: text.into(),
        tags: vec!["style".into()],
        provenance: Provenance {
            source: MemorySource::Tool,
            request_id: Some(RequestId::from("run_1")),
            agent: Some("assistant".into()),
            seq: Some(7),
            call_id: Some("call_1".into()),
            at: "2026-11-24T10:00:00.000Z".into(),
            approved_by: None,
        },
        expires_at: None,
    }
}

fn approval(id: &str, text: &str) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: id.into(),
        request_id: RequestId::from("run_1"),
        root_request_id: None,
        session_id: None,
        agent: "assistant".into(),
        tool: "remember".into(),
        arguments: serde_json::json!({"text": text}),
        call_id: None,
        asked_by: "Memory/user-notes".into(),
        ask_reason: Some("the write policy is `approve`".into()),
        status: ApprovalStatus::Pending,
        scope: ApprovalScope::Once,
        decided_by: None,
        decided_at: None,
        decision_reason: None,
        created_at: "2026-11-24T10:00:00.000Z".into(),
        memory: Some(Box::new(candidate("users/alice", text))),
        memory_record: None,
    }
}

fn ns(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

async fn recall_is_ranked_and_stays_inside_its_namespace(backend: &Backend) {
    let store = backend.store();
    let tea = store
        .store_memory(
            &candidate("users/alice", "Alice drinks green tea, no sugar"),
            "auto",
        )
        .await
        .unwrap();
    store
        .store_memory(
            &candidate("users/alice", "Alice prefers short answers"),
            "auto",
        )
        .await
        .unwrap();
    store
        .store_memory(
            &candidate("users/bob", "Bob drinks black tea with sugar"),
            "auto",
        )
        .await
        .unwrap();

    let hits = store
        .search_memory(&ns(&["users/alice"]), "What tea does she drink?", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "only Alice's tea record matches: {hits:?}");
    assert_eq!(hits[0].record.id, tea.id);
    assert!(hits[0].score > 0.0);
    assert_eq!(tea.provenance[0].approved_by.as_deref(), Some("auto"));

    let both = store
        .search_memory(&ns(&["users/alice", "users/bob"]), "tea sugar", 5)
        .await
        .unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(
        store.memory_namespaces().await.unwrap(),
        ["users/alice", "users/bob"]
    );
    // Quotes, operators and punctuation in the query are words, not FTS syntax.
    let odd = store
        .search_memory(&ns(&["users/alice"]), "\"tea\" AND (NEAR* -", 5)
        .await
        .unwrap();
    assert_eq!(odd.len(), 1);
    assert!(
        store
            .search_memory(&ns(&["users/carol"]), "tea", 5)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_update_keeps_history_and_a_merge_keeps_both_provenances(backend: &Backend) {
    let store = backend.store();
    let first = store
        .store_memory(&candidate("users/alice", "Alice drinks green tea"), "auto")
        .await
        .unwrap();
    let updated = store
        .update_memory(
            &first.id,
            &MemoryUpdate {
                text: Some("Alice drinks oolong tea".into()),
                ..MemoryUpdate::default()
            },
            "ana",
        )
        .await
        .unwrap();
    assert_eq!(
        (updated.id.as_str(), updated.version),
        (first.id.as_str(), 2)
    );
    let history = store.memory_history(&first.id).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].status, MemoryStatus::Superseded);
    assert_eq!(history[0].text, "Alice drinks green tea");
    assert!(history[0].valid_to.is_some());
    assert_eq!(history[1].status, MemoryStatus::Active);
    // Only the current version is found.
    let hits = store
        .search_memory(&ns(&["users/alice"]), "green", 5)
        .await
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");

    let mut other = candidate("users/alice", "alice drinks oolong tea.");
    other.provenance.request_id = Some(RequestId::from("run_2"));
    let duplicate = store.store_memory(&other, "ana").await.unwrap();
    let merged = store
        .merge_memory(
            &MemoryMerge {
                kept: first.id.clone(),
                dropped: duplicate.id.clone(),
                text: "Alice drinks oolong tea".into(),
                reason: "same text".into(),
            },
            "maintenance",
        )
        .await
        .unwrap();
    assert_eq!(merged.version, 3);
    assert_eq!(merged.merged_from, vec![duplicate.id.clone()]);
    let runs: Vec<_> = merged
        .provenance
        .iter()
        .filter_map(|p| p.request_id.as_ref().map(RequestId::as_str))
        .collect();
    assert_eq!(runs, ["run_1", "run_2"]);
    let gone = store.get_memory(&duplicate.id).await.unwrap().unwrap();
    assert_eq!(gone.status, MemoryStatus::Deleted);
    let active = store.list_memory(&MemoryFilter::default()).await.unwrap();
    assert_eq!(active.len(), 1);

    // A closed record cannot change any more.
    let error = store
        .delete_memory(&duplicate.id, "ana", None)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is deleted"), "{error}");
}

async fn expired_records_are_closed_and_no_longer_recalled(backend: &Backend) {
    let store = backend.store();
    let mut short = candidate("users/alice", "Alice is in Lisbon this week");
    short.expires_at = Some("2026-11-24T10:00:00.000Z".into());
    let short = store.store_memory(&short, "auto").await.unwrap();
    let long = store
        .store_memory(&candidate("users/alice", "Alice lives in Porto"), "auto")
        .await
        .unwrap();
    let expired = store
        .expire_memory("2026-11-24T10:00:00.001Z")
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, short.id);
    assert_eq!(expired[0].status, MemoryStatus::Expired);
    let hits = store
        .search_memory(&ns(&["users/alice"]), "Alice", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.id, long.id);
}

async fn approving_a_memory_approval_stores_the_record_once(backend: &Backend) {
    let store = backend.store();
    store
        .create_run(&RunRecord::new(
            RequestId::from("run_1"),
            None,
            "assistant",
            "hi",
        ))
        .await
        .unwrap();
    let asked = approval("apr_1", "Alice's team ships on Thursdays");
    store.create_approval(&asked).await.unwrap();
    let decided = store
        .decide_approval(
            &asked.approval_id,
            ApprovalStatus::Approved,
            ApprovalScope::Session,
            "ana",
            None,
        )
        .await
        .unwrap();
    assert_eq!(decided.scope, ApprovalScope::Once);
    let record_id = decided.memory_record.clone().expect("the stored record");
    let record = store.get_memory(&record_id).await.unwrap().unwrap();
    assert_eq!(record.provenance[0].approved_by.as_deref(), Some("ana"));
    // A second decision loses and stores nothing.
    let error = store
        .decide_approval(
            &asked.approval_id,
            ApprovalStatus::Approved,
            ApprovalScope::Once,
            "bo",
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)));
    assert_eq!(
        store
            .list_memory(&MemoryFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );

    // A denied candidate is never stored.
    let denied = approval("apr_denied", "something wrong");
    store.create_approval(&denied).await.unwrap();
    store
        .decide_approval(
            "apr_denied",
            ApprovalStatus::Denied,
            ApprovalScope::Once,
            "ana",
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .list_memory(&MemoryFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn an_export_imports_exactly_and_a_backup_is_a_working_store(backend: &Backend) {
    let store = backend.store();
    let first = store
        .store_memory(&candidate("users/alice", "Alice drinks green tea"), "auto")
        .await
        .unwrap();
    store
        .update_memory(
            &first.id,
            &MemoryUpdate {
                tags: Some(vec!["drinks".into()]),
                ..MemoryUpdate::default()
            },
            "ana",
        )
        .await
        .unwrap();
    store
        .store_memory(&candidate("users/bob", "Bob likes maps"), "auto")
        .await
        .unwrap();
    let all = MemoryFilter {
        all_versions: true,
        oldest_first: true,
        ..MemoryFilter::default()
    };
    let exported = store.list_memory(&all).await.unwrap();
    assert_eq!(exported.len(), 3);

    let other_backend = backend.another().await;
    let other = other_backend.store();
    assert_eq!(other.import_memory(&exported).await.unwrap(), 3);
    assert_eq!(other.list_memory(&all).await.unwrap(), exported);
    let hits = other
        .search_memory(&ns(&["users/alice"]), "tea", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.version, 2);
    // Importing again collides and changes nothing.
    let error = other.import_memory(&exported).await.unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    assert_eq!(other.list_memory(&all).await.unwrap().len(), 3);

    let Some(sqlite) = &backend.sqlite else {
        // A database server is backed up with its own tools, and keel says so.
        let error = store
            .backup(std::path::Path::new("x.db"))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("pg_dump"), "{error}");
        return;
    };
    let backup = sqlite.db_path().parent().unwrap().join("backups/keel.db");
    store.backup(&backup).await.unwrap();
    let error = store.backup(&backup).await.unwrap_err();
    assert!(error.to_string().contains("exists already"), "{error}");
    let restored_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(restored_dir.path().join(".keel")).unwrap();
    std::fs::copy(&backup, restored_dir.path().join(".keel/keel.db")).unwrap();
    let restored = keel_store::SqliteStore::open(restored_dir.path()).unwrap();
    assert_eq!(restored.list_memory(&all).await.unwrap(), exported);
}

async fn embeddings_rank_by_cosine_and_missing_ones_are_listed(backend: &Backend) {
    let store = backend.store();
    let dog = store
        .store_memory(&candidate("users/alice", "Alice has a dog"), "auto")
        .await
        .unwrap();
    let cat = store
        .store_memory(&candidate("users/alice", "Alice has a cat"), "auto")
        .await
        .unwrap();
    let missing = store
        .memory_without_embedding(&ns(&["users/alice"]), 10)
        .await
        .unwrap();
    assert_eq!(missing.len(), 2);
    store
        .set_memory_embedding(&dog.id, 1, &[1.0, 0.0, 0.0])
        .await
        .unwrap();
    store
        .set_memory_embedding(&cat.id, 1, &[0.0, 1.0, 0.0])
        .await
        .unwrap();
    let near = store
        .nearest_memory(&ns(&["users/alice"]), &[0.9, 0.1, 0.0], 5)
        .await
        .unwrap();
    assert_eq!(near[0].record.id, dog.id);
    assert!(near[0].similarity.unwrap() > near[1].similarity.unwrap());
    assert!(
        store
            .memory_without_embedding(&ns(&["users/alice"]), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_large_namespace_still_finds_its_own_record_when_others_rank_higher(backend: &Backend) {
    let store = backend.store();
    for i in 0..10 {
        store
            .store_memory(
                &candidate("users/ana", &format!("Ana note {i} alpha")),
                "auto",
            )
            .await
            .unwrap();
    }
    let own = store
        .store_memory(
            &candidate("users/ana", "Ana once drank a tea in the alpha garden"),
            "auto",
        )
        .await
        .unwrap();
    for i in 0..8 {
        store
            .store_memory(&candidate("users/bo", &format!("tea tea tea {i}")), "auto")
            .await
            .unwrap();
    }
    // Ana's namespace is most of the index and ranked without the filter first; Bo's records
    // rank higher for "tea", so the search asks the index again, filtered.
    let hits = store
        .search_memory(&ns(&["users/ana"]), "tea", 1)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].record.id, own.id);
    // The small namespace is filtered inside the index from the start.
    let hits = store
        .search_memory(&ns(&["users/bo"]), "tea", 3)
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h.record.namespace == "users/bo"));
}

crate::contract!(
    recall_is_ranked_and_stays_inside_its_namespace,
    an_update_keeps_history_and_a_merge_keeps_both_provenances,
    expired_records_are_closed_and_no_longer_recalled,
    approving_a_memory_approval_stores_the_record_once,
    an_export_imports_exactly_and_a_backup_is_a_working_store,
    embeddings_rank_by_cosine_and_missing_ones_are_listed,
    a_large_namespace_still_finds_its_own_record_when_others_rank_higher,
);
