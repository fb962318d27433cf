//! What the OS sandbox adds to a process start: `cargo bench -p keel-tools --bench
//! sandbox_spawn` (`KEEL_BENCH_SPAWNS=N` starts each way, default 400).
//!
//! Starts `/bin/true` in its own process group with a cleaned environment — as `shell`,
//! command tools, skill scripts and command hooks do — and waits for it, N times without a
//! sandbox and N times in the profile `keel init` gives agents (workspace-write, network deny,
//! a process limit), alternating so both see the same machine. Prints the median start-to-exit
//! time each way, the difference (target < 2 ms) and the mechanisms that were in force.
//! `KEEL_BENCH_NAMESPACES=on` measures the profile with `namespaces: on` (bubblewrap).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use keel_tools::sandbox::Profile;
use keel_workspace::SandboxSpec;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let spawns: usize = std::env::var("KEEL_BENCH_SPAWNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path();
    let mut spec = SandboxSpec::recommended();
    if std::env::var("KEEL_BENCH_NAMESPACES").as_deref() == Ok("on") {
        spec.namespaces = Some(keel_workspace::NamespacesMode::On);
    }
    let profile = Profile::resolve(&spec, root).unwrap();
    let temp = root.join(".tmp");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = |sandboxed: bool| {
        let started = Instant::now();
        let prepared = sandboxed.then(|| {
            profile
                .prepare(Path::new("/bin/true"), root, &temp, &[])
                .unwrap()
        });
        let (program, args) = match &prepared {
            Some(prepared) => prepared.argv("/bin/true", Vec::<String>::new()),
            None => ("/bin/true".into(), Vec::new()),
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .current_dir(root)
            .env_clear()
            .process_group(0)
            .kill_on_drop(true);
        let guard = prepared.map(|p| p.apply(&mut command));
        let status = runtime.block_on(async { command.spawn().unwrap().wait().await.unwrap() });
        assert!(status.success());
        drop(guard);
        started.elapsed()
    };
    // Warm up: the first start loads what the machine caches.
    start(false);
    start(true);
    let (mut plain, mut sandboxed) = (Vec::new(), Vec::new());
    for _ in 0..spawns {
        plain.push(start(false));
        sandboxed.push(start(true));
    }
    let (plain, sandboxed) = (median(plain), median(sandboxed));
    let record = profile.record();
    println!(
        "sandbox_spawn: {spawns} starts each: without {:.3} ms, sandboxed {:.3} ms, added {:.3} ms (target < 2 ms)",
        plain.as_secs_f64() * 1e3,
        sandboxed.as_secs_f64() * 1e3,
        (sandboxed.as_secs_f64() - plain.as_secs_f64()) * 1e3
    );
    println!(
        "sandbox_spawn: profile filesystem {}, network {}, {}; in force: {}{}",
        record.filesystem,
        record.network,
        record.limits.join(", "),
        record.mechanisms.join(", "),
        match record.missing.is_empty() {
            true => String::new(),
            false => format!("; missing: {}", record.missing.join("; ")),
        }
    );
}
