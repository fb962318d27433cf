//! The invariants of ARCHITECTURE.md that are about dependency edges, checked against
//! `cargo metadata`: the workspace crates depend on each other exactly as [`EDGES`] says (and
//! as the edge list in ARCHITECTURE.md shows), and a forbidden edge anywhere in the resolved
//! graph fails.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// Every workspace crate and the workspace crates it may depend on (normal dependencies,
/// optional ones included; dev-dependencies are free). Exact: an edge missing here fails, and so
/// does an edge here that no manifest declares any more. ARCHITECTURE.md draws the same list.
const EDGES: &[(&str, &[&str])] = &[
    (
        "keel-cli",
        &[
            "keel",
            "keel-server",
            "keel-store",
            "keel-workspace",
            "keel-types",
        ],
    ),
    (
        "keel-server",
        &["keel", "keel-mcp", "keel-workspace", "keel-types"],
    ),
    (
        "keel",
        &[
            "keel-adapters",
            "keel-runtime",
            "keel-models",
            "keel-mcp",
            "keel-tools",
            "keel-store",
            "keel-workspace",
            "keel-types",
        ],
    ),
    (
        "keel-adapters",
        &["keel-runtime", "keel-mcp", "keel-tools", "keel-types"],
    ),
    (
        "keel-runtime",
        &["keel-tools", "keel-workspace", "keel-types"],
    ),
    ("keel-mcp", &["keel-tools", "keel-workspace", "keel-types"]),
    ("keel-models", &["keel-workspace", "keel-types"]),
    ("keel-tools", &["keel-workspace", "keel-types"]),
    ("keel-store", &["keel-types"]),
    ("keel-workspace", &["keel-types"]),
    ("keel-types", &[]),
    ("keel-test-support", &["keel-types"]),
];

type Edges = BTreeMap<String, BTreeSet<String>>;

/// `cargo metadata` (offline, format 1) of the workspace with `extra` arguments.
fn cargo_metadata(extra: &[&str]) -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn table() -> Edges {
    EDGES
        .iter()
        .map(|(krate, deps)| {
            let deps = deps.iter().map(|d| (*d).to_owned()).collect();
            ((*krate).to_owned(), deps)
        })
        .collect()
}

/// The workspace-internal normal dependencies each workspace crate declares, read from the
/// manifests (`cargo metadata --no-deps`), whatever features are on.
fn declared_edges() -> Edges {
    let meta = cargo_metadata(&["--no-deps"]);
    let packages = meta["packages"].as_array().unwrap();
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|name| members.contains(name))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// The edge list drawn in ARCHITECTURE.md: the fenced block after the `edges` marker, one
/// crate a line, `crate → dep, dep` (a crate with no arrow depends on no workspace crate);
/// `#` starts a comment.
fn drawn_edges() -> Edges {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).unwrap();
    let marker = "<!-- edges: checked by crates/keel/tests/it/architecture.rs -->";
    let after = text
        .split_once(marker)
        .expect("ARCHITECTURE.md has the edges marker")
        .1;
    let block = after
        .trim_start()
        .strip_prefix("```text\n")
        .expect("a ```text block follows the edges marker");
    let block = block.split_once("```").expect("the block is closed").0;
    block
        .lines()
        .map(|line| line.split_once('#').map_or(line, |(code, _)| code))
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let crate_names = |part: &str| -> Vec<String> {
                part.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .filter(|word| *word == "keel" || word.starts_with("keel-"))
                    .map(str::to_owned)
                    .collect()
            };
            let (from, to) = line.split_once('→').unwrap_or((line, ""));
            let from = crate_names(from);
            assert_eq!(from.len(), 1, "one crate left of the arrow in {line:?}");
            (from[0].clone(), crate_names(to).into_iter().collect())
        })
        .collect()
}

/// What `expected` has that `actual` lacks, as `crate → dep` lines.
fn missing(expected: &Edges, actual: &Edges) -> Vec<String> {
    let none = BTreeSet::new();
    let mut lines = Vec::new();
    for (krate, deps) in expected {
        if !actual.contains_key(krate) {
            lines.push(format!("{krate} (the crate)"));
        }
        let have = actual.get(krate).unwrap_or(&none);
        lines.extend(deps.difference(have).map(|d| format!("{krate} → {d}")));
    }
    lines
}

#[test]
fn workspace_crates_depend_on_each_other_exactly_as_the_table_says() {
    let (table, declared) = (table(), declared_edges());
    let unlisted = missing(&declared, &table);
    let stale = missing(&table, &declared);
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "edges not in EDGES (add them only if ARCHITECTURE.md allows them): {unlisted:?}; \
         edges in EDGES no manifest declares any more (remove them): {stale:?}"
    );
}

#[test]
fn the_architecture_map_draws_exactly_the_table() {
    let (table, drawn) = (table(), drawn_edges());
    let undrawn = missing(&table, &drawn);
    let extra = missing(&drawn, &table);
    assert!(
        undrawn.is_empty() && extra.is_empty(),
        "ARCHITECTURE.md's edge list lacks {undrawn:?} and draws {extra:?} that EDGES does not have"
    );
}

/// Resolved normal (non-dev, non-build) dependency graph of the workspace: package name →
/// names of the packages it depends on.
fn graph() -> HashMap<String, Vec<String>> {
    // Only this platform's packages: they are the ones the build downloaded, so this works
    // offline.
    let meta = cargo_metadata(&["--filter-platform", &host_triple()]);
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let name = names[node["id"].as_str().unwrap()].to_owned();
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| names[d["pkg"].as_str().unwrap()].to_owned())
            .collect();
        graph.insert(name, deps);
    }
    graph
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

