//! Watching processes from tests: whether a pid is still running, waiting for it to go, and
//! reading a pid a child process wrote to a file.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long the waiting helpers poll before giving up.
const PATIENCE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// Whether `pid` is running. A zombie nobody has reaped yet counts as gone: it runs nothing.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Polls until `pid` is gone; `false` if it is still running after ten seconds.
pub async fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    false
}

/// Waits for `path` to hold a whole line with a pid (as `echo $$ > path` writes it).
///
/// # Panics
/// When no pid appears within ten seconds: the process under test never started.
#[track_caller]
pub fn read_pid(path: &Path) -> impl Future<Output = u32> + '_ {
    let caller = std::panic::Location::caller();
    async move {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && text.ends_with('\n')
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            if Instant::now() >= deadline {
                panic!("{caller}: no pid appeared in {}", path.display());
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
