//! The one-line headline of a blocked call (`error` of [`super::blocked_message`]): what kind
//! of problem blocked it, read from its issues' `expected`, so a caller is not told "the
//! arguments do not match the tool's schema" when the tool's server is down, a path leaves the
//! workspace or a skill is out of bounds. The `expected` texts the kinds are told by are the
//! constants here (and in `paths`), used where those issues are raised.
//!
//! | first issue                                        | headline                                                                    |
//! |----------------------------------------------------|-----------------------------------------------------------------------------|
//! | the tool is listed but its source is down          | `tool call blocked: the tool is unavailable`                                |
//! | the tool is not in the caller's inventory          | `tool call blocked: the tool is not available to this caller`               |
//! | a path outside the workspace (or refused)          | `tool call blocked: a path is outside the workspace or not allowed`         |
//! | a skill, or a file of one, the agent may not use   | `tool call blocked: the call reaches outside the skills the agent may use`  |
//! | anything else (schema, JSON, a tool's own checks)  | `tool call blocked: the arguments do not match the tool's schema`           |

use keel_types::Issue;

use crate::paths::{EXPECTED_PATH, EXPECTED_WRITABLE_PATH};

/// `expected` of the issue of a tool the caller cannot call (followed by the tool list).
pub const EXPECTED_TOOL: &str = "one of the agent's tools";
/// `expected` of a skill the agent may use.
pub const EXPECTED_SKILL: &str = "a skill the agent may use";
/// `expected` of a path inside a skill's folder.
pub const EXPECTED_SKILL_PATH: &str = "a path inside the skill's folder";
/// `expected` of a script of a skill.
pub const EXPECTED_SKILL_SCRIPT: &str = "a file under the skill's scripts/ folder";

/// The message of the issue of a listed tool whose source is down.
pub fn unavailable_message(tool: &str, why: &str) -> String {
    format!("tool `{tool}` is unavailable: {why}")
}

/// The headline of a call blocked by `issues`.
pub fn headline(issues: &[Issue]) -> &'static str {
    kind(issues).0
}

/// What a caller of a call blocked by `issues` can do about it.
pub fn hint(issues: &[Issue]) -> &'static str {
    kind(issues).1
}

fn kind(issues: &[Issue]) -> (&'static str, &'static str) {
    let Some(first) = issues.first() else {
        return (SCHEMA, SCHEMA_HINT);
    };
    let expected = first.expected.as_str();
    if expected.starts_with(EXPECTED_TOOL) {
        return match first.message.contains("` is unavailable: ") {
            true => (
                "tool call blocked: the tool is unavailable",
                "the tool's source is down (see `issues`); try again later or use another tool",
            ),
            false => (
                "tool call blocked: the tool is not available to this caller",
                "call one of the tools listed in `issues`",
            ),
        };
    }
    if expected == EXPECTED_PATH || expected == EXPECTED_WRITABLE_PATH {
        return (
            "tool call blocked: a path is outside the workspace or not allowed",
            "use a path relative to the workspace root, inside it",
        );
    }
    if [EXPECTED_SKILL, EXPECTED_SKILL_PATH, EXPECTED_SKILL_SCRIPT].contains(&expected) {
        return (
            "tool call blocked: the call reaches outside the skills the agent may use",
            "name a skill the agent may use, and a file inside its folder",
        );
    }
    (SCHEMA, SCHEMA_HINT)
}

const SCHEMA: &str = "tool call blocked: the arguments do not match the tool's schema";
const SCHEMA_HINT: &str = "fix the arguments listed in `issues` and call the tool again";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::{self, Access};

    fn issue(expected: &str, message: &str) -> Issue {
        Issue {
            path: String::new(),
            expected: expected.to_owned(),
            found: "x".to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn each_kind_of_block_has_its_own_headline() {
        let unavailable = issue(
            &format!("{EXPECTED_TOOL}: mcp__files__read"),
            &unavailable_message("mcp__files__read", "MCP server `files` is down: exited"),
        );
        assert_eq!(
            headline(&[unavailable]),
            "tool call blocked: the tool is unavailable"
        );
        let unknown = issue(
            &format!("{EXPECTED_TOOL}: read_file"),
            "tool `shell` is not available to this agent",
        );
        assert_eq!(
            headline(&[unknown]),
            "tool call blocked: the tool is not available to this caller"
        );
        let root = tempfile::tempdir().unwrap();
        let escape = paths::issue(root.path(), "/path", "../outside.txt", Access::Read).unwrap();
        assert_eq!(
            headline(&[escape]),
            "tool call blocked: a path is outside the workspace or not allowed"
        );
        let write = paths::issue(root.path(), "/path", "/etc/passwd", Access::Write).unwrap();
        assert_eq!(
            headline(&[write]),
            "tool call blocked: a path is outside the workspace or not allowed"
        );
        for expected in [EXPECTED_SKILL, EXPECTED_SKILL_PATH, EXPECTED_SKILL_SCRIPT] {
            assert_eq!(
                headline(&[issue(expected, "no")]),
                "tool call blocked: the call reaches outside the skills the agent may use"
            );
        }
        let schema = issue("integer", "\"a\" is not of type \"integer\"");
        assert_eq!(headline(&[schema]), SCHEMA);
        assert_eq!(headline(&[]), SCHEMA);
    }
}
