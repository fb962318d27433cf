//! Skills on disk (`docs/workspace.md#skills`): folders holding a `SKILL.md` — YAML front
//! matter with `name` and `description`, then a Markdown body — plus optional `references/`,
//! `scripts/` and `assets/`, in the format other agent tools already use.
//!
//! [`scan_skills`] reads only each file's front matter (at most [`MAX_FRONT_MATTER`] bytes,
//! never the body), validates it, and reports every problem with file:line:column. The same
//! name in two roots is an error naming both files, unless the root that comes first is
//! declared to override the others — then the override is kept and said. The same name in two
//! folders of one root is an error naming both files too. A broken skill is left out of the
//! scan's skills and its name kept in [`SkillScan::broken`], so an agent naming it gets no
//! second, misleading "unknown skill" error.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::Diagnostic;
use crate::mcp::has_glob_chars;
use crate::yaml::{Loc, Source, parse_documents};

mod files;
mod library;

pub use files::{
    MAX_SKILL_FILE, Mention, SkillFileError, fit_body, mentions, read_skill_file, resolve_in_skill,
    skill_body, skill_files, skill_script,
};
pub use library::{SkillLibrary, SkillSet};

/// The tools an agent with skills is given: load a skill's instructions, read its files, run
/// its scripts (which asks a person by default: it is not read-only).
pub const SKILL_TOOLS: [&str; 3] = ["load_skill", "read_skill_resource", "run_skill_script"];
/// The tool with which an agent proposes a new skill; only agents that list it have it.
pub const PROPOSE_SKILL_TOOL: &str = "propose_skill";

/// The most bytes of a `SKILL.md` read to find its front matter.
pub const MAX_FRONT_MATTER: usize = 16 * 1024;
/// The longest skill name.
pub const MAX_SKILL_NAME: usize = 64;
/// The longest description.
pub const MAX_SKILL_DESCRIPTION: usize = 1024;

/// A folder of skill folders, in precedence order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRoot {
    /// The folder (absolute, or relative to the workspace).
    pub path: PathBuf,
    /// Its skills win over same-named skills of the roots after it.
    pub overrides: bool,
}

/// One skill, as its front matter describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The skill's folder.
    pub dir: PathBuf,
    /// Its `SKILL.md`, as shown to people (relative to the workspace when inside it).
    pub file: PathBuf,
    /// Front matter fields Keel does not read (kept, e.g. `license`, `allowed-tools`).
    pub extra: BTreeMap<String, Value>,
}

/// What a scan found: the valid skills by name, the problems, the names of the skills left
/// out for them, and the skills another root's override hid (`(winner, hidden)` files), so
/// nothing disappears without a word.
#[derive(Debug, Default)]
pub struct SkillScan {
    pub skills: BTreeMap<String, Skill>,
    pub diagnostics: Vec<Diagnostic>,
    /// The names of skills left out because of a problem: the folder's name and, when the
    /// front matter declares one, that name.
    pub broken: BTreeSet<String>,
    pub overridden: Vec<(PathBuf, PathBuf)>,
}

