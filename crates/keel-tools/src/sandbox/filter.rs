//! The seccomp filter of a sandboxed process: calls no tool needs that would let it out or
//! at the machine are refused (`EPERM`) always; internet sockets too when the network is
//! denied. Everything else is allowed: the filter is a deny list, so programs keep working.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// Calls refused whatever the profile: tracing other processes and reading or writing their
/// memory, changing mounts, namespaces or the kernel, keys, BPF, leaving the process group
/// (so a kill of the group reaches everything the tool started), raw I/O ports, and io_uring
/// (whose operations seccomp cannot see).
const ALWAYS_DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_quotactl,
    libc::SYS_setpgid,
    libc::SYS_setsid,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `clone` flags that would make new namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Socket families refused when the network is denied.
const INTERNET_FAMILIES: &[libc::c_int] = &[libc::AF_INET, libc::AF_INET6, libc::AF_PACKET];

/// The filters a sandboxed process installs, in order, for a profile whose network is denied
/// (`deny_network`) or not: compiled once per process.
pub(crate) fn programs(deny_network: bool) -> Result<Vec<BpfProgram>, String> {
    static COMPILED: std::sync::OnceLock<Result<[Vec<BpfProgram>; 2], String>> =
        std::sync::OnceLock::new();
    let compiled = COMPILED.get_or_init(|| {
        let clone3 = clone3_program()?;
        Ok([
            vec![program(false)?, clone3.clone()],
            vec![program(true)?, clone3],
        ])
    });
    match compiled {
        Ok(both) => Ok(both[usize::from(deny_network)].clone()),
        Err(e) => Err(e.clone()),
    }
}

/// The filter for a process whose network is denied (`deny_network`) or not.
fn program(deny_network: bool) -> Result<BpfProgram, String> {
    let failed = |e: seccompiler::BackendError| format!("building the seccomp filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = ALWAYS_DENIED
        .iter()
        .map(|call| (*call, Vec::new()))
        .collect();
    let flag_rule = |flag: libc::c_int| {
        let flag = flag as u64;
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .and_then(|condition| SeccompRule::new(vec![condition]))
    };
    let clone_rules: Result<Vec<_>, _> = NAMESPACE_FLAGS.iter().map(|f| flag_rule(*f)).collect();
    rules.insert(libc::SYS_clone, clone_rules.map_err(failed)?);
    if deny_network {
        let family_rule = |family: libc::c_int| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
                .and_then(|condition| SeccompRule::new(vec![condition]))
        };
        let socket_rules: Result<Vec<_>, _> =
            INTERNET_FAMILIES.iter().map(|f| family_rule(*f)).collect();
        rules.insert(libc::SYS_socket, socket_rules.map_err(failed)?);
    }
    compile(rules, libc::EPERM)
}

/// The filter answering `clone3` with "not implemented": its flags are in memory seccomp
/// cannot read, so the C library is made to fall back to `clone`, whose flags it can.
fn clone3_program() -> Result<BpfProgram, String> {
    compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
    )
}

/// `rules` as a program for this machine's architecture: a matching call fails with `errno`,
/// any other is allowed.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let failed = |e: seccompiler::BackendError| format!("building the seccomp filter: {e}");
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp on this architecture: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(failed)?;
    BpfProgram::try_from(filter).map_err(failed)
}
