//! Skills in whole runs, with skill folders in the public SKILL.md format written for these
//! tests (front matter, a body, references/, scripts/): the catalogue and always-on bodies in
//! the prompt, `$mentions`, `load_skill`, contained resource reads, a script that needs a
//! person's approval, budgets, and a skill added while the runtime runs.

use std::time::{Duration, Instant};

use keel::{ApprovalScope, Error, RequestOptions, RunStatus, Runtime, RuntimeError};
use keel::{EventPayload, SkillReason};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::{self, stored};

const RELEASE_NOTES: &str = "---
name: release-notes
description: Write release notes from a list of merged changes. Use when asked for a changelog or release notes.
license: Apache-2.0
metadata:
  owner: docs-team
---
# Release notes

1. Group the changes by kind: features, fixes, other.
2. Follow references/style.md for tone and format.
3. Count the changes with scripts/count.py before writing the summary line.
";

const STYLE: &str = "# Style\n\nWrite in the present tense. One line per change.\n";

const COUNT_SCRIPT: &str = "import json, os, sys\n\
print(json.dumps({\"cwd\": os.getcwd(), \"args\": sys.argv[1:], \"skill\": os.environ.get(\"KEEL_SKILL\")}))\n";

const DEPLOY: &str = "---
name: deploy-checklist
description: The checks to run before any deploy.
---
Before a deploy: run the tests, read the diff, tell the on-call engineer.
";

const ONCALL: &str = "---
name: ops-oncall
description: How the on-call rotation works.
---
Page the secondary after 15 minutes.
";

/// A workspace whose agent may use `release-notes` and `deploy-*` (with `deploy-checklist`
/// always on), plus a skill it may not use and a secret outside every skill.
fn skills_workspace(mock: &MockLlm, runtime_extra: &str) -> TempWorkspace {
    let ws = WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: {}, timeout: 5s }}",
                mock.base_url(),
                keel_test_support::OPENAI_MOCK_MODEL
            ),
        )
        .agent(
            "assistant",
            "  model: mock\n  instructions: You are a test agent.\n  tools: []\n  skills: [release-notes, \"deploy-*\"]\n  alwaysOnSkills: [deploy-checklist]\n",
        )
        .agent(
            "ops",
            "  model: mock\n  instructions: You are on call.\n  skills: [ops-oncall]\n",
        )
        .runtime(&format!(
            "{{ defaultAgent: assistant, skills: {{ refreshInterval: 50ms{runtime_extra} }} }}"
        ))
        .file("resources/skills/release-notes/SKILL.md", RELEASE_NOTES)
        .file("resources/skills/release-notes/references/style.md", STYLE)
        .file("resources/skills/release-notes/scripts/count.py", COUNT_SCRIPT)
        .file("resources/skills/deploy-checklist/SKILL.md", DEPLOY)
        .file("resources/skills/ops-oncall/SKILL.md", ONCALL)
        .file("secret.txt", "the launch codes\n")
        .build();
    std::os::unix::fs::symlink(
        ws.path().join("secret.txt"),
        ws.path()
            .join("resources/skills/release-notes/references/escape.md"),
    )
    .unwrap();
    ws
}

fn runtime(ws: &TempWorkspace) -> Runtime {
    Runtime::builder().workspace(ws.path()).build().unwrap()
}

fn injected(events: &[keel::Event]) -> Vec<(String, SkillReason, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::SkillInjected {
                skill,
                reason,
                truncated,
                ..
            } => Some((skill.clone(), *reason, *truncated)),
            _ => None,
        })
        .collect()
}

fn offered(events: &[keel::Event]) -> (Vec<String>, Vec<String>) {
    events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::SkillOffered {
                offered, omitted, ..
            } => Some((offered.clone(), omitted.clone())),
            _ => None,
        })
        .expect("a runtime.skill.offered event")
}

