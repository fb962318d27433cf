//! The OS sandbox of the processes Keel starts (`docs/sandbox.md`).
//!
//! A [`Profile`] is a `sandbox:` setting resolved against the workspace. Each start
//! [`prepares`](Profile::prepare) what the child applies to itself between fork and exec —
//! nothing there allocates or opens anything but what was made ready before the fork:
//!
//! 1. joins a cgroup of its own whose `pids.max` bounds the processes it may have (or, where
//!    no cgroup can be made and Keel is not root, the process rlimit);
//! 2. sets its rlimits (CPU seconds, address space, file size, open files);
//! 3. restricts itself with Landlock: the reads and writes of the profile, TCP connect and
//!    bind when the network is denied (ABI 4 and later), signals and abstract sockets to its
//!    own domain (ABI 6 and later); this sets `no_new_privs`;
//! 4. installs the seccomp filter (`filter.rs`): calls that would leave the sandbox or reach
//!    the machine, and internet sockets when the network is denied.
//!
//! The process group (made by the caller) and the cgroup are killed as a whole when the call
//! ends. What the machine cannot enforce fails the start, naming it, unless the profile says
//! `fallback: warn`.

mod bwrap;
mod explain;
mod filter;
mod machine;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use keel_types::SandboxRecord;
use keel_workspace::{
    FilesystemMode, NamespacesMode, NetworkMode, SandboxFallback, SandboxLimits, SandboxSpec,
    Workspace,
};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, path_beneath_rules,
};
use seccompiler::BpfProgram;

pub use explain::explain;
pub use machine::{Machine, on_path};

/// The Landlock ABI whose rights Keel asks for; a newer kernel enforces them all, an older
/// one what it has (at least ABI 1 is required for a filesystem profile).
const TARGET_ABI: ABI = ABI::V6;

/// Folders every program needs to read (and run from), when they exist.
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
    "/sys", "/run", "/var/lib", "/dev",
];
/// Devices every program may write.
pub(crate) const DEVICE_WRITE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
];

/// A workspace's `sandbox:` settings: the Runtime's and each agent's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sandboxes {
    root: PathBuf,
    runtime: SandboxSpec,
    agents: BTreeMap<String, SandboxSpec>,
}

impl Sandboxes {
    /// The settings of `workspace`.
    pub fn of(workspace: &Workspace) -> Sandboxes {
        Sandboxes {
            root: workspace.root.clone(),
            runtime: workspace.runtime.sandbox.clone(),
            agents: workspace
                .agents
                .iter()
                .filter_map(|(name, agent)| Some((name.clone(), agent.sandbox.clone()?)))
                .collect(),
        }
    }

    /// The profile of a process a call of `agent` starts, with the starter's own setting
    /// (`own`: a Tool's, an McpServer's, a Hook's) over the agent's, over the Runtime's.
    pub fn profile(&self, agent: &str, own: Option<&SandboxSpec>) -> Option<Profile> {
        let mut spec = self.runtime.clone();
        if let Some(agent) = self.agents.get(agent) {
            spec = agent.over(&spec);
        }
        if let Some(own) = own {
            spec = own.over(&spec);
        }
        Profile::resolve(&spec, &self.root)
    }
}

/// A `sandbox:` setting resolved against a workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The workspace the profile was resolved against.
    pub workspace: PathBuf,
    pub filesystem: FilesystemMode,
    pub network: NetworkMode,
    pub read_paths: Vec<PathBuf>,
    pub write_paths: Vec<PathBuf>,
    pub limits: SandboxLimits,
    pub namespaces: NamespacesMode,
    pub fallback: SandboxFallback,
}

/// Why a sandboxed process could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The machine lacks what the profile needs (and it does not say `fallback: warn`).
    #[error(
        "the sandbox cannot be enforced on this machine: {missing} (set `fallback: warn` in the \
         profile to run with what can be, or see `keel doctor`)",
        missing = .0.join("; ")
    )]
    Unenforceable(Vec<String>),
    /// Preparing it failed.
    #[error("preparing the sandbox failed: {0}")]
    Prepare(String),
}