/// Scans `roots` (relative ones from `workspace`), each folder's direct sub-folders with a
/// `SKILL.md`. A root that does not exist has no skills. A name found in several roots is an
/// error naming every file, unless exactly one of them is in a root that overrides.
pub fn scan_skills(workspace: &Path, roots: &[SkillRoot]) -> SkillScan {
    let mut scan = SkillScan::default();
    // Every valid definition of each name: (the skill, whether its root overrides).
    let mut found: BTreeMap<String, Vec<(Skill, bool)>> = BTreeMap::new();
    for root in roots {
        let dir = match root.path.is_absolute() {
            true => root.path.clone(),
            false => workspace.join(&root.path),
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        folders.sort();
        // The files of this root declaring each name, valid or not.
        let mut declared: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for folder in folders {
            let shown = shown_path(workspace, &folder.join("SKILL.md"));
            let (name, skill) = read_skill(&folder, &shown, &mut scan.diagnostics);
            if let Some(name) = &name {
                declared
                    .entry(name.clone())
                    .or_default()
                    .push(shown.clone());
            }
            match skill {
                Some(skill) => found
                    .entry(skill.name.clone())
                    .or_default()
                    .push((skill, root.overrides)),
                None => {
                    scan.broken.extend(name);
                    if let Some(folder) = folder.file_name() {
                        scan.broken.insert(folder.to_string_lossy().into_owned());
                    }
                }
            }
        }
        for (name, files) in declared.into_iter().filter(|(_, f)| f.len() > 1) {
            let shown: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            scan.diagnostics.push(Diagnostic {
                file: files[0].clone(),
                line: 1,
                column: 1,
                message: format!(
                    "skill `{name}` is defined {} times in {}: {}",
                    files.len(),
                    root.path.display(),
                    shown.join(" and ")
                ),
                hint: Some(
                    "give each skill folder its own skill, named as the folder; until then \
                     none of them is used"
                        .into(),
                ),
            });
            found.remove(&name);
            scan.broken.insert(name);
        }
    }
    for (name, mut definitions) in found {
        if definitions.len() == 1 {
            let (skill, _) = definitions.remove(0);
            scan.skills.insert(name, skill);
            continue;
        }
        let overriding = definitions.iter().filter(|(_, o)| *o).count();
        if overriding == 1 {
            let at = definitions.iter().position(|(_, o)| *o).unwrap_or(0);
            let (winner, _) = definitions.remove(at);
            for (hidden, _) in definitions {
                scan.overridden.push((winner.file.clone(), hidden.file));
            }
            scan.skills.insert(name, winner);
            continue;
        }
        let files: Vec<String> = definitions
            .iter()
            .map(|(skill, _)| skill.file.display().to_string())
            .collect();
        scan.broken.insert(name.clone());
        scan.diagnostics.push(Diagnostic {
            file: definitions[0].0.file.clone(),
            line: 1,
            column: 1,
            message: format!(
                "skill `{name}` is defined {} times: {}",
                files.len(),
                files.join(" and ")
            ),
            hint: Some(match overriding {
                0 => {
                    "rename one, or set `override: true` on the root whose skill should win".into()
                }
                _ => "more than one of these roots overrides: keep `override: true` on one".into(),
            }),
        });
    }
    scan
}

fn shown_path(workspace: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(workspace)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

/// The front matter's text (with its opening `---` line, so lines count as in the file), or
/// why there is none.
fn front_matter(file: &Path) -> Result<String, String> {
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_FRONT_MATTER as u64 + 1).read_to_end(&mut head))
        .map_err(|e| format!("cannot read it: {e}"))?;
    let text = match std::str::from_utf8(&head) {
        Ok(text) => text,
        // A cut at the cap may split a character: keep the valid part.
        Err(e) if e.valid_up_to() > 0 => {
            std::str::from_utf8(&head[..e.valid_up_to()]).map_err(|e| e.to_string())?
        }
        Err(e) => return Err(format!("it is not UTF-8: {e}")),
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let mut end = match lines.next() {
        Some(first) if first.trim_end() == "---" => first.len(),
        _ => return Err("it does not start with front matter (`---`)".into()),
    };
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(text[..end].to_owned());
        }
        end += line.len();
    }
    Err(format!(
        "its front matter is not closed by `---` within {MAX_FRONT_MATTER} bytes"
    ))
}