#[tokio::test]
async fn the_prompt_carries_the_catalogue_the_always_on_body_and_a_mentioned_body() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Done."]));
    let ws = skills_workspace(&mock, "");
    let runtime = runtime(&ws);

    let (response, _) = common::run(&runtime, "Write notes for v2 with $release-notes.").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    let request = mock.last_request().unwrap();
    insta::assert_yaml_snapshot!("skills_prompt", common::transcript(request.messages()));
    let events = stored(&runtime, &response).await;
    assert_eq!(
        offered(&events),
        (
            vec!["deploy-checklist".to_owned(), "release-notes".to_owned()],
            vec![]
        ),
        "ops-oncall is not the agent's to use"
    );
    assert_eq!(
        injected(&events),
        [
            ("deploy-checklist".to_owned(), SkillReason::AlwaysOn, false),
            ("release-notes".to_owned(), SkillReason::Mention, false),
        ]
    );
    let assembled = events.iter().find_map(|e| match &e.payload {
        EventPayload::PromptAssembled { sections, .. } => Some(sections.clone()),
        _ => None,
    });
    let names: Vec<String> = assembled.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["instructions", "skills", "input", "tools"]);
}

#[tokio::test]
async fn a_mention_of_an_unknown_or_disallowed_skill_refuses_the_request() {
    let mock = MockLlm::start().await;
    let ws = skills_workspace(&mock, "");
    let runtime = runtime(&ws);

    let refuse = |input: &str| {
        let runtime = runtime.clone();
        let input = input.to_owned();
        async move {
            match runtime
                .request(RequestOptions {
                    input,
                    ..Default::default()
                })
                .await
            {
                Err(Error::Runtime(RuntimeError::Skill(message))) => message,
                Err(other) => panic!("expected a skill error, got {other}"),
                Ok(_) => panic!("the request should be refused"),
            }
        }
    };
    let unknown = refuse("Use $relase-notes please").await;
    assert!(unknown.contains("no skill `relase-notes`"), "{unknown}");
    assert!(
        unknown.contains("did you mean `$release-notes`?"),
        "{unknown}"
    );
    let disallowed = refuse("Follow $ops-oncall").await;
    assert!(
        disallowed.contains("agent `assistant` may not use"),
        "{disallowed}"
    );
    // Nothing ran and nothing was recorded.
    assert_eq!(mock.request_count(), 0);
    assert!(
        runtime
            .runs()
            .list(&keel::RunFilter::default())
            .await
            .unwrap()
            .is_empty()
    );

    // Dollar amounts, shell variables, code and escapes are not mentions.
    mock.push(MockResponse::text(["Fine."]));
    let (response, _) = common::run(
        &runtime,
        "It costs $5; echo $HOME and `$x`, or \\$literal-text.",
    )
    .await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
}