impl Profile {
    /// `spec` resolved: relative paths from `workspace_root`; `None` when it asks for nothing.
    pub fn resolve(spec: &SandboxSpec, workspace_root: &Path) -> Option<Profile> {
        if spec.is_off() {
            return None;
        }
        let paths = |list: &Option<Vec<String>>| -> Vec<PathBuf> {
            list.iter()
                .flatten()
                .map(|p| workspace_root.join(p))
                .collect()
        };
        Some(Profile {
            workspace: workspace_root.to_path_buf(),
            filesystem: spec.filesystem.unwrap_or(FilesystemMode::Off),
            network: spec.network.unwrap_or(NetworkMode::Allow),
            read_paths: paths(&spec.read_paths),
            write_paths: paths(&spec.write_paths),
            limits: spec.limits.unwrap_or_default(),
            namespaces: spec.namespaces.unwrap_or_default(),
            fallback: spec.fallback.unwrap_or_default(),
        })
    }

    /// The profile as a process started in it on this machine: its mechanisms, and what is
    /// missing.
    pub fn record(&self) -> SandboxRecord {
        let machine = Machine::get();
        let mut mechanisms = vec!["process group".to_owned()];
        let mut missing = Vec::new();
        let confines_files = self.filesystem != FilesystemMode::Off;
        let denies_network = self.network == NetworkMode::Deny;
        if self.namespaces == NamespacesMode::On && machine.bubblewrap.is_none() {
            missing.push("bubblewrap (namespaces: on): it is not installed".to_owned());
        }
        if self.uses_bubblewrap() {
            mechanisms.push(match denies_network {
                true => "bubblewrap (pid, mount, ipc, network namespaces)".to_owned(),
                false => "bubblewrap (pid, mount, ipc namespaces)".to_owned(),
            });
        } else if confines_files || machine.landlock_abi > 0 {
            match machine.landlock_abi {
                0 if confines_files => missing.push(
                    "Landlock (the kernel has none, or it is disabled) or bubblewrap: the \
                     filesystem profile"
                        .to_owned(),
                ),
                0 => {}
                abi => mechanisms.push(format!("landlock (ABI {abi})")),
            }
        }
        match machine.seccomp {
            true => mechanisms.push("seccomp".to_owned()),
            false if denies_network => {
                missing.push("seccomp: denying the network and dangerous calls".to_owned())
            }
            false => missing.push("seccomp: denying dangerous calls".to_owned()),
        }
        if machine.seccomp || machine.landlock_abi > 0 {
            mechanisms.push("no_new_privs".to_owned());
        }
        let limits = limit_words(&self.limits);
        if self.limits.cpu_seconds.is_some()
            || self.limits.memory.is_some()
            || self.limits.file_size.is_some()
            || self.limits.open_files.is_some()
        {
            mechanisms.push("rlimits".to_owned());
        }
        if self.limits.processes.is_some() {
            match (&machine.pids_cgroup, machine.root) {
                (Some(_), _) => mechanisms.push("cgroup pids".to_owned()),
                (None, false) => mechanisms.push("rlimit nproc".to_owned()),
                (None, true) => missing.push(
                    "a process limit: no writable pids cgroup, and the kernel does not apply \
                     the process rlimit to root"
                        .to_owned(),
                ),
            }
        }
        SandboxRecord {
            filesystem: mode_word(self.filesystem).to_owned(),
            network: match self.network {
                NetworkMode::Deny => "deny",
                NetworkMode::Allow => "allow",
            }
            .to_owned(),
            limits,
            mechanisms,
            missing,
        }
    }

