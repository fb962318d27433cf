//! The bench's child processes: `keel serve` and the mock, started, watched (CPU time, peak
//! RSS) and killed on every way out; the bench workspace they serve.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keel_test_support::WorkspaceBuilder;

use super::{AGENT, Result};

/// A child process killed (and reaped) when dropped, on every path out of `main`.
pub(crate) struct Guard {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
}

impl Guard {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err` with the exit status if the process has ended.
    pub(crate) fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("{} exited: {status}", self.name)),
            Err(e) => Err(format!("cannot check {}: {e}", self.name)),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `command` with stdout piped, waits for its `listening on http://…` line (at most
/// 30 s) and keeps draining stdout in a thread. Returns the guard and the address after
/// `http://`.
pub(crate) fn spawn_listening(name: &'static str, mut command: Command) -> Result<(Guard, String)> {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let stdout = child.stdout.take();
    let mut guard = Guard { name, child };
    let stdout = stdout.ok_or_else(|| format!("{name}: no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { return };
            if let Some(addr) = line.trim().strip_prefix("listening on http://") {
                let _ = tx.send(addr.to_owned());
                break;
            }
        }
        // Keep the pipe drained so the child never blocks on a full pipe.
        for _ in lines {}
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(addr) => Ok((guard, addr)),
        Err(_) => {
            guard.check_alive()?;
            Err(format!("{name} printed no `listening on` line in 30 s"))
        }
    }
}

pub(crate) fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

pub(crate) fn keel_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_keel"))
}

pub(crate) fn mock_binary() -> Result<PathBuf> {
    if let Ok(path) = std::env::var("KEEL_MOCK_LLM") {
        return Ok(PathBuf::from(path));
    }
    let keel = keel_binary();
    let path = keel
        .parent()
        .map(|dir| dir.join("keel-mock-llm"))
        .unwrap_or_else(|| target_dir().join("release/keel-mock-llm"));
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: run `cargo build --release -p keel-test-support --bin keel-mock-llm` \
             first (or set KEEL_MOCK_LLM)",
            path.display()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The workspace

pub(crate) fn workspace_yaml(base_url: &str, run_limit: Option<u32>, server_cap: bool) -> String {
    let limits = match run_limit {
        Some(limit) => format!("{{ maxConcurrentRuns: {limit} }}"),
        None => "{}".to_owned(),
    };
    // All the load comes from one client address: lift the per-client connection cap (64 by
    // default), or the server closes most of the benchmark's connections.
    let server = if server_cap {
        "\n  server: { maxConcurrentRuns: 1024, maxConnections: 4096, maxConnectionsPerClient: 4096 }"
    } else {
        "\n  server: { maxConnections: 4096, maxConnectionsPerClient: 4096 }"
    };
    WorkspaceBuilder::new()
        .runtime(&format!("  limits: {limits}{server}\n"))
        .openai_model_at("mock", base_url)
        .agent(
            AGENT,
            "
            model: mock
            instructions: You are a benchmark agent.
            tools: [read_file]
            ",
        )
        .config_yaml()
}

pub(crate) fn keel_quiet(args: &[&str], dir: &Path) -> Result<(bool, String)> {
    let output = Command::new(keel_binary())
        .args(args)
        .arg("-w")
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run keel {}: {e}", args.join(" ")))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok((output.status.success(), text))
}

/// Writes the workspace; sets `server.maxConcurrentRuns: 1024` only if this `keel` knows the
/// field. Returns whether it was set.
pub(crate) fn write_workspace(dir: &Path, base_url: &str, run_limit: Option<u32>) -> Result<bool> {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let file = config.join("bench.yaml");
    std::fs::write(
        dir.join("README.md"),
        "# Bench\nA small file the agent reads.\n",
    )
    .map_err(|e| format!("README.md: {e}"))?;
    for server_cap in [true, false] {
        std::fs::write(&file, workspace_yaml(base_url, run_limit, server_cap))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let (ok, text) = keel_quiet(&["validate"], dir)?;
        if ok {
            return Ok(server_cap);
        }
        if !server_cap {
            return Err(format!("the bench workspace does not validate:\n{text}"));
        }
    }
    Ok(false)
}

/// The effective `…maxConcurrentRuns` (and `…maxQueuedRequests`) settings, from `keel config explain`.
pub(crate) fn concurrency_caps(dir: &Path) -> Result<Vec<(String, u64)>> {
    let (ok, text) = keel_quiet(&["config", "explain"], dir)?;
    if !ok {
        return Err(format!("keel config explain failed:\n{text}"));
    }
    Ok(text
        .lines()
        .filter_map(|line| {
            let (path, rest) = line.split_once(" = ")?;
            let lower = path.to_ascii_lowercase();
            if !lower.contains("concurrent") && !lower.contains("queued") {
                return None;
            }
            let value = rest.split_whitespace().next()?.parse().ok()?;
            Some((path.trim().to_owned(), value))
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// /proc

/// User + system CPU time of a process (clock ticks of 10 ms).
pub(crate) fn cpu_time(pid: &str) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // After the command name: utime is field 14 and stime 15 of proc(5).
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

/// A process's thread count and open file descriptors (connections, files) from `/proc`.
pub(crate) fn threads_and_fds(pid: u32) -> (usize, usize) {
    let threads = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
        })
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count());
    (threads, fds)
}

/// A `kB` field of /proc/PID/status, in MiB.
pub(crate) fn status_mib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix(field)
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Prints the last lines of `name`'s stderr log at `path` (after a failed round).
pub(crate) fn print_log_tail(name: &str, path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if text.trim().is_empty() {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    eprintln!("--- last lines of {name}'s stderr ---");
    for line in &lines[lines.len().saturating_sub(20)..] {
        eprintln!("{line}");
    }
}
