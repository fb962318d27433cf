//! Scanning skill folders in the public SKILL.md format: front matter only (never the body),
//! every problem located, collisions between roots named, overrides said.

use std::path::{Path, PathBuf};

use keel_test_support::TempWorkspace;
use keel_workspace::skills::{MAX_FRONT_MATTER, SkillRoot, scan_skills};

fn root(path: &str) -> SkillRoot {
    SkillRoot {
        path: PathBuf::from(path),
        overrides: false,
    }
}

fn rendered(scan: &keel_workspace::skills::SkillScan) -> Vec<String> {
    scan.diagnostics.iter().map(|d| d.to_string()).collect()
}

const RELEASE_NOTES: &str = "---
name: release-notes
description: Write release notes from merged pull requests. Use when asked for a changelog.
license: Apache-2.0
allowed-tools: [read_file, grep]
---
# Release notes

1. Read `references/style.md`.
2. Run `scripts/collect.sh` to list the merged pull requests.
";

fn write_release_notes(ws: &TempWorkspace, at: &str) {
    ws.write(format!("{at}/release-notes/SKILL.md"), RELEASE_NOTES);
    ws.write(
        format!("{at}/release-notes/references/style.md"),
        "Short lines.\n",
    );
    ws.write_executable(
        format!("{at}/release-notes/scripts/collect.sh"),
        "#!/bin/sh\necho none\n",
    );
}

#[test]
fn a_skill_folder_is_scanned_from_its_front_matter_with_unknown_fields_kept() {
    let ws = TempWorkspace::new();
    write_release_notes(&ws, "resources/skills");
    // The body is never read: not even a body that is not text stops the scan.
    let mut big = b"---\nname: big-body\ndescription: A skill with a large body.\n---\n".to_vec();
    big.extend(std::iter::repeat_n(0xff_u8, 2 * MAX_FRONT_MATTER));
    ws.write("resources/skills/big-body/SKILL.md", big);
    // A folder without SKILL.md is not a skill.
    ws.write("resources/skills/notes/README.md", "not a skill\n");

    let scan = scan_skills(ws.path(), &[root("resources/skills")]);
    assert!(scan.diagnostics.is_empty(), "{:?}", rendered(&scan));
    let names: Vec<&str> = scan.skills.keys().map(String::as_str).collect();
    assert_eq!(names, ["big-body", "release-notes"]);
    let skill = &scan.skills["release-notes"];
    assert_eq!(
        skill.description,
        "Write release notes from merged pull requests. Use when asked for a changelog."
    );
    assert_eq!(
        skill.file,
        Path::new("resources/skills/release-notes/SKILL.md")
    );
    assert_eq!(skill.extra["license"], "Apache-2.0");
    assert_eq!(skill.extra["allowed-tools"][1], "grep");
}

#[test]
fn every_problem_is_located_in_its_file() {
    let ws = TempWorkspace::new();
    let at = "resources/skills";
    ws.write(
        format!("{at}/no-description/SKILL.md"),
        "---\nname: no-description\n---\nbody\n",
    );
    ws.write(
        format!("{at}/Bad_Name/SKILL.md"),
        "---\nname: Bad_Name\ndescription: x\n---\n",
    );
    ws.write(
        format!("{at}/elsewhere/SKILL.md"),
        "---\ndescription: moved\nname: somewhere\n---\n",
    );
    ws.write(
        format!("{at}/long/SKILL.md"),
        format!("---\nname: long\ndescription: {}\n---\n", "x".repeat(1025)),
    );
    ws.write(format!("{at}/plain/SKILL.md"), "# Just Markdown\n");
    ws.write(
        format!("{at}/open/SKILL.md"),
        format!(
            "---\nname: open\ndescription: |\n{}",
            "  line\n".repeat(3000)
        ),
    );
    ws.write(
        format!("{at}/broken/SKILL.md"),
        "---\nname: broken\ndescription: [unclosed\n---\n",
    );
    let scan = scan_skills(ws.path(), &[root(at)]);
    assert!(scan.skills.is_empty(), "{:?}", scan.skills.keys());
    let got = rendered(&scan);
    let expect = [
        "resources/skills/Bad_Name/SKILL.md:2:7: error: invalid skill name `Bad_Name`: `B` is not allowed",
        "resources/skills/broken/SKILL.md:4:1: error: invalid YAML",
        "resources/skills/elsewhere/SKILL.md:3:7: error: skill name `somewhere` differs from its folder `elsewhere`",
        "resources/skills/long/SKILL.md:3:14: error: `description` has 1025 characters; at most 1024",
        "resources/skills/no-description/SKILL.md:2:1: error: missing `description`",
        "resources/skills/open/SKILL.md:1:1: error: SKILL.md cannot be read as a skill: its front matter is not closed by `---` within 16384 bytes",
        "resources/skills/plain/SKILL.md:1:1: error: SKILL.md cannot be read as a skill: it does not start with front matter (`---`)",
    ];
    assert_eq!(got.len(), expect.len(), "{got:#?}");
    for (got, expect) in got.iter().zip(expect) {
        assert!(
            got.starts_with(expect),
            "{got}\n  does not start with\n{expect}"
        );
    }
}