    /// Everything a start of `program` needs, made ready before the fork: `temp_dir` is the
    /// run's temporary folder (writable), `extra_read` folders the process must read besides
    /// the profile's (a skill's folder), `workspace_root` the workspace.
    pub fn prepare(
        &self,
        program: &Path,
        workspace_root: &Path,
        temp_dir: &Path,
        extra_read: &[PathBuf],
    ) -> Result<Prepared, SandboxError> {
        let record = self.record();
        if !record.missing.is_empty() && self.fallback == SandboxFallback::Deny {
            return Err(SandboxError::Unenforceable(record.missing));
        }
        let machine = Machine::get();
        std::fs::create_dir_all(temp_dir)
            .map_err(|e| SandboxError::Prepare(format!("{}: {e}", temp_dir.display())))?;
        let (reads, writes) = self.access(program, workspace_root, temp_dir, extra_read);
        let mut filters = match machine.seccomp {
            true => filter::programs(self.network == NetworkMode::Deny)
                .map_err(SandboxError::Prepare)?,
            false => Vec::new(),
        };
        let (ruleset, wrap) = match (&machine.bubblewrap, machine.landlock_abi) {
            (Some(bwrap), _) if self.uses_bubblewrap() => {
                let deny = self.network == NetworkMode::Deny;
                let wrap = bwrap::wrap(bwrap, &reads, &writes, deny, &filters)
                    .map_err(|e| SandboxError::Prepare(format!("bubblewrap: {e}")))?;
                // bwrap installs the filters itself, once the namespaces are made.
                filters.clear();
                (None, Some(wrap))
            }
            (_, 0) => (None, None),
            _ => (Some(self.ruleset(&reads, &writes)?), None),
        };
        let mut rlimits = Vec::new();
        let limits = &self.limits;
        let mut set = |resource, value: Option<u64>| {
            if let Some(value) = value {
                rlimits.push((resource, value as libc::rlim_t));
            }
        };
        set(libc::RLIMIT_CPU, limits.cpu_seconds);
        set(libc::RLIMIT_AS, limits.memory.map(|m| m.0));
        set(libc::RLIMIT_FSIZE, limits.file_size.map(|m| m.0));
        set(libc::RLIMIT_NOFILE, limits.open_files);
        let mut cgroup = None;
        if let Some(processes) = limits.processes {
            match &machine.pids_cgroup {
                Some(base) => cgroup = Some(Cgroup::make(base, processes)?),
                None if !machine.root => {
                    // The process rlimit counts all of the user's processes: allow the tasks
                    // the machine has now, plus the limit.
                    set(
                        libc::RLIMIT_NPROC,
                        Some(machine_tasks() + u64::from(processes)),
                    )
                }
                None => {}
            }
        }
        Ok(Prepared {
            temp_dir: temp_dir.to_path_buf(),
            ruleset,
            filters,
            wrap,
            rlimits,
            cgroup,
            record,
        })
    }

