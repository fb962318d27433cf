//! Agents' skills against the skills the scan found: every `skills` entry names a skill (or is
//! a glob matching at least one), every `alwaysOnSkills` entry is a skill the agent lists. A
//! skill left out for its own problems (`broken`) is not also reported as unknown: its problem
//! is the error.

use std::collections::{BTreeMap, BTreeSet};

use super::strings;
use crate::Diagnostic;
use crate::documents::{Documents, Kind};
use crate::mcp::has_glob_chars;
use crate::skills::{Skill, glob_matches};
use crate::suggest::{closest, list};

pub(crate) fn check_agent_skills(
    docs: &Documents,
    skills: &BTreeMap<String, Skill>,
    broken: &BTreeSet<String>,
    out: &mut Vec<Diagnostic>,
) {
    let known = || skills.keys().map(String::as_str);
    let hint = |name: &str| match (closest(name, known(), 2), skills.is_empty()) {
        (Some(near), _) => format!("did you mean `{near}`?"),
        (None, true) => {
            "no skills were found; add a folder with a SKILL.md under resources/skills/".into()
        }
        (None, false) => format!("the skills are {}", list(known())),
    };
    for doc in docs.list.iter().filter(|d| d.kind == Kind::Agent) {
        let Some(spec) = doc.spec.as_ref() else {
            continue;
        };
        let listed = strings(spec.get("skills"));
        for (entry, node) in &listed {
            let matches = match has_glob_chars(entry) {
                true => skills
                    .keys()
                    .chain(broken)
                    .any(|name| glob_matches(entry, name)),
                false => skills.contains_key(*entry) || broken.contains(*entry),
            };
            if !matches {
                let message = match has_glob_chars(entry) {
                    true => format!("`{entry}` matches no skill of this workspace"),
                    false => format!("unknown skill `{entry}`"),
                };
                out.push(node.loc.error(message, Some(hint(entry))));
            }
        }
        for (entry, node) in strings(spec.get("alwaysOnSkills")) {
            if broken.contains(entry) {
                continue;
            }
            if !skills.contains_key(entry) {
                out.push(
                    node.loc
                        .error(format!("unknown skill `{entry}`"), Some(hint(entry))),
                );
                continue;
            }
            let covered = listed
                .iter()
                .any(|(l, _)| *l == entry || (has_glob_chars(l) && glob_matches(l, entry)));
            if !covered {
                out.push(node.loc.error(
                    format!("always-on skill `{entry}` is not in the agent's `skills`"),
                    Some(format!("add `{entry}` to `skills`")),
                ));
            }
        }
    }
}
