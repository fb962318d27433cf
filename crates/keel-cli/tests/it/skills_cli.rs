//! `keel skills list|show|validate` on a workspace with skill folders written for the test.

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

use crate::common::keel_in;

const RELEASE_NOTES: &str = "---\nname: release-notes\ndescription: Write release notes from merged changes.\nlicense: Apache-2.0\n---\n# Release notes\n\nGroup the changes by kind.\n";

fn workspace(runtime: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(runtime)
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Done."}]}]}),
        )
        .agent(
            "writer",
            "{ model: m, skills: [\"release-*\"], alwaysOnSkills: [release-notes] }",
        )
        .file("resources/skills/release-notes/SKILL.md", RELEASE_NOTES)
        .file(
            "resources/skills/release-notes/references/style.md",
            "Be brief.\n",
        )
        .file(
            "resources/skills/release-notes/scripts/count.py",
            "print(1)\n",
        )
        .file(
            "resources/skills/ops-oncall/SKILL.md",
            "---\nname: ops-oncall\ndescription: The on-call rotation.\n---\nPage the secondary.\n",
        )
        .build()
}

#[test]
fn list_and_show_print_the_skills_their_files_and_body() {
    let ws = workspace("{ defaultAgent: writer }");
    let keel = keel_in(&ws);

    let listed = keel.run(["skills", "list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(listed.stdout.contains("ops-oncall") && listed.stdout.contains("release-notes"));
    let mine: Vec<Value> = keel
        .run(["skills", "list", "--agent", "writer", "--json"])
        .json_lines();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0]["name"], "release-notes");
    assert_eq!(mine[0]["alwaysOn"], true);
    assert_eq!(mine[0]["file"], "resources/skills/release-notes/SKILL.md");
    let unknown = keel.run(["skills", "list", "--agent", "nobody"]);
    assert_eq!(unknown.code, Some(2));

    let shown = keel.run(["skills", "show", "release-notes"]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    for part in [
        "description: Write release notes from merged changes.",
        "license: \"Apache-2.0\"",
        "references/style.md (10 bytes)",
        "scripts/count.py (9 bytes)",
        "Group the changes by kind.",
    ] {
        assert!(shown.stdout.contains(part), "{part}: {}", shown.stdout);
    }
    let missing = keel.run(["skills", "show", "release-note"]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.contains("did you mean `release-notes`?"),
        "{}",
        missing.stderr
    );
}

#[test]
fn validate_locates_a_missing_description_and_a_collision_between_roots() {
    let ws = workspace("{ defaultAgent: writer, skills: { roots: [{ path: shared/skills }] } }");
    let keel = keel_in(&ws);
    let ok = keel.run(["skills", "validate"]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert!(ok.stdout.contains("ok: 2 skill(s)"), "{}", ok.stdout);

    ws.write("shared/skills/release-notes/SKILL.md", RELEASE_NOTES);
    ws.write(
        "resources/skills/triage/SKILL.md",
        "---\nname: triage\nlicense: MIT\n---\nSort the bugs.\n",
    );
    let bad = keel.run(["skills", "validate"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stdout);
    assert!(
        bad.stderr
            .contains("resources/skills/triage/SKILL.md:2:1: error: missing `description`"),
        "{}",
        bad.stderr
    );
    assert!(
        bad.stderr.contains("skill `release-notes` is defined 2 times: resources/skills/release-notes/SKILL.md and shared/skills/release-notes/SKILL.md"),
        "{}",
        bad.stderr
    );

    // A folder given on its own is checked on its own.
    let one = keel.run(["skills", "validate", "resources/skills/triage"]);
    assert_eq!(one.code, Some(2));
    assert!(
        one.stderr.contains("missing `description`"),
        "{}",
        one.stderr
    );
    assert!(!one.stderr.contains("defined 2 times"), "{}", one.stderr);
    let fine = keel.run(["skills", "validate", "shared/skills"]);
    assert_eq!(fine.code, Some(0), "{}", fine.stderr);
    assert!(fine.stdout.contains("ok: 1 skill(s)"), "{}", fine.stdout);
}

/// An agent that may propose skills, on a script that proposes one (and a badly named one).
fn proposing_workspace() -> TempWorkspace {
    let propose = |name: &str| {
        json!({"toolCalls": [{"name": "propose_skill", "arguments": {
            "name": name,
            "description": "Triage flaky tests: rerun, bisect, quarantine. Use when a test fails: sometimes.",
            "instructions": "# Flaky tests\n\n1. Rerun the test 20 times.\n2. Quarantine it if it fails twice."
        }}]})
    };
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: learner }")
        .scripted_model(
            "m",
            &json!({"conversations": [
                {"match": "bad", "steps": [propose("Flaky Tests"), {"text": "Tried."}]},
                {"match": "other", "steps": [propose("release-checklist"), {"text": "Proposed."}]},
                {"steps": [propose("triage-flaky-tests"), {"text": "Proposed."}]}
            ]}),
        )
        .agent("learner", "{ model: m, tools: [propose_skill] }")
        .build()
}

#[test]
fn a_proposed_skill_is_written_only_after_a_person_approves_it() {
    let ws = proposing_workspace();
    let keel = keel_in(&ws);

    let ran = keel.run(["run", "Learn from the flaky test."]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let created: Vec<Value> = keel
        .newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == "runtime.skill.candidate.created")
        .collect();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["skill"], "triage-flaky-tests");
    assert!(created[0]["callId"].is_string(), "{:?}", created[0]);
    let id = created[0]["candidateId"].as_str().unwrap().to_owned();

    let pending = keel.run(["skills", "candidates", "--json"]).json_lines();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["candidateId"], id.as_str());
    assert_eq!(pending[0]["agent"], "learner");
    assert!(
        !ws.exists("resources/skills/triage-flaky-tests"),
        "nothing is written before approval"
    );

    let approved = keel.run(["skills", "approve", &id, "--by", "ops"]);
    assert_eq!(approved.code, Some(0), "{}", approved.stderr);
    assert!(
        approved
            .stdout
            .contains("written to resources/skills/triage-flaky-tests"),
        "{}",
        approved.stdout
    );
    // The written skill is valid (its description has `:`, which must survive) and shows.
    let valid = keel.run(["skills", "validate"]);
    assert_eq!(valid.code, Some(0), "{}", valid.stderr);
    let shown: Value = serde_json::from_str(
        &keel
            .run(["skills", "show", "triage-flaky-tests", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(
        shown["description"],
        "Triage flaky tests: rerun, bisect, quarantine. Use when a test fails: sometimes."
    );
    assert!(shown["body"].as_str().unwrap().contains("Quarantine it"));
    let again = keel.run(["skills", "approve", &id]);
    assert_eq!(again.code, Some(2));
    assert!(
        again.stderr.contains("already approved by ops"),
        "{}",
        again.stderr
    );

    // Another candidate is rejected: nothing is written.
    keel.run(["run", "Learn from the other one."]);
    let other = keel.run(["skills", "candidates", "--json"]).json_lines();
    let other_id = other[0]["candidateId"].as_str().unwrap().to_owned();
    let rejected = keel.run(["skills", "reject", &other_id, "--reason", "too vague"]);
    assert_eq!(rejected.code, Some(0), "{}", rejected.stderr);
    assert!(!ws.exists("resources/skills/release-checklist"));
    let all = keel
        .run(["skills", "candidates", "--status", "all", "--json"])
        .json_lines();
    let statuses: Vec<&str> = all.iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["rejected", "approved"]);
    assert_eq!(all[0]["reason"], "too vague");
}

#[test]
fn a_proposed_skill_with_a_bad_name_is_blocked_by_the_gateway() {
    let ws = proposing_workspace();
    let keel = keel_in(&ws);
    let ran = keel.run(["run", "A bad proposal."]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let guard = keel
        .newest_run_events()
        .into_iter()
        .find(|e| e["type"] == "runtime.tool.guard")
        .unwrap();
    assert_eq!(guard["decision"], "blocked", "{guard}");
    assert_eq!(guard["issues"][0]["path"], "/name", "{guard}");
    let none = keel.run(["skills", "candidates", "--status", "all", "--json"]);
    assert!(none.stdout.trim().is_empty(), "{}", none.stdout);
}

/// `GET path` on a running server, answered whole (status line, headers, body).
fn get(addr: &str, path: &str) -> (String, Value) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[test]
fn a_broken_skill_fails_validate_but_a_starting_runtime_leaves_it_out_and_runs() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: writer }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Done."}]}]}),
        )
        .agent("writer", "{ model: m, skills: [\"release-*\"] }")
        .agent("triager", "{ model: m, skills: [triage] }")
        .file("resources/skills/release-notes/SKILL.md", RELEASE_NOTES)
        .file(
            "resources/skills/triage/SKILL.md",
            "---\nname: triage\nlicense: MIT\n---\nSort the bugs.\n",
        )
        .build();
    let keel = keel_in(&ws);

    // `keel validate`: the skill's problem is an error, and the agent naming the skill gets no
    // second, "unknown skill" one.
    let validate = keel.run(["validate"]);
    assert_eq!(validate.code, Some(2), "{}", validate.stdout);
    assert!(
        validate
            .stderr
            .contains("resources/skills/triage/SKILL.md:2:1: error: missing `description`"),
        "{}",
        validate.stderr
    );
    assert!(
        !validate.stderr.contains("unknown skill"),
        "{}",
        validate.stderr
    );

    // A starting runtime leaves it out, says so, and runs the rest.
    let run = keel.run(["run", "Write the notes."]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("A skill is left out")
            && run.stderr.contains("resources/skills/triage/SKILL.md"),
        "{}",
        run.stderr
    );

    // So does a starting server: health is degraded, the inventory names the skill and why.
    let server = keel.serve();
    let (status, health) = get(server.addr(), "/api/health");
    assert!(status.contains(" 200 "), "{status}: {health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(
        health["workspace"]["skills"],
        json!({"count": 1, "problems": 1}),
        "{health}"
    );
    let (status, inventory) = get(server.addr(), "/api/inventory");
    assert!(status.contains(" 200 "), "{status}: {inventory}");
    let skills = &inventory["skills"];
    assert_eq!(skills["names"], json!(["release-notes"]), "{skills}");
    assert_eq!(skills["leftOut"], json!(["triage"]), "{skills}");
    assert_eq!(
        skills["problems"][0]["file"], "resources/skills/triage/SKILL.md",
        "{skills}"
    );
    assert_eq!(
        skills["problems"][0]["message"], "missing `description`",
        "{skills}"
    );
}
