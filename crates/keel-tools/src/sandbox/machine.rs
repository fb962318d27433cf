//! What this machine can enforce: detected once per process.
//!
//! `KEEL_SANDBOX_HIDE` (a comma-separated list of `landlock`, `seccomp`, `cgroup`,
//! `userns`, `bwrap`) makes Keel act as if those were missing — to see what a profile does on
//! a machine without them (`keel doctor`, and the fail-closed tests).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The sandboxing features of the machine Keel runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The Landlock ABI version the kernel offers (0: none).
    pub landlock_abi: i32,
    /// Seccomp filters can be installed.
    pub seccomp: bool,
    /// Unprivileged user namespaces can be made.
    pub user_namespaces: bool,
    /// Where `bwrap` is, when installed.
    pub bubblewrap: Option<PathBuf>,
    /// A cgroup folder Keel may make process-count groups under (`pids` controller).
    pub pids_cgroup: Option<PathBuf>,
    /// The unified cgroup hierarchy (v2) is mounted.
    pub cgroup_v2: bool,
    /// Keel runs as root (the kernel does not apply a process-count rlimit to root).
    pub root: bool,
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

impl Machine {
    /// The machine, detected on first use.
    pub fn get() -> &'static Machine {
        static MACHINE: OnceLock<Machine> = OnceLock::new();
        MACHINE.get_or_init(Machine::detect)
    }

    fn detect() -> Machine {
        let hidden = std::env::var("KEEL_SANDBOX_HIDE").unwrap_or_default();
        let hidden: Vec<&str> = hidden.split(',').map(str::trim).collect();
        let shown = |feature: &str| !hidden.contains(&feature);
        Machine {
            landlock_abi: if shown("landlock") { landlock_abi() } else { 0 },
            seccomp: shown("seccomp") && seccomp_available(),
            user_namespaces: shown("userns") && user_namespaces(),
            bubblewrap: shown("bwrap").then(|| on_path("bwrap")).flatten(),
            pids_cgroup: shown("cgroup").then(pids_cgroup).flatten(),
            cgroup_v2: Path::new(CGROUP_ROOT).join("cgroup.controllers").is_file(),
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
        }
    }
}

/// The kernel's Landlock ABI version, asked the documented way (a ruleset query with the
/// version flag); 0 when Landlock is absent or disabled.
fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a null attribute with size 0 and the version flag only reads the ABI version.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode >= 0 && Path::new("/proc/sys/kernel/seccomp/actions_avail").exists()
}

fn user_namespaces() -> bool {
    let number = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    number("/proc/sys/user/max_user_namespaces").is_some_and(|n| n > 0)
        && number("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|n| n > 0)
}

/// `program` found on `PATH` (an executable file).
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A folder under which Keel can make a cgroup with a `pids.max`: `keel/` in the `pids`
/// hierarchy (cgroup v1), or in this process's own cgroup when it is delegated (v2).
fn pids_cgroup() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let candidates = own.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "pids") {
            Some(Path::new(CGROUP_ROOT).join("pids").join(path))
        } else if controllers.is_empty() {
            let dir = Path::new(CGROUP_ROOT).join(path);
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
            enabled
                .split_whitespace()
                .any(|c| c == "pids")
                .then_some(dir)
        } else {
            None
        }
    });
    for base in candidates {
        let dir = base.join("keel");
        if std::fs::create_dir_all(&dir).is_ok() && dir.join("cgroup.procs").exists() {
            return Some(dir);
        }
    }
    None
}
