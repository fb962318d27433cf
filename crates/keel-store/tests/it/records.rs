//! Approvals, tasks and tool telemetry on both stores (contract tests): approvals listed
//! newest first and by status, decided exactly once with the refusal naming the first
//! decision, gone with their pruned run; tasks created, replaced, listed and deleted; tool
//! usage counted from the recorded guard and result events of every run.

use keel_types::{
    AdapterEvent, ApprovalRecord, ApprovalScope, ApprovalStatus, EventPayload, GuardDecision,
    RequestId, RunRecord, RunStatus, SessionOwner, StoreError, TaskDecision, TaskRecord,
    TaskStatus, ToolStats,
};
use serde_json::json;

use crate::backends::Backend;
use crate::{event, record, started};

fn asked(run: &RunRecord, id: &str, created_at: &str) -> ApprovalRecord {
    let mut approval = ApprovalRecord::pending(
        run,
        &format!("call_{id}"),
        "shell".into(),
        json!({"command": "ls -la", "cwd": "/tmp"}),
        "policy",
        Some("shell asks".into()),
    );
    approval.approval_id = id.into();
    approval.created_at = created_at.into();
    approval
}

fn approval_ids(approvals: &[ApprovalRecord]) -> Vec<&str> {
    approvals.iter().map(|a| a.approval_id.as_str()).collect()
}

async fn approvals_are_listed_newest_first_and_decided_once_naming_the_first(backend: &Backend) {
    let store = backend.runs();
    let mut run = record("run_1", "a", RunStatus::WaitingApproval);
    run.started_at = "2026-01-01T00:00:00.000Z".into();
    store.create_run(&run).await.unwrap();
    let first = asked(&run, "apr_1", "2026-11-24T10:00:00.000Z");
    let second = asked(&run, "apr_2", "2026-11-24T11:00:00.000Z");
    let third = asked(&run, "apr_3", "2026-11-24T12:00:00.000Z");
    for approval in [&first, &second, &third] {
        store.create_approval(approval).await.unwrap();
    }
    assert!(
        store.create_approval(&first).await.is_err(),
        "ids are unique"
    );
    assert_eq!(
        store.get_approval("apr_1").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.get_approval("apr_9").await.unwrap(), None);
    assert_eq!(
        approval_ids(&store.list_approvals(None).await.unwrap()),
        ["apr_3", "apr_2", "apr_1"]
    );

    let decided = store
        .decide_approval(
            "apr_2",
            ApprovalStatus::Approved,
            ApprovalScope::Session,
            "ana",
            Some("looks fine"),
        )
        .await
        .unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.scope, ApprovalScope::Session);
    assert_eq!(decided.decided_by.as_deref(), Some("ana"));
    assert_eq!(decided.decision_reason.as_deref(), Some("looks fine"));
    let decided_at = decided.decided_at.clone().expect("a decision time");
    assert_eq!(
        store.get_approval("apr_2").await.unwrap(),
        Some(decided.clone())
    );
    store
        .decide_approval(
            "apr_3",
            ApprovalStatus::Denied,
            ApprovalScope::Once,
            "bo",
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        approval_ids(
            &store
                .list_approvals(Some(ApprovalStatus::Pending))
                .await
                .unwrap()
        ),
        ["apr_1"]
    );
    assert_eq!(
        approval_ids(
            &store
                .list_approvals(Some(ApprovalStatus::Approved))
                .await
                .unwrap()
        ),
        ["apr_2"]
    );
    assert!(
        store
            .list_approvals(Some(ApprovalStatus::Expired))
            .await
            .unwrap()
            .is_empty()
    );

    // A second decision is refused, names the first, and changes nothing.
    let again = store
        .decide_approval(
            "apr_2",
            ApprovalStatus::Denied,
            ApprovalScope::Once,
            "eve",
            None,
        )
        .await
        .unwrap_err();
    let expected = format!("approval `apr_2` was already approved by ana at {decided_at}");
    assert!(
        matches!(&again, StoreError::Invalid(m) if m.contains(&expected)),
        "{again}"
    );
    assert_eq!(
        store.get_approval("apr_2").await.unwrap(),
        Some(decided.clone())
    );
    let unknown = store
        .decide_approval(
            "apr_9",
            ApprovalStatus::Approved,
            ApprovalScope::Once,
            "ana",
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&unknown, StoreError::Invalid(m) if m.contains("no approval `apr_9`")),
        "{unknown}"
    );
    let undecided = store
        .decide_approval(
            "apr_1",
            ApprovalStatus::Pending,
            ApprovalScope::Once,
            "ana",
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(undecided, StoreError::Invalid(_)), "{undecided}");
    assert_eq!(store.get_approval("apr_1").await.unwrap(), Some(first));

    // Another process reads the same decisions.
    let reopened = backend.reopen().await;
    assert_eq!(reopened.get_approval("apr_2").await.unwrap(), Some(decided));
    assert_eq!(
        approval_ids(
            &reopened
                .list_approvals(Some(ApprovalStatus::Denied))
                .await
                .unwrap()
        ),
        ["apr_3"]
    );

    // A pruned run takes its approvals with it.
    let mut ended = store
        .get_run(&RequestId::from("run_1"))
        .await
        .unwrap()
        .unwrap();
    ended.status = RunStatus::Completed;
    store.update_run(&ended).await.unwrap();
    assert_eq!(store.prune("2026-06-01T00:00:00.000Z").await.unwrap(), 1);
    assert!(store.list_approvals(None).await.unwrap().is_empty());
    assert_eq!(store.get_approval("apr_1").await.unwrap(), None);
}

