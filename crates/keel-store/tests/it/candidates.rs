//! Skill candidates on both stores (contract tests): stored, listed by status, decided exactly
//! once, kept across a reopen.

use keel_types::{CandidateStatus, RequestId, SkillCandidate, StoreError};

use crate::backends::Backend;

/// A pending skill candidate (also used by other contract tests).
pub(crate) fn candidate(id: &str, name: &str, created_at: &str) -> SkillCandidate {
    SkillCandidate {
        candidate_id: id.into(),
        name: name.into(),
        description: "What to check before a release.".into(),
        instructions: "1. Run the tests.\n2. Read the diff.".into(),
        status: CandidateStatus::Pending,
        request_id: Some(RequestId::from("run_1")),
        agent: Some("writer".into()),
        created_at: created_at.into(),
        decided_at: None,
        decided_by: None,
        reason: None,
        path: None,
    }
}

async fn candidates_are_listed_decided_once_and_kept(backend: &Backend) {
    let store = backend.runs();
    let first = candidate("cand_1", "release-checklist", "2026-11-24T10:00:00.000Z");
    let second = candidate("cand_2", "triage", "2026-11-24T11:00:00.000Z");
    store.create_skill_candidate(&first).await.unwrap();
    store.create_skill_candidate(&second).await.unwrap();
    assert_eq!(
        store.get_skill_candidate("cand_1").await.unwrap(),
        Some(first.clone())
    );
    let pending = store
        .list_skill_candidates(Some(CandidateStatus::Pending))
        .await
        .unwrap();
    let ids: Vec<&str> = pending.iter().map(|c| c.candidate_id.as_str()).collect();
    assert_eq!(ids, ["cand_2", "cand_1"], "newest first");

    let approved = store
        .decide_skill_candidate(
            "cand_1",
            CandidateStatus::Approved,
            "ops",
            None,
            Some("resources/skills/release-checklist"),
        )
        .await
        .unwrap();
    assert_eq!(approved.status, CandidateStatus::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("ops"));
    let again = store
        .decide_skill_candidate("cand_1", CandidateStatus::Rejected, "eve", Some("no"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&again, StoreError::Invalid(m) if m.contains("already approved by ops")),
        "{again}"
    );
    let missing = store
        .decide_skill_candidate("cand_9", CandidateStatus::Rejected, "ops", None, None)
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("no skill candidate `cand_9`"),
        "{missing}"
    );

    // Kept: another process (or a restart) reads the same decisions.
    let reopened = backend.reopen().await;
    let kept = reopened
        .get_skill_candidate("cand_1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.status, CandidateStatus::Approved);
    assert_eq!(
        kept.path.as_deref(),
        Some("resources/skills/release-checklist")
    );
    let rejected = reopened
        .list_skill_candidates(Some(CandidateStatus::Rejected))
        .await
        .unwrap();
    assert!(rejected.is_empty());
    assert_eq!(reopened.list_skill_candidates(None).await.unwrap().len(), 2);
}

crate::contract!(candidates_are_listed_decided_once_and_kept);
