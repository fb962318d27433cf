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
