//! What skills add to a run's start: `cargo bench -p keel-runtime --bench skill_prompt`
//! (`KEEL_BENCH_SKILLS=N`, default 1000; `KEEL_BENCH_DIR` for where the folders go).
//!
//! Writes N skills in the public SKILL.md format, loads the workspace (the scan), then times
//! the skills part of a run's start — the catalogue of an agent that may use every skill, one
//! always-on body and one `$mention` — first uncached (after a rescan), then cached, many
//! times; and the background check for changes (`SkillLibrary::refresh` with nothing changed).
//! Prints medians.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_runtime::skills::SkillCache;
use keel_workspace::{LoadOptions, Workspace};

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let count: usize = std::env::var("KEEL_BENCH_SKILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let base = std::env::var_os("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let body = "Follow these steps carefully.\n".repeat(100);
    for i in 0..count {
        let name = format!("skill-{i:05}");
        let folder = dir.path().join("resources/skills").join(&name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: Skill number {i}, for the benchmark. Use it when asked about topic {i}.\n---\n# {name}\n\n{body}"
            ),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/keel.yaml"),
        "apiVersion: keel/v1\nkind: Model\nmetadata: { name: m }\nspec: { provider: scripted, script: script.yaml }\n---\n\
         apiVersion: keel/v1\nkind: Agent\nmetadata: { name: a }\nspec: { model: m, skills: [\"*\"], alwaysOnSkills: [skill-00000] }\n",
    )
    .unwrap();
    let started = Instant::now();
    let workspace = Workspace::load_with(dir.path(), &LoadOptions::default()).unwrap();
    let load = started.elapsed();
    let agent = workspace.agents["a"].clone();
    let input = "Please handle topic 7 with $skill-00007.";

    let mut uncached = Vec::new();
    for _ in 0..5 {
        workspace.skills.rescan();
        let cache = SkillCache::default();
        let started = Instant::now();
        let prompt = cache.prompt(&workspace, "a", &agent, input).unwrap();
        uncached.push(started.elapsed());
        assert_eq!(prompt.messages.len(), 3);
    }
    let cache = SkillCache::default();
    cache.prompt(&workspace, "a", &agent, input).unwrap();
    let mut cached = Vec::new();
    for _ in 0..10_000 {
        let started = Instant::now();
        let prompt = cache.prompt(&workspace, "a", &agent, input).unwrap();
        cached.push(started.elapsed());
        assert_eq!(prompt.events.len(), 3);
    }
    let mut checks = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        assert!(workspace.skills.refresh().is_none());
        checks.push(started.elapsed());
    }
    println!(
        "{count} skills: workspace load (scan) {:.1} ms; a run's skills (catalogue + 2 bodies): \
         uncached median {:.0} µs, cached median {:.1} µs; background change check median {:.2} ms",
        load.as_secs_f64() * 1e3,
        median(uncached),
        median(cached),
        median(checks) / 1e3,
    );
}