#[test]
fn the_same_name_in_two_roots_is_an_error_naming_both_files_unless_one_overrides() {
    let ws = TempWorkspace::new();
    write_release_notes(&ws, "resources/skills");
    write_release_notes(&ws, "shared/skills");
    let roots = [root("resources/skills"), root("shared/skills")];
    let scan = scan_skills(ws.path(), &roots);
    let got = rendered(&scan);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains(
            "skill `release-notes` is defined 2 times: resources/skills/release-notes/SKILL.md and shared/skills/release-notes/SKILL.md"
        ),
        "{}",
        got[0]
    );
    assert!(got[0].contains("override: true"), "{}", got[0]);

    // The overriding root wins wherever it stands in the list, and the hidden file is said.
    let roots = [
        root("resources/skills"),
        SkillRoot {
            path: PathBuf::from("shared/skills"),
            overrides: true,
        },
    ];
    let scan = scan_skills(ws.path(), &roots);
    assert!(scan.diagnostics.is_empty(), "{:?}", rendered(&scan));
    assert_eq!(
        scan.skills["release-notes"].file,
        Path::new("shared/skills/release-notes/SKILL.md")
    );
    assert_eq!(
        scan.overridden,
        [(
            PathBuf::from("shared/skills/release-notes/SKILL.md"),
            PathBuf::from("resources/skills/release-notes/SKILL.md")
        )]
    );
}

mod loaded {
    use keel_test_support::WorkspaceBuilder;

    use super::write_release_notes;
    use crate::support::{Load, env, located};

    fn builder() -> WorkspaceBuilder {
        WorkspaceBuilder::new()
            .scripted_model("m", &serde_json::json!({"conversations": []}))
            .runtime("{ skills: { roots: [{ path: shared/skills, override: true }] } }")
    }

    #[test]
    fn a_workspace_loads_its_skills_and_the_agents_that_list_them() {
        let ws = builder()
            .agent(
                "a",
                "{ model: m, skills: [\"release-*\"], alwaysOnSkills: [release-notes] }",
            )
            .build();
        write_release_notes(&ws, "resources/skills");
        write_release_notes(&ws, "shared/skills");
        let loaded = ws.load_ok(&env(&[]));
        let skills = loaded.skills.current();
        assert_eq!(
            skills.skills["release-notes"].file,
            std::path::Path::new("shared/skills/release-notes/SKILL.md")
        );
        assert_eq!(skills.overridden.len(), 1);
        assert_eq!(loaded.agents["a"].always_on_skills, ["release-notes"]);
    }

    #[test]
    fn an_agent_naming_an_unknown_or_unlisted_skill_is_located() {
        let ws = builder()
            .agent(
                "a",
                "{ model: m, skills: [release-note, \"ops-*\"], alwaysOnSkills: [release-notes] }",
            )
            .build();
        write_release_notes(&ws, "resources/skills");
        ws.write(
            "resources/skills/broken/SKILL.md",
            "---\nname: broken\n---\n",
        );
        let got = located(&ws.diagnostics(&env(&[])));
        assert_eq!(
            got,
            [
                "config/keel.yaml:14:28: unknown skill `release-note`",
                "config/keel.yaml:14:42: `ops-*` matches no skill of this workspace",
                "config/keel.yaml:14:69: always-on skill `release-notes` is not in the agent's `skills`",
                "resources/skills/broken/SKILL.md:2:1: missing `description`",
            ],
            "{got:#?}"
        );
    }

    #[test]
    fn a_broken_skill_is_left_out_and_the_rest_of_the_workspace_loads() {
        let ws = builder()
            .agent("a", "{ model: m, skills: [release-notes, broken] }")
            .build();
        write_release_notes(&ws, "resources/skills");
        ws.write(
            "resources/skills/broken/SKILL.md",
            "---\nname: broken\n---\n",
        );
        // Loading (what a starting runtime does) leaves it out and keeps its problem; the
        // agent naming it is not refused as naming an unknown skill.
        let loaded = ws.load_ok(&env(&[]));
        let skills = loaded.skills.current();
        assert_eq!(
            skills.skills.keys().collect::<Vec<_>>(),
            ["release-notes"],
            "{:?}",
            skills.problems
        );
        assert_eq!(
            located(&skills.problems),
            ["resources/skills/broken/SKILL.md:2:1: missing `description`"]
        );
        assert!(skills.broken.contains("broken"), "{:?}", skills.broken);
    }

    #[test]
    fn one_name_in_two_folders_of_a_root_is_a_collision_naming_both_files() {
        let ws = builder()
            .agent(
                "a",
                "{ model: m, skills: [notes, nope], alwaysOnSkills: [notes] }",
            )
            .build();
        let skill = |name: &str| format!("---\nname: {name}\ndescription: Notes.\n---\nBody.\n");
        ws.write("resources/skills/notes/SKILL.md", skill("notes"));
        ws.write("resources/skills/notes-copy/SKILL.md", skill("notes"));
        // With another error in the workspace every problem is listed: the collision, the
        // copy's folder, the truly unknown skill — and no "unknown skill `notes`".
        let got = located(&ws.diagnostics(&env(&[])));
        assert_eq!(
            got,
            [
                "config/keel.yaml:14:35: unknown skill `nope`",
                "resources/skills/notes/SKILL.md:1:1: skill `notes` is defined 2 times in resources/skills: resources/skills/notes/SKILL.md and resources/skills/notes-copy/SKILL.md",
                "resources/skills/notes-copy/SKILL.md:2:7: skill name `notes` differs from its folder `notes-copy`",
            ],
            "{got:#?}"
        );

        // Without it the workspace loads, with neither file's skill in use.
        ws.write(
            "config/keel.yaml",
            std::fs::read_to_string(ws.path().join("config/keel.yaml"))
                .unwrap()
                .replace(", nope]", "]"),
        );
        let loaded = ws.load_ok(&env(&[]));
        let skills = loaded.skills.current();
        assert!(skills.skills.is_empty(), "{:?}", skills.skills.keys());
        assert_eq!(skills.problems.len(), 2, "{:?}", located(&skills.problems));
        assert!(skills.broken.contains("notes"), "{:?}", skills.broken);
    }
}