    /// What the process may read, and read and write, besides the system's devices.
    fn access(
        &self,
        program: &Path,
        workspace_root: &Path,
        temp_dir: &Path,
        extra_read: &[PathBuf],
    ) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut reads: Vec<PathBuf> = Vec::new();
        let mut writes: Vec<PathBuf> = vec![temp_dir.to_path_buf()];
        match self.filesystem {
            FilesystemMode::Off => writes.push(PathBuf::from("/")),
            mode => {
                reads.extend(SYSTEM_READ.iter().map(PathBuf::from));
                reads.extend(installation(program));
                reads.extend(extra_read.iter().cloned());
                reads.extend(self.read_paths.iter().cloned());
                match mode {
                    FilesystemMode::WorkspaceWrite => writes.push(workspace_root.to_path_buf()),
                    _ => reads.push(workspace_root.to_path_buf()),
                }
                writes.extend(self.write_paths.iter().cloned());
            }
        }
        (reads, writes)
    }

    /// Whether a start in this profile goes through bubblewrap here.
    pub(crate) fn uses_bubblewrap(&self) -> bool {
        let machine = Machine::get();
        let wanted = match self.namespaces {
            NamespacesMode::On => true,
            NamespacesMode::Off => false,
            // Where Landlock cannot confine the files, bubblewrap's mount namespace can.
            NamespacesMode::Auto => {
                machine.landlock_abi == 0 && self.filesystem != FilesystemMode::Off
            }
        };
        wanted && machine.bubblewrap.is_some()
    }

    fn ruleset(
        &self,
        reads: &[PathBuf],
        writes: &[PathBuf],
    ) -> Result<RulesetCreated, SandboxError> {
        let failed = |e: landlock::RulesetError| SandboxError::Prepare(format!("Landlock: {e}"));
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        if self.filesystem != FilesystemMode::Off {
            ruleset = ruleset
                .handle_access(AccessFs::from_all(TARGET_ABI))
                .map_err(failed)?;
        }
        if self.network == NetworkMode::Deny {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(TARGET_ABI))
                .map_err(failed)?;
        }
        ruleset = ruleset.scope(Scope::from_all(TARGET_ABI)).map_err(failed)?;
        let mut created = ruleset.create().map_err(failed)?;
        if self.filesystem != FilesystemMode::Off {
            let devices: Vec<PathBuf> = DEVICE_WRITE.iter().map(PathBuf::from).collect();
            created = created
                .add_rules(path_beneath_rules(reads, AccessFs::from_read(TARGET_ABI)))
                .map_err(failed)?
                .add_rules(path_beneath_rules(
                    writes.iter().chain(&devices),
                    AccessFs::from_all(TARGET_ABI),
                ))
                .map_err(failed)?;
        }
        Ok(created)
    }
}

/// `filesystem` as written.
pub(crate) fn mode_word(mode: FilesystemMode) -> &'static str {
    match mode {
        FilesystemMode::WorkspaceWrite => "workspace-write",
        FilesystemMode::ReadOnly => "read-only",
        FilesystemMode::Off => "off",
    }
}

fn limit_words(limits: &SandboxLimits) -> Vec<String> {
    let mut words = Vec::new();
    if let Some(n) = limits.cpu_seconds {
        words.push(format!("cpu {n}s"));
    }
    if let Some(n) = limits.memory {
        words.push(format!("memory {}", n.0));
    }
    if let Some(n) = limits.processes {
        words.push(format!("processes {n}"));
    }
    if let Some(n) = limits.file_size {
        words.push(format!("file size {}", n.0));
    }
    if let Some(n) = limits.open_files {
        words.push(format!("open files {n}"));
    }
    words
}

/// The program's own installation, readable: the folder above the `bin` it is in (a
/// Python, Node or toolchain install outside the system folders), or its own folder.
fn installation(program: &Path) -> Vec<PathBuf> {
    let found = match program.components().count() {
        1 => machine::on_path(&program.to_string_lossy()),
        _ => Some(program.to_path_buf()),
    };
    let mut folders = Vec::new();
    for path in found.into_iter().flat_map(|p| {
        let real = std::fs::canonicalize(&p).ok();
        [Some(p), real]
    }) {
        let Some(path) = path else { continue };
        let Some(dir) = path.parent() else { continue };
        match dir.file_name().is_some_and(|n| n == "bin" || n == "shims") {
            true => folders.extend(dir.parent().map(Path::to_path_buf)),
            false => folders.push(dir.to_path_buf()),
        }
    }
    folders
}

/// The tasks the machine runs now (from `/proc/loadavg`).
fn machine_tasks() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| {
            let field = text.split_whitespace().nth(3)?;
            field.split('/').nth(1)?.parse().ok()
        })
        .unwrap_or(4096)
}

/// A start made ready: applied to a command with [`Prepared::apply`].
#[derive(Debug)]
pub struct Prepared {
    /// The run's temporary folder: the process's `TMPDIR`.
    temp_dir: PathBuf,
    ruleset: Option<RulesetCreated>,
    filters: Vec<BpfProgram>,
    /// Bubblewrap's arguments, when the process starts inside it.
    wrap: Option<bwrap::Wrap>,
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    cgroup: Option<Cgroup>,
    record: SandboxRecord,
}