/// Reads and checks one skill; problems go to `out`. Returns the name its front matter
/// declares (when it declares a string) and the skill when it is valid.
fn read_skill(
    folder: &Path,
    shown: &Path,
    out: &mut Vec<Diagnostic>,
) -> (Option<String>, Option<Skill>) {
    let source = Arc::new(Source {
        file: shown.to_path_buf(),
        overlay: false,
    });
    let start = Loc::start_of(&source);
    let text = match front_matter(&folder.join("SKILL.md")) {
        Ok(text) => text,
        Err(why) => {
            out.push(start.error(
                format!("SKILL.md cannot be read as a skill: {why}"),
                Some(
                    "start the file with `---`, then `name:` and `description:`, then `---`".into(),
                ),
            ));
            return (None, None);
        }
    };
    let parsed = parse_documents(&text, &source);
    if !parsed.errors.is_empty() {
        out.extend(parsed.errors);
        return (None, None);
    }
    let Some(node) = parsed
        .documents
        .into_iter()
        .next()
        .filter(|n| n.entries().is_some())
    else {
        out.push(start.error("the front matter is not a map of fields", None));
        return (None, None);
    };
    let folder_name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let before = out.len();
    let name = match node.get("name") {
        None => {
            out.push(node.loc.error(
                "missing `name`",
                Some(format!("add `name: {folder_name}` (the folder's name)")),
            ));
            None
        }
        Some(value) => match value.as_str() {
            None => {
                out.push(value.loc.error("`name` must be a string", None));
                None
            }
            Some(name) => {
                if let Some(problem) = name_problem(name) {
                    out.push(
                        value
                            .loc
                            .error(format!("invalid skill name `{name}`: {problem}"), None),
                    );
                } else if name != folder_name {
                    out.push(value.loc.error(
                        format!("skill name `{name}` differs from its folder `{folder_name}`"),
                        Some("rename the folder or the skill so they match".into()),
                    ));
                }
                Some(name.to_owned())
            }
        },
    };
    let description = match node.get("description") {
        None => {
            out.push(node.loc.error(
                "missing `description`",
                Some("say in one or two sentences what the skill does and when to use it".into()),
            ));
            None
        }
        Some(value) => match value.as_str().map(str::trim) {
            None | Some("") => {
                out.push(
                    value
                        .loc
                        .error("`description` must be non-empty text", None),
                );
                None
            }
            Some(text) if text.chars().count() > MAX_SKILL_DESCRIPTION => {
                out.push(value.loc.error(
                    format!(
                        "`description` has {} characters; at most {MAX_SKILL_DESCRIPTION}",
                        text.chars().count()
                    ),
                    None,
                ));
                None
            }
            Some(text) => Some(text.to_owned()),
        },
    };
    if out.len() > before {
        return (name, None);
    }
    let extra = node
        .entries()
        .unwrap_or_default()
        .iter()
        .filter(|e| e.key != "name" && e.key != "description")
        .map(|e| (e.key.clone(), e.value.to_json()))
        .collect();
    let (Some(name), Some(description)) = (name, description) else {
        return (None, None);
    };
    let skill = Skill {
        name: name.clone(),
        description,
        dir: folder.to_path_buf(),
        file: shown.to_path_buf(),
        extra,
    };
    (Some(name), Some(skill))
}

/// Whether an agent whose `skills` are `patterns` (names or globs) may use skill `name`.
pub fn skill_allowed(patterns: &[String], name: &str) -> bool {
    patterns
        .iter()
        .any(|pattern| match has_glob_chars(pattern) {
            true => glob_matches(pattern, name),
            false => pattern == name,
        })
}

/// [`skill_allowed`] for many names: the agent's globs compiled once.
pub fn skill_matcher(patterns: &[String]) -> impl Fn(&str) -> bool + use<> {
    let names: Vec<String> = patterns
        .iter()
        .filter(|p| !has_glob_chars(p))
        .cloned()
        .collect();
    let mut globs = globset::GlobSetBuilder::new();
    for pattern in patterns.iter().filter(|p| has_glob_chars(p)) {
        if let Ok(glob) = globset::Glob::new(pattern) {
            globs.add(glob);
        }
    }
    let globs = globs.build().unwrap_or_else(|_| globset::GlobSet::empty());
    move |name: &str| names.iter().any(|n| n == name) || globs.is_match(name)
}

/// Whether glob `pattern` matches `name` (an invalid glob matches nothing).
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    globset::Glob::new(pattern).is_ok_and(|g| g.compile_matcher().is_match(name))
}

/// What is wrong with a skill name, if anything: lowercase letters, digits and hyphens, at
/// most 64 characters.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.chars().count() > MAX_SKILL_NAME {
        return Some(format!("it has more than {MAX_SKILL_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "`{c}` is not allowed (lowercase letters, digits and `-` only)"
        ));
    }
    None
}
