//! What a skill holds beyond its front matter: the body (read when it is injected), files
//! under its folder (`read_skill_resource`, contained to the folder), scripts under
//! `scripts/`, and `$skill-name` mentions in a request's input.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::Skill;

/// The largest `SKILL.md` whose body is read.
pub const MAX_SKILL_FILE: u64 = 1024 * 1024;

/// Why a skill's file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SkillFileError {
    /// The path is absolute.
    #[error("`{0}` is absolute; give a path inside the skill's folder, e.g. references/guide.md")]
    Absolute(String),
    /// The path leaves the skill's folder (`..`, or a symbolic link pointing out of it).
    #[error("`{0}` is outside the skill's folder")]
    Escapes(String),
    /// Nothing is there.
    #[error("the skill has no file `{0}`")]
    NotFound(String),
    /// A folder, device or other non-file.
    #[error("`{0}` is not a file")]
    NotAFile(String),
    /// Over the size cap.
    #[error("`{path}` has {size} bytes; at most {cap} are read")]
    TooLarge { path: String, size: u64, cap: u64 },
    /// Not UTF-8 text.
    #[error("`{path}` is not text ({size} bytes of binary data)")]
    Binary { path: String, size: u64 },
    /// A script outside `scripts/`.
    #[error("`{0}` is not under the skill's scripts/ folder")]
    NotAScript(String),
    /// Reading failed.
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The skill's instructions: its `SKILL.md` after the front matter.
pub fn skill_body(skill: &Skill) -> Result<String, SkillFileError> {
    let text = read_text(&skill.dir.join("SKILL.md"), "SKILL.md", MAX_SKILL_FILE)?;
    Ok(strip_front_matter(&text).trim().to_owned())
}

/// `body` within `budget` characters: whole when it fits, otherwise cut at a line end where
/// possible, followed by a note saying how much was left out and how to read the rest.
/// Returns the text and whether it was cut.
pub fn fit_body(skill: &str, body: &str, budget: usize) -> (String, bool) {
    let total = body.chars().count();
    if total <= budget {
        return (body.to_owned(), false);
    }
    let cut = body
        .char_indices()
        .nth(budget)
        .map_or(body.len(), |(at, _)| at);
    let kept = &body[..cut];
    // Whole lines read better, unless that loses more than a fifth of the budget.
    let kept = match kept.rfind('\n') {
        Some(at) if at >= cut - cut / 5 => &kept[..at],
        _ => kept,
    };
    let shown = kept.chars().count();
    let text = format!(
        "{kept}\n\n[Keel cut this skill's instructions at {shown} of {total} characters \
         (skills.bodyChars). Read the rest with read_skill_resource {{\"skill\": \"{skill}\", \
         \"path\": \"SKILL.md\"}}.]"
    );
    (text, true)
}

fn strip_front_matter(text: &str) -> &str {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return text,
    }
    let mut at = text.find('\n').map_or(text.len(), |i| i + 1);
    for line in lines {
        at += line.len();
        if line.trim_end() == "---" {
            return &text[at..];
        }
    }
    ""
}

/// The real path of `relative` inside the skill's folder: relative, without `..`, and —
/// symbolic links resolved — still inside the folder.
pub fn resolve_in_skill(skill: &Skill, relative: &str) -> Result<PathBuf, SkillFileError> {
    let path = Path::new(relative);
    if path.is_absolute() || relative.starts_with('~') {
        return Err(SkillFileError::Absolute(relative.into()));
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(SkillFileError::Escapes(relative.into()));
    }
    let io = |source| SkillFileError::Io {
        path: relative.into(),
        source,
    };
    let base = skill.dir.canonicalize().map_err(io)?;
    let real = match base.join(path).canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SkillFileError::NotFound(relative.into()));
        }
        Err(e) => return Err(io(e)),
    };
    if !real.starts_with(&base) {
        return Err(SkillFileError::Escapes(relative.into()));
    }
    Ok(real)
}

/// The files of a skill's folder besides its `SKILL.md` (`references/`, `scripts/`,
/// `assets/`, …): paths relative to the folder, with their sizes, sorted. Symbolic links are
/// not followed; at most 1,000 files, 8 levels deep.
pub fn skill_files(skill: &Skill) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = walkdir::WalkDir::new(&skill.dir)
        .max_depth(8)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_file() && entry.depth() > 0)
        .filter_map(|entry| {
            let relative = entry.path().strip_prefix(&skill.dir).ok()?;
            let shown = relative.to_string_lossy().into_owned();
            let size = entry.metadata().map_or(0, |m| m.len());
            (shown != "SKILL.md").then_some((shown, size))
        })
        .take(1000)
        .collect();
    files.sort();
    files
}

