//! Which process owns an active run, and whether that process still exists.
//!
//! An owner is recorded as `(pid, start time, boot id)`: the start time (field 22 of
//! `/proc/<pid>/stat`, in clock ticks since boot) tells a reused pid from the original
//! process, and the boot id (`/proc/sys/kernel/random/boot_id`) tells runs of an earlier boot,
//! whose pids and start times mean nothing now.
//!
//! Without `/proc` (not Linux) liveness cannot be known and every owner is taken as alive:
//! `recover` then never interrupts a run, which is safe, only less helpful.

use std::fs;
use std::path::Path;

/// The identity of a process that owns runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub pid: u32,
    /// Clock ticks after boot at which the process started, if known.
    pub start: Option<u64>,
    /// The kernel's boot id, if known.
    pub boot: Option<String>,
}

impl Owner {
    /// This process.
    pub(crate) fn current() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            start: start_time(pid),
            boot: boot_id(),
        }
    }
}

/// Whether the process recorded as a run's owner still exists. A run without a recorded owner
/// belongs to nobody who could finish it, so it counts as gone.
pub(crate) fn is_alive(pid: Option<i64>, start: Option<i64>, boot: Option<&str>) -> bool {
    let Some(pid) = pid.and_then(|p| u32::try_from(p).ok()) else {
        return false;
    };
    if !Path::new("/proc/self/stat").exists() {
        return true;
    }
    if let (Some(recorded), Some(current)) = (boot, boot_id())
        && recorded != current
    {
        return false;
    }
    let stat = match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        // Unreadable for another reason: we cannot tell, so leave the run alone.
        Err(_) => return true,
    };
    let Some(fields) = parse_stat(&stat) else {
        return true;
    };
    if matches!(fields.state, 'Z' | 'X') {
        return false;
    }
    match (start.and_then(|s| u64::try_from(s).ok()), fields.start) {
        (Some(recorded), Some(actual)) => recorded == actual,
        _ => true,
    }
}

struct StatFields {
    state: char,
    start: Option<u64>,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(stat: &str) -> Option<StatFields> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `state` is field 3; the start time is field 22, 19 fields further.
    let start = fields.nth(18).and_then(|s| s.parse().ok());
    Some(StatFields { state, start })
}

fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)?.start
}

fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (we ird) cmd)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
        let fields = parse_stat(stat).unwrap();
        assert_eq!(fields.state, 'S');
        assert_eq!(fields.start, Some(987_654));
    }

    #[test]
    fn this_process_is_alive_and_a_different_start_time_is_not() {
        let me = Owner::current();
        let pid = Some(i64::from(me.pid));
        let start = me.start.map(|s| s as i64);
        assert!(is_alive(pid, start, me.boot.as_deref()));
        if let Some(start) = start {
            assert!(!is_alive(pid, Some(start + 1), me.boot.as_deref()));
            assert!(!is_alive(pid, Some(start), Some("another-boot")));
        }
        assert!(!is_alive(None, None, None));
    }
}
