//! The invariants of ARCHITECTURE.md that are about dependency edges, checked against
//! `cargo metadata`: a forbidden edge fails this test.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// Resolved normal (non-dev, non-build) dependency graph of the workspace: package name →
/// names of the packages it depends on.
fn graph() -> HashMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Only this platform's packages: they are the ones the build downloaded, so this works
    // offline.
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host_triple(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: Value = serde_json::from_slice(&output.stdout).unwrap();
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