impl Prepared {
    /// What the process starts in.
    pub fn record(&self) -> &SandboxRecord {
        &self.record
    }

    /// The program to start and its arguments: `program` and `args` themselves, or `bwrap`
    /// running them.
    pub fn argv(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
    ) -> (std::ffi::OsString, Vec<std::ffi::OsString>) {
        let args = args.into_iter().map(|a| a.as_ref().to_os_string());
        match &self.wrap {
            None => (program.as_ref().to_os_string(), args.collect()),
            Some(wrap) => {
                let mut all = wrap.args.clone();
                all.push("--".into());
                all.push(program.as_ref().to_os_string());
                all.extend(args);
                (wrap.bwrap.clone().into_os_string(), all)
            }
        }
    }

    /// Has `command` (built from [`Prepared::argv`]) start in the sandbox, with the run's
    /// temporary folder as `TMPDIR`: its child applies the sandbox to itself before it runs the
    /// program. The
    /// returned guard kills whatever is left in the process's cgroup and removes it when
    /// dropped: keep it until the process has ended.
    pub fn apply(self, command: &mut tokio::process::Command) -> Guard {
        command.env("TMPDIR", &self.temp_dir);
        let Prepared {
            mut ruleset,
            filters,
            wrap,
            rlimits,
            cgroup,
            ..
        } = self;
        let procs = cgroup.as_ref().map(|c| c.procs.as_raw_fd());
        // The filters' pipes, for bwrap to read: kept open until the command is dropped.
        let inherited: Vec<OwnedFd> = wrap.map(|w| w.filters).unwrap_or_default();
        let child_setup = move || -> std::io::Result<()> {
            if let Some(fd) = procs {
                // SAFETY: writing a fixed buffer to a descriptor opened before the fork.
                let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (resource, value) in &rlimits {
                let limit = libc::rlimit {
                    rlim_cur: *value,
                    rlim_max: *value,
                };
                // SAFETY: setrlimit reads the struct it is given.
                if unsafe { libc::setrlimit(*resource, &limit) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for fd in &inherited {
                // SAFETY: clears close-on-exec on a descriptor opened before the fork.
                if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if !inherited.is_empty() {
                // SAFETY: PR_SET_NO_NEW_PRIVS takes no pointers.
                if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(ruleset) = ruleset.take() {
                ruleset.restrict_self().map_err(std::io::Error::other)?;
            }
            for program in &filters {
                seccompiler::apply_filter(program).map_err(std::io::Error::other)?;
            }
            Ok(())
        };
        // SAFETY: the closure only makes system calls on what was prepared before the fork
        // (no locks taken, nothing allocated on success).
        unsafe {
            command.pre_exec(child_setup);
        }
        Guard { cgroup }
    }
}

/// Ends what a sandboxed start left: every process still in its cgroup is killed and the
/// cgroup removed.
#[derive(Debug)]
pub struct Guard {
    cgroup: Option<Cgroup>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.remove();
        }
    }
}

/// A cgroup of one sandboxed process (and what it starts), bounding their number.
#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    /// Its `cgroup.procs`, open for the child to join by writing `0`.
    procs: OwnedFd,
}

impl Cgroup {
    fn make(base: &Path, processes: u32) -> Result<Cgroup, SandboxError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        // Groups an earlier process could not remove before it exited are removed once
        // they are empty.
        SWEPT.call_once(|| sweep(base));
        // Unique across processes: pids are reused, and a group outlives its process.
        let name = format!(
            "{}-{}",
            keel_types::new_id("sbx"),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        let failed = |e: std::io::Error| {
            SandboxError::Prepare(format!("the process cgroup {}: {e}", dir.display()))
        };
        std::fs::create_dir(&dir).map_err(failed)?;
        let made = (|| {
            std::fs::write(dir.join("pids.max"), processes.to_string())?;
            File::options()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .map(OwnedFd::from)
        })();
        match made {
            Ok(procs) => Ok(Cgroup { dir, procs }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(failed(e))
            }
        }
    }

    /// Kills what is left in the group and removes it, retrying briefly while the killed
    /// processes exit (on a thread of its own: nothing waits for it).
    fn remove(self) {
        let Cgroup { dir, procs } = self;
        drop(procs);
        let kill_all = |dir: &Path| {
            let listed = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in listed.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: kill takes plain integers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        };
        kill_all(&dir);
        if std::fs::remove_dir(&dir).is_ok() {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("keel-cgroup-reaper".into())
            .spawn(move || {
                for _ in 0..200 {
                    kill_all(&dir);
                    if std::fs::remove_dir(&dir).is_ok() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                tracing::warn!(cgroup = %dir.display(), "A sandbox cgroup could not be removed.");
            });
    }
}

/// Removes the empty cgroups under `base` left by processes that ended before their reaper.
/// Only old ones: another process's cgroup is empty too between its creation and its child
/// joining it, and removing it then fails that child's start (`ENODEV`).
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age >= STALE_CGROUP);
        let empty = std::fs::read_to_string(dir.join("cgroup.procs"))
            .is_ok_and(|procs| procs.trim().is_empty());
        if entry.file_type().is_ok_and(|t| t.is_dir()) && old && empty {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// How old an empty cgroup must be to be swept (far more than a process start takes).
const STALE_CGROUP: std::time::Duration = std::time::Duration::from_secs(300);

/// The run's temporary folder, writable by its sandboxed processes.
pub fn run_temp_dir(request_id: &str) -> PathBuf {
    std::env::temp_dir().join("keel-sandbox").join(request_id)
}

/// The runs whose temporary folder a sandboxed process of this process was given (and so
/// may have made): only theirs are looked for when they end.
static MADE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// How many runs [`MADE`] remembers at most.
const MADE_KEPT: usize = 4096;

/// Notes that run `request_id`'s temporary folder is in use (a sandboxed process gets it).
pub(crate) fn note_run_temp_dir(request_id: &str) {
    let mut made = MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !made.iter().any(|id| id == request_id) {
        // Bounded: a run that never ends here (a workflow's tool node, a crash) is forgotten
        // after a while, and its folder is then left to a resume or to the system.
        if made.len() >= MADE_KEPT {
            made.remove(0);
        }
        made.push(request_id.to_owned());
    }
}

/// Removes a run's temporary folder when its run has ended: when a sandboxed process of this
/// process had it, or, for a resumed run (`resumed`), whenever it is there (an earlier
/// process may have left it). A run that started no sandboxed process costs no file system
/// call.
pub fn remove_run_temp_dir(request_id: &str, resumed: bool) {
    let made = {
        let mut made = MADE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = made.iter().position(|id| id == request_id);
        found.map(|i| made.swap_remove(i)).is_some()
    };
    if !made && !resumed {
        return;
    }
    let dir = run_temp_dir(request_id);
    if dir.exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_temp_dir_is_removed_when_its_run_had_it_or_was_resumed() {
        let made = |id: &str| {
            let dir = run_temp_dir(id);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("scratch"), "x").unwrap();
            dir
        };
        // Given to a sandboxed process of this process: removed at the run's end.
        let id = keel_types::new_id("run");
        let dir = made(&id);
        note_run_temp_dir(&id);
        remove_run_temp_dir(&id, false);
        assert!(!dir.exists());
        // Left by an earlier process: only a resumed run looks for it.
        let id = keel_types::new_id("run");
        let dir = made(&id);
        remove_run_temp_dir(&id, false);
        assert!(dir.exists(), "a run that never had it does not look");
        remove_run_temp_dir(&id, true);
        assert!(!dir.exists());
    }

    #[test]
    fn an_installation_outside_the_system_is_readable() {
        let found = installation(Path::new("/opt/python/3.11/bin/python3"));
        assert!(
            found.contains(&PathBuf::from("/opt/python/3.11")),
            "{found:?}"
        );
        assert!(installation(Path::new("./tools/check")).contains(&PathBuf::from("./tools")));
    }
}