/// A text file of the skill's folder, at most `cap` bytes.
pub fn read_skill_file(skill: &Skill, relative: &str, cap: u64) -> Result<String, SkillFileError> {
    let real = resolve_in_skill(skill, relative)?;
    read_text(&real, relative, cap)
}

/// A script of the skill: a file under its `scripts/` folder.
pub fn skill_script(skill: &Skill, relative: &str) -> Result<PathBuf, SkillFileError> {
    let real = resolve_in_skill(skill, relative)?;
    let scripts = resolve_in_skill(skill, "scripts")
        .map_err(|_| SkillFileError::NotAScript(relative.into()))?;
    if !real.starts_with(&scripts) || real == scripts {
        return Err(SkillFileError::NotAScript(relative.into()));
    }
    if !real.is_file() {
        return Err(SkillFileError::NotAFile(relative.into()));
    }
    Ok(real)
}

fn read_text(real: &Path, shown: &str, cap: u64) -> Result<String, SkillFileError> {
    let io = |source| SkillFileError::Io {
        path: shown.into(),
        source,
    };
    let file = std::fs::File::open(real).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SkillFileError::NotAFile(shown.into()));
    }
    if meta.len() > cap {
        return Err(SkillFileError::TooLarge {
            path: shown.into(),
            size: meta.len(),
            cap,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap + 1).read_to_end(&mut bytes).map_err(io)?;
    let size = bytes.len() as u64;
    if size > cap {
        return Err(SkillFileError::TooLarge {
            path: shown.into(),
            size,
            cap,
        });
    }
    String::from_utf8(bytes).map_err(|_| SkillFileError::Binary {
        path: shown.into(),
        size,
    })
}

/// A `$skill-name` in a request's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The name, without the `$`.
    pub name: String,
    /// The byte offset of the `$`.
    pub at: usize,
}

/// The `$skill-name` mentions of `text`, first occurrence of each name only, in order.
///
/// A mention is a `$` at the start of a word followed by a lowercase letter, then lowercase
/// letters, digits and hyphens, and not followed by a letter, digit or `_` (so `$HOME`,
/// `$5` and `$my_var` are not mentions). Text in code — fenced blocks and `inline` spans —
/// is not read, and `\$name` is an escaped, literal `$name`.
pub fn mentions(text: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    let mut offset = 0;
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
        } else if !fenced {
            line_mentions(line, offset, &mut found);
        }
        offset += line.len();
    }
    found
}

fn line_mentions(line: &str, offset: usize, found: &mut Vec<Mention>) {
    let bytes = line.as_bytes();
    let mut in_code = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b'$' if !in_code => {
                let before = i.checked_sub(1).map(|j| bytes[j]);
                let starts_word =
                    before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'$' || b == b'\\'));
                let end = i
                    + 1
                    + bytes[i + 1..]
                        .iter()
                        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || **b == b'-')
                        .count();
                let name = line[i + 1..end].trim_end_matches('-');
                let first_ok = bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase);
                let after_ok = bytes
                    .get(end)
                    .is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
                if starts_word && first_ok && after_ok && !found.iter().any(|m| m.name == name) {
                    found.push(Mention {
                        name: name.to_owned(),
                        at: offset + i,
                    });
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        mentions(text).into_iter().map(|m| m.name).collect()
    }

    #[test]
    fn mentions_are_words_outside_code() {
        assert_eq!(
            names("use $release-notes, then $deploy."),
            ["release-notes", "deploy"]
        );
        assert_eq!(names("$a and $a again"), ["a"]);
        assert_eq!(
            names("costs $5, home is $HOME, var $my_var, a$b"),
            Vec::<String>::new()
        );
        assert_eq!(names("`$inline` and \\$escaped"), Vec::<String>::new());
        assert_eq!(names("```\necho $fenced\n```\n$after"), ["after"]);
        assert_eq!(names("trailing $dash- here"), ["dash"]);
    }

    #[test]
    fn the_body_follows_the_front_matter() {
        assert_eq!(strip_front_matter("---\nname: x\n---\nBody\n"), "Body\n");
        assert_eq!(strip_front_matter("no front matter"), "no front matter");
        assert_eq!(strip_front_matter("---\nunclosed"), "");
    }
}