/// Every package `root` depends on, directly or not, through normal dependencies.
fn closure(graph: &HashMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_owned()];
    while let Some(name) = stack.pop() {
        for dep in graph.get(&name).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                stack.push(dep.clone());
            }
        }
    }
    seen
}

fn assert_forbidden(
    graph: &HashMap<String, Vec<String>>,
    krate: &str,
    forbidden: &[&str],
    why: &str,
) {
    let deps = closure(graph, krate);
    let found: Vec<_> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
    assert!(
        found.is_empty(),
        "{krate} must not depend on {found:?}: {why}"
    );
}

#[test]
fn types_crate_stays_dependency_light() {
    let g = graph();
    assert_forbidden(
        &g,
        "keel-types",
        &[
            "tokio",
            "reqwest",
            "hyper",
            "axum",
            "sqlx",
            "rusqlite",
            "libsqlite3-sys",
            "tokio-postgres",
            "keel-workspace",
            "keel-runtime",
        ],
        "the types crate is the shared vocabulary: serde and ids only, no runtime, HTTP or database",
    );
}

#[test]
fn kernel_knows_no_surface_and_no_concrete_provider() {
    let g = graph();
    assert_forbidden(
        &g,
        "keel-runtime",
        &[
            "keel-cli",
            "clap",
            "axum",
            "keel-models",
            "keel-store",
            "keel",
        ],
        "the kernel depends on ports; surfaces (the CLI, HTTP servers) and concrete providers and stores depend on it",
    );
}

#[test]
fn workspace_loader_and_gateway_know_no_runtime() {
    let g = graph();
    for krate in ["keel-workspace", "keel-tools", "keel-models", "keel-store"] {
        assert_forbidden(
            &g,
            krate,
            &["keel-runtime", "keel", "keel-cli", "axum"],
            "building blocks must not depend on the kernel or the surfaces",
        );
    }
}

#[test]
fn only_keel_mcp_speaks_rmcp() {
    // The MCP SDK is keel-mcp's business: the rest of Keel sees keel-mcp's own types, so no
    // other crate may even name rmcp.
    let meta = cargo_metadata(&["--no-deps"]);
    let speakers: Vec<&str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["name"] == "rmcp" && d["kind"].is_null())
        })
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(speakers, ["keel-mcp"]);
}

#[test]
fn the_graph_is_read_correctly() {
    // Guards the checks above against passing vacuously on an empty or misread graph.
    let g = graph();
    let cli = closure(&g, "keel-cli");
    for expected in ["keel", "keel-runtime", "keel-types", "tokio", "clap"] {
        assert!(
            cli.contains(expected),
            "keel-cli should depend on {expected}"
        );
    }
    assert!(closure(&g, "keel-models").contains("reqwest"));
}

/// Every `.rs` file below `dir`, read.
fn sources_below(dir: &std::path::Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources_below(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// Whether `text` names `ident` as a whole word (a path segment, an `extern crate`).
fn names_word(text: &str, ident: &str) -> bool {
    text.match_indices(ident).any(|(at, _)| {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let before = text[..at].chars().next_back().is_none_or(|c| !word(c));
        let after = text[at + ident.len()..]
            .chars()
            .next()
            .is_none_or(|c| !word(c));
        before && after
    })
}

#[test]
fn every_dev_dependency_is_used_and_not_a_normal_one_again() {
    // cargo-machete (`.ci/run`) checks the normal dependencies; this checks the
    // dev-dependencies: each is named by some source of its crate (tests, benches, examples,
    // `#[cfg(test)]` code), and none repeats a normal dependency (those are in scope for
    // tests already) with no feature of its own.
    let meta = cargo_metadata(&["--no-deps"]);
    let mut problems = Vec::new();
    let mut checked = 0;
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let root = std::path::Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap();
        let mut sources = Vec::new();
        for dir in ["src", "tests", "benches", "examples"] {
            sources_below(&root.join(dir), &mut sources);
        }
        let deps = package["dependencies"].as_array().unwrap();
        let features = |dep: &Value| -> (BTreeSet<String>, bool) {
            let listed = dep["features"].as_array().into_iter().flatten();
            let listed = listed.map(|f| f.as_str().unwrap().to_owned()).collect();
            (listed, dep["uses_default_features"] == true)
        };
        let normal: BTreeMap<&str, (BTreeSet<String>, bool)> = deps
            .iter()
            // An optional dependency is not there for every test build.
            .filter(|d| d["kind"].is_null() && d["optional"] != true)
            .map(|d| (d["name"].as_str().unwrap(), features(d)))
            .collect();
        for dep in deps.iter().filter(|d| d["kind"] == "dev") {
            checked += 1;
            let dep_name = dep["name"].as_str().unwrap();
            let ident = dep["rename"].as_str().unwrap_or(dep_name).replace('-', "_");
            if !sources.iter().any(|text| names_word(text, &ident)) {
                problems.push(format!("{name}: dev-dependency {dep_name} is not used"));
            }
            let (dev_features, dev_default) = features(dep);
            let repeats = normal.get(dep_name).is_some_and(|(listed, default)| {
                dev_features.is_subset(listed) && (*default || !dev_default)
            });
            if repeats {
                problems.push(format!(
                    "{name}: dev-dependency {dep_name} repeats a normal dependency"
                ));
            }
        }
    }
    assert!(
        checked > 20,
        "the manifests were read ({checked} dev-dependencies)"
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_word_check_sees_whole_words_only() {
    assert!(names_word("use demo_crate::Thing;", "demo_crate"));
    assert!(!names_word("use my_demo_crate::Thing;", "demo_crate"));
    assert!(!names_word("let demo_crates = 1;", "demo_crate"));
}
