//! Scanning skill folders: `cargo bench -p keel-workspace --bench skills_scan`
//! (`KEEL_BENCH_SKILLS=N`, default 1000; `KEEL_BENCH_DIR` for where the folders go, default
//! the system's temp folder). Writes N skills in the public SKILL.md format (front matter, a
//! body of a few KiB, a `references/` file), then times `scan_skills` over them several times
//! (the file system's cache warm after the first) and prints the median and the slowest.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_workspace::skills::{SkillRoot, scan_skills};

fn main() {
    let count: usize = std::env::var("KEEL_BENCH_SKILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let base = std::env::var_os("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let root = dir.path().join("resources/skills");
    let body = "Follow these steps carefully.\n".repeat(100);
    for i in 0..count {
        let name = format!("skill-{i:05}");
        let folder = root.join(&name);
        std::fs::create_dir_all(folder.join("references")).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: Skill number {i}, for the benchmark. Use it when asked about topic {i}.\nlicense: Apache-2.0\n---\n# {name}\n\n{body}"
            ),
        )
        .unwrap();
        std::fs::write(folder.join("references/notes.md"), "notes\n").unwrap();
    }
    let roots = [SkillRoot {
        path: PathBuf::from("resources/skills"),
        overrides: false,
    }];
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..11 {
        let started = Instant::now();
        let scan = scan_skills(dir.path(), &roots);
        times.push(started.elapsed());
        assert_eq!(scan.skills.len(), count);
        assert!(scan.diagnostics.is_empty());
    }
    let first = times[0];
    times.sort();
    println!(
        "scan_skills over {count} skills: first {:.1} ms, median {:.1} ms, slowest {:.1} ms ({:.1} µs per skill at the median)",
        first.as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e6 / count as f64
    );
}