fn task(id: &str, created_at: &str) -> TaskRecord {
    TaskRecord {
        task_id: id.into(),
        agent: "ops".into(),
        requested_tool: "read_fil".into(),
        tool: "read_file".into(),
        arguments: json!({"path": "README.md", "limit": 20, "nested": {"b": [1, 2.5, null]}}),
        decision: TaskDecision::Allow,
        issues: Vec::new(),
        repairs: Vec::new(),
        reason: None,
        hooks: Vec::new(),
        hook_decision: None,
        double_check_on_run: false,
        mode: None,
        status: TaskStatus::Created,
        request_id: None,
        output: None,
        created_at: created_at.into(),
        updated_at: created_at.into(),
    }
}

fn task_ids(tasks: &[TaskRecord]) -> Vec<&str> {
    tasks.iter().map(|t| t.task_id.as_str()).collect()
}

async fn tasks_are_put_replaced_listed_newest_first_and_deleted(backend: &Backend) {
    let store = backend.runs();
    assert!(store.list_tasks(None).await.unwrap().is_empty());
    for (id, at) in [
        ("task_1", "2026-11-24T10:00:00.000Z"),
        ("task_2", "2026-11-24T11:00:00.000Z"),
        // Same time as task_2: the id breaks the tie, largest first.
        ("task_3", "2026-11-24T11:00:00.000Z"),
    ] {
        store.put_task(&task(id, at)).await.unwrap();
    }
    assert_eq!(
        store.get_task("task_1").await.unwrap(),
        Some(task("task_1", "2026-11-24T10:00:00.000Z"))
    );
    assert_eq!(store.get_task("task_9").await.unwrap(), None);
    assert_eq!(
        task_ids(&store.list_tasks(None).await.unwrap()),
        ["task_3", "task_2", "task_1"]
    );
    assert_eq!(
        task_ids(&store.list_tasks(Some(2)).await.unwrap()),
        ["task_3", "task_2"]
    );

    // Putting a task again replaces its record (it keeps its place in the list).
    let mut ran = task("task_1", "2026-11-24T10:00:00.000Z");
    ran.status = TaskStatus::Completed;
    ran.request_id = Some(RequestId::from("run_task"));
    ran.output = Some("# Keel\n".into());
    ran.decision = TaskDecision::NeedsApproval;
    ran.reason = Some("policy".into());
    ran.updated_at = "2026-11-24T12:00:00.000Z".into();
    store.put_task(&ran).await.unwrap();
    assert_eq!(store.get_task("task_1").await.unwrap(), Some(ran.clone()));
    let listed = store.list_tasks(None).await.unwrap();
    assert_eq!(task_ids(&listed), ["task_3", "task_2", "task_1"]);
    assert_eq!(listed[2], ran);

    assert!(store.delete_task("task_2").await.unwrap());
    assert!(!store.delete_task("task_2").await.unwrap());
    assert_eq!(store.get_task("task_2").await.unwrap(), None);
    let reopened = backend.reopen().await;
    assert_eq!(
        task_ids(&reopened.list_tasks(None).await.unwrap()),
        ["task_3", "task_1"]
    );
}