#[tokio::test]
async fn load_skill_and_read_skill_resource_are_contained_to_the_skill() {
    let mock = MockLlm::start().await;
    let call = |id: &str, tool: &str, args: Value| {
        MockResponse::tool_calls([MockToolCall::new(id, tool, [args.to_string()])])
    };
    mock.push(call("c1", "load_skill", json!({"name": "release-notes"})));
    mock.push(call(
        "c2",
        "read_skill_resource",
        json!({"skill": "release-notes", "path": "references/style.md"}),
    ));
    for (id, path) in [
        ("c3", "../../../secret.txt"),
        ("c4", "/etc/passwd"),
        ("c5", "references/escape.md"),
    ] {
        mock.push(call(
            id,
            "read_skill_resource",
            json!({"skill": "release-notes", "path": path}),
        ));
    }
    mock.push(call("c6", "load_skill", json!({"name": "ops-oncall"})));
    mock.push(MockResponse::text(["Done."]));
    let ws = skills_workspace(&mock, "");
    let runtime = runtime(&ws);

    let (response, _) = common::run(&runtime, "Write the release notes.").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    let requests = mock.requests();
    let result = |i: usize| requests[i].last_content_of("tool").unwrap().to_owned();
    assert!(
        result(1).starts_with("# Skill: release-notes"),
        "{}",
        result(1)
    );
    assert!(result(1).contains("Group the changes by kind"));
    assert!(
        !result(1).contains("license:"),
        "only the body: {}",
        result(1)
    );
    assert_eq!(result(2), STYLE);
    for (i, expected) in [
        (3, "outside the skill's folder"),
        (4, "is absolute"),
        (5, "outside the skill's folder"),
    ] {
        assert!(result(i).contains(expected), "{i}: {}", result(i));
        assert!(!result(i).contains("launch codes"), "{}", result(i));
    }
    assert!(
        result(6).contains("may not use skill `ops-oncall`"),
        "{}",
        result(6)
    );

    let events = stored(&runtime, &response).await;
    // The blocked calls never ran: the gateway refused them.
    let blocked: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolGuard {
                call_id, decision, ..
            } if *decision == keel::GuardDecision::Blocked => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(blocked, ["c3", "c4", "c5", "c6"]);
    assert_eq!(
        injected(&events),
        [
            ("deploy-checklist".to_owned(), SkillReason::AlwaysOn, false),
            ("release-notes".to_owned(), SkillReason::Tool, false),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_script_asks_a_person_and_runs_in_the_skill_folder() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "run_skill_script",
        [
            json!({"skill": "release-notes", "script": "scripts/count.py", "args": ["CHANGES.md"]})
                .to_string(),
        ],
    )]));
    mock.push(MockResponse::text(["Counted."]));
    let ws = skills_workspace(&mock, "");
    let runtime = runtime(&ws);

    let handle = runtime
        .request(RequestOptions {
            input: "Count the changes.".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let approval = common::wait_for_pending(&runtime).await;
    assert_eq!(approval.tool, "run_skill_script");
    assert_eq!(approval.arguments["script"], "scripts/count.py");
    runtime
        .approvals()
        .decide(
            &approval.approval_id,
            true,
            ApprovalScope::Once,
            "ops",
            None,
        )
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");

    let result: Value =
        serde_json::from_str(mock.requests()[1].last_content_of("tool").unwrap()).unwrap();
    assert_eq!(result["exit_code"], 0, "{result}");
    let printed: Value = serde_json::from_str(result["stdout"].as_str().unwrap()).unwrap();
    let skill_dir = ws
        .path()
        .join("resources/skills/release-notes")
        .canonicalize()
        .unwrap();
    assert_eq!(printed["cwd"], skill_dir.display().to_string());
    assert_eq!(printed["args"], json!(["CHANGES.md"]));
    assert_eq!(printed["skill"], "release-notes");
}

#[tokio::test]
async fn budgets_leave_skills_out_of_the_catalogue_and_cut_long_bodies_with_a_note() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Done."]));
    // The catalogue has room for one entry; a body for 40 characters.
    let ws = skills_workspace(&mock, ", catalogueChars: 90, bodyChars: 40");
    let runtime = runtime(&ws);

    let (response, _) = common::run(&runtime, "Hello.").await;
    let events = stored(&runtime, &response).await;
    assert_eq!(
        offered(&events),
        (
            vec!["deploy-checklist".to_owned()],
            vec!["release-notes".to_owned()]
        )
    );
    assert_eq!(
        injected(&events),
        [("deploy-checklist".to_owned(), SkillReason::AlwaysOn, true)]
    );
    let prompt = common::transcript(mock.last_request().unwrap().messages()).join("\n");
    assert!(
        prompt.contains("1 more skills are not listed here"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Keel cut this skill's instructions at"),
        "{prompt}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_added_while_the_runtime_runs_is_offered_without_a_restart() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["One."]));
    mock.push(MockResponse::text(["Two."]));
    let ws = skills_workspace(&mock, "");
    let runtime = runtime(&ws);
    let (first, _) = common::run(&runtime, "Hello.").await;
    let generation = runtime.skills().current().generation;

    ws.write(
        "resources/skills/deploy-rollback/SKILL.md",
        "---\nname: deploy-rollback\ndescription: How to roll a deploy back.\n---\nRevert the tag.\n",
    );
    // A scan may see the new folder before its SKILL.md is written (and find no skill yet):
    // wait for a scan that has the skill.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !runtime
        .skills()
        .current()
        .skills
        .contains_key("deploy-rollback")
    {
        assert!(Instant::now() < deadline, "the new skill was never scanned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(runtime.skills().current().generation > generation);
    let (second, _) = common::run(&runtime, "Hello again.").await;

    let (before, _) = offered(&stored(&runtime, &first).await);
    let (after, _) = offered(&stored(&runtime, &second).await);
    assert!(!before.contains(&"deploy-rollback".to_owned()));
    assert!(after.contains(&"deploy-rollback".to_owned()), "{after:?}");
}
