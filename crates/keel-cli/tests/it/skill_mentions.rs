//! A `$mention` of a skill that does not exist or that the agent may not use: `keel run` exits
//! with 2 and says which, before anything runs.

use keel_test_support::WorkspaceBuilder;
use serde_json::json;

use crate::common::keel_in;

#[test]
fn keel_run_refuses_an_unknown_mention_with_exit_2() {
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: writer }")
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Done."}]}]}),
        )
        .agent("writer", "{ model: m, skills: [release-notes] }")
        .file(
            "resources/skills/release-notes/SKILL.md",
            "---\nname: release-notes\ndescription: Write release notes.\n---\nGroup by kind.\n",
        )
        .build();
    let keel = keel_in(&ws);

    let refused = keel.run(["run", "Use $relase-notes for v2"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("no skill `relase-notes`")
            && refused.stderr.contains("did you mean `$release-notes`?"),
        "{}",
        refused.stderr
    );
    let listed = keel.run(["runs", "list", "--json"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(
        !listed.stdout.contains("relase"),
        "no run was recorded: {}",
        listed.stdout
    );

    let ran = keel.run(["run", "Use $release-notes for v2"]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(ran.stdout.contains("Done."), "{}", ran.stdout);
}