fn guard(
    id: &str,
    seq: u64,
    tool: &str,
    decision: GuardDecision,
    resolved: Option<&str>,
) -> keel_types::Event {
    event(
        id,
        seq,
        EventPayload::ToolGuard {
            call_id: format!("call_{seq}"),
            tool: tool.into(),
            decision,
            arguments: "{}".into(),
            issues: Vec::new(),
            repairs: Vec::new(),
            resolved_tool: resolved.map(str::to_owned),
            repaired_arguments: None,
        },
    )
}

fn result(id: &str, seq: u64, tool: &str, ok: bool, duration_ms: u64) -> keel_types::Event {
    event(
        id,
        seq,
        EventPayload::Adapter {
            event: AdapterEvent::ToolResult {
                adapter: "native".into(),
                call_id: format!("call_{seq}"),
                tool: tool.into(),
                ok,
                output: "out".into(),
                error: (!ok).then(|| "failed".into()),
                duration_ms,
            },
        },
    )
}

async fn tool_stats_count_calls_errors_repairs_blocks_and_latency_over_every_run(
    backend: &Backend,
) {
    let store = backend.runs();
    assert!(store.tool_stats().await.unwrap().is_empty());
    for id in ["run_1", "run_2"] {
        store
            .create_run(&record(id, "a", RunStatus::Running))
            .await
            .unwrap();
    }
    store
        .append(&[
            started("run_1", 1),
            guard(
                "run_1",
                2,
                "read_fil",
                GuardDecision::Repaired,
                Some("read_file"),
            ),
            result("run_1", 3, "read_file", true, 10),
            guard("run_1", 4, "read_file", GuardDecision::Accepted, None),
            result("run_1", 5, "read_file", true, 30),
            guard("run_1", 6, "shell", GuardDecision::Blocked, None),
            guard("run_1", 7, "shell", GuardDecision::Accepted, None),
            result("run_1", 8, "shell", false, 5),
            guard("run_1", 9, "web_fetch", GuardDecision::Accepted, None),
        ])
        .await
        .unwrap();
    store
        .append(&[
            started("run_2", 1),
            result("run_2", 2, "read_file", true, 20),
        ])
        .await
        .unwrap();

    let read_file = ToolStats {
        tool: "read_file".into(),
        calls: 3,
        errors: 0,
        repairs: 1,
        blocks: 0,
        latency_p50_ms: 20,
        latency_p99_ms: 30,
    };
    let shell = ToolStats {
        tool: "shell".into(),
        calls: 1,
        errors: 1,
        repairs: 0,
        blocks: 1,
        latency_p50_ms: 5,
        latency_p99_ms: 5,
    };
    // A tool the gateway saw but that never ran yet.
    let web_fetch = ToolStats {
        tool: "web_fetch".into(),
        ..ToolStats::default()
    };
    assert_eq!(
        store.tool_stats().await.unwrap(),
        [read_file, shell, web_fetch],
        "one entry per tool, by name"
    );
}

/// Text with a NUL character (U+0000), as a model or a tool reading a binary file may give.
const NUL: &str = "before\u{0}after";

