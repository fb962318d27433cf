//! What the SDK's benches share: the target directory, the `keel-mock-llm` server in its own
//! process, and this process's CPU time. Each bench uses part of it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The target directory (where the mock binary is, and where bench workspaces go).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// The mock LLM server, killed when dropped.
pub(crate) struct Mock {
    child: Child,
    pub(crate) base_url: String,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `keel-mock-llm` (`KEEL_MOCK_LLM`, or the release build in the target directory).
fn mock_binary() -> PathBuf {
    if let Ok(path) = std::env::var("KEEL_MOCK_LLM") {
        return PathBuf::from(path);
    }
    let path = target_dir().join("release/keel-mock-llm");
    assert!(
        path.exists(),
        "{} not found: run `cargo build --release -p keel-test-support --bin keel-mock-llm` first",
        path.display()
    );
    path
}

/// Starts the mock on a free loopback port and reads its address.
pub(crate) fn start_mock() -> Mock {
    let mut child = Command::new(mock_binary())
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the mock starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base_url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("address line")
        .to_owned();
    Mock { child, base_url }
}

/// User + system CPU time of this process (getrusage: microsecond resolution, where
/// /proc's clock ticks are 10 ms).
#[allow(unsafe_code)]
pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a zeroed rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0);
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}
