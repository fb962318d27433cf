//! Structure rules of ARCHITECTURE.md that are about the source text, checked on every crate:
//! no two modules import each other, no source file over 800 lines, no function that needs
//! `allow` of clippy's lint against too many arguments.
//!
//! Imports are read from the text (`crate::…` and `super::…` paths, including grouped
//! `use crate::{a, b::c}`) — enough to see which module reaches for which. A module may use
//! its ancestors and its own children; what must not happen is two *siblings* (two modules
//! under the same parent, e.g. two top-level modules of a crate) depending on each other,
//! directly or round a longer circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a source file may grow before it must be split.
const MAX_LINES: usize = 800;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The module path of a file under `src/`: `lib.rs` → `[]`, `a/mod.rs` and `a.rs` → `[a]`,
/// `a/b.rs` → `[a, b]`. Binaries (`main.rs`, `bin/`) are roots of their own.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// The paths a file names after `crate::` or `super::`, resolved to absolute segment lists.
fn referenced_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    // `super` in `a/b.rs` is `a`; in `a/b/mod.rs` (module `a::b`) it is `a` too.
    let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (keyword, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
            let mut rest = code;
            while let Some(at) = rest.find(keyword) {
                let before = rest[..at].chars().last();
                rest = &rest[at + keyword.len()..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue; // e.g. `keel_crate::`
                }
                for tail in expand(rest) {
                    let mut path = base.clone();
                    path.extend(tail);
                    found.push(path);
                }
            }
        }
    }
    found
}

/// The paths at the start of `text`: `a::b::C` → `[[a, b, C]]`, `{a, b::c}` → `[[a], [b, c]]`.
fn expand(text: &str) -> Vec<Vec<String>> {
    if let Some(group) = text.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut current = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        items.push(current);
        return items
            .iter()
            .flat_map(|item| expand(item.trim()))
            .filter(|p| !p.is_empty())
            .collect();
    }
    let path: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let segments: Vec<String> = path
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    vec![segments]
}

/// Sibling dependencies: parent module → (child → children it uses).
type Edges = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

fn sibling_edges(src: &Path) -> Edges {
    let files = rust_files(src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(src, f)).collect();
    let mut edges = Edges::new();
    for file in &files {
        if file.strip_prefix(src).unwrap().starts_with("bin") {
            continue;
        }
        let from = module_path(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for to in referenced_paths(&text, &from) {
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            // An ancestor (or the module itself) or one of its own descendants.
            if common == from.len() || common == to.len() {
                continue;
            }
            let parent = from[..common].to_vec();
            let target_module: Vec<String> = to[..=common].to_vec();
            if !modules.contains(&target_module) {
                continue; // an item of the common ancestor, not a sibling module
            }
            edges
                .entry(parent)
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .insert(to[common].clone());
        }
    }
    edges
}

/// A circle in `graph`, if there is one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut circle = stack[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, stack, done) {
                return Some(circle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut circles = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = krate.unwrap().path();
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        for (parent, graph) in sibling_edges(&src) {
            if let Some(circle) = find_circle(&graph) {
                let name = krate.file_name().unwrap().to_string_lossy().into_owned();
                let prefix = match parent.is_empty() {
                    true => name,
                    false => format!("{name}::{}", parent.join("::")),
                };
                circles.push(format!("{prefix}: {}", circle.join(" → ")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules in a circle:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_circle_check_sees_grouped_and_super_imports() {
    let module = vec!["agent_loop".to_owned(), "tools".to_owned()];
    let paths = referenced_paths(
        "use crate::{emitter::Emitter, governance};\nuse super::{AgentRun, End};\nlet x = crate::kernel::f(); // crate::ignored",
        &module,
    );
    let rendered: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        rendered,
        [
            "emitter::Emitter",
            "governance",
            "agent_loop::AgentRun",
            "agent_loop::End",
            "kernel::f"
        ]
    );
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(find_circle(&graph).unwrap(), ["a", "b", "c", "a"]);
}

#[test]
fn no_source_file_is_over_800_lines() {
    let long: Vec<String> = rust_files(&crates_dir())
        .into_iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter_map(|file| {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", file.display()))
        })
        .collect();
    assert!(long.is_empty(), "files to split:\n{}", long.join("\n"));
}

#[test]
fn no_function_takes_too_many_arguments() {
    let needle = ["too", "many", "arguments"].join("_");
    let offenders: Vec<String> = rust_files(&crates_dir())
        .into_iter()
        .filter(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .contains(&format!("clippy::{needle}"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "group the arguments into a struct instead:\n{}",
        offenders.join("\n")
    );
}