async fn text_with_a_nul_character_round_trips_in_every_record(backend: &Backend) {
    let store = backend.store();
    // Every kind of record is tried; the failures are reported together.
    let mut failed: Vec<String> = Vec::new();
    let mut check = |what: &str, ok: Result<bool, StoreError>| match ok {
        Ok(true) => {}
        Ok(false) => failed.push(format!("{what}: stored, but read back changed")),
        Err(error) => failed.push(format!("{what}: {error}")),
    };

    let mut run = record("run_1", "a", RunStatus::Running);
    run.input = NUL.into();
    let created = store.create_run(&run).await;
    check("run record (create)", created.map(|()| true));
    if store.get_run(&run.request_id).await.unwrap().is_none() {
        // Refused: continue with a run that has no NUL, to try everything else.
        run.input = "hi".into();
        store.create_run(&run).await.unwrap();
    }
    check(
        "run record (create, read back)",
        store
            .get_run(&run.request_id)
            .await
            .map(|got| got.is_some_and(|got| got == run)),
    );
    // The event first: a run that ended takes no more (on PostgreSQL it has no owner).
    let mut sent = started("run_1", 1);
    if let EventPayload::RequestStarted { input, .. } = &mut sent.payload {
        *input = NUL.into();
    }
    let appended = store.append(std::slice::from_ref(&sent)).await;
    let read = store.events(&run.request_id, 0).await.unwrap();
    check("event", appended.map(|()| read == [sent]));

    let mut ended = run.clone();
    ended.status = RunStatus::Completed;
    ended.output = Some(NUL.into());
    let updated = store.update_run(&ended).await;
    let read = store.get_run(&run.request_id).await.unwrap();
    check("run record (update)", updated.map(|()| read == Some(ended)));

    let session = keel_types::SessionId::from("ses_1");
    store
        .ensure_session(&session, "a", &SessionOwner::default())
        .await
        .unwrap();
    let message = keel_types::Message::user(NUL);
    let appended = store
        .append_session_messages(&session, &run.request_id, std::slice::from_ref(&message))
        .await;
    let read = store.session_messages(&session).await.unwrap();
    check(
        "session message",
        appended.map(|()| read.len() == 1 && read[0].message == message),
    );

    let mut staged = task("task_1", "2026-11-24T10:00:00.000Z");
    staged.output = Some(NUL.into());
    let put = store.put_task(&staged).await;
    let read = store.get_task("task_1").await.unwrap();
    check("task", put.map(|()| read == Some(staged)));

    let mut approval = asked(&run, "apr_1", "2026-11-24T10:00:00.000Z");
    approval.arguments = json!({ "command": NUL });
    let created = store.create_approval(&approval).await;
    let read = store.get_approval("apr_1").await.unwrap();
    check("approval", created.map(|()| read == Some(approval)));

    let mut skill = crate::candidates::candidate("cand_1", "nul", "2026-11-24T10:00:00.000Z");
    skill.instructions = NUL.into();
    let created = store.create_skill_candidate(&skill).await;
    let read = store.get_skill_candidate("cand_1").await.unwrap();
    check("skill candidate", created.map(|()| read == Some(skill)));

    let remembered = store
        .store_memory(&crate::memory::candidate("users/alice", NUL), "auto")
        .await;
    let read = match &remembered {
        Ok(stored) => store.get_memory(&stored.id).await.unwrap(),
        Err(_) => None,
    };
    check(
        "memory record",
        remembered.map(|_| read.is_some_and(|read| read.text == NUL)),
    );

    assert!(
        failed.is_empty(),
        "{}: text with U+0000 is not stored in:\n{}",
        backend.kind,
        failed.join("\n")
    );
}

async fn a_sessions_summary_is_stored_and_read_back(backend: &Backend) {
    let store = backend.store();
    let session = keel_types::SessionId::from("ses_summarized");
    let summary = keel_types::SessionSummary {
        text: "They talked about \u{0}three things.".into(),
        through_seq: 6,
        at: "2026-11-29T08:00:00.000Z".into(),
    };
    assert!(
        !store.set_session_summary(&session, &summary).await.unwrap(),
        "no such session yet"
    );
    store
        .ensure_session(&session, "a", &keel_types::SessionOwner::default())
        .await
        .unwrap();
    assert_eq!(
        store.get_session(&session).await.unwrap().unwrap().summary,
        None
    );
    assert!(store.set_session_summary(&session, &summary).await.unwrap());
    let read = store.get_session(&session).await.unwrap().unwrap();
    assert_eq!(read.summary, Some(summary.clone()), "{}", backend.kind);
    let listed = store.list_sessions(None).await.unwrap();
    assert_eq!(listed[0].summary, Some(summary));
}

crate::contract!(
    a_sessions_summary_is_stored_and_read_back,
    approvals_are_listed_newest_first_and_decided_once_naming_the_first,
    text_with_a_nul_character_round_trips_in_every_record,
    tasks_are_put_replaced_listed_newest_first_and_deleted,
    tool_stats_count_calls_errors_repairs_blocks_and_latency_over_every_run,
);
