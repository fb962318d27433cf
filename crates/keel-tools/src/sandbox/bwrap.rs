//! Bubblewrap, when installed: the process starts inside `bwrap`, which gives it pid, mount,
//! IPC, UTS (and, with `network: deny`, network) namespaces of its own, a root built from
//! read-only binds of what the profile may read and writable binds of what it may write (so
//! nothing else exists for it), no capabilities, and installs the same seccomp filters right
//! before it runs the program (`--add-seccomp-fd`). Landlock is not stacked on it: a process
//! under Landlock may not mount, and bwrap has to.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;

/// What the system folders become inside: `/proc` and `/dev` are made fresh, the rest bound.
const MADE_FRESH: &[&str] = &["/proc", "/dev"];

/// `bwrap`'s arguments before the program, and the descriptors of the filters it reads.
#[derive(Debug)]
pub(crate) struct Wrap {
    pub bwrap: PathBuf,
    pub args: Vec<OsString>,
    /// Read ends of pipes holding the filters; inherited by `bwrap` (cleared of close-on-exec
    /// in the child), closed in Keel once it has started.
    pub filters: Vec<OwnedFd>,
}

/// The wrap of a process that may read `reads` and read and write `writes`, with its own
/// network only when `deny_network`, running `filters`.
pub(crate) fn wrap(
    bwrap: &Path,
    reads: &[PathBuf],
    writes: &[PathBuf],
    deny_network: bool,
    filters: &[BpfProgram],
) -> std::io::Result<Wrap> {
    let mut args: Vec<OsString> = [
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if deny_network {
        args.push("--unshare-net".into());
    }
    let mut bind = |how: &str, path: &Path| {
        if path.exists() && !MADE_FRESH.iter().any(|fresh| path.starts_with(fresh)) {
            args.push(how.into());
            args.push(path.into());
            args.push(path.into());
        }
    };
    // Writable binds come last: a folder writable inside a readable one stays writable.
    for path in reads {
        bind("--ro-bind", path);
    }
    for path in writes {
        bind("--bind", path);
    }
    // Made fresh after the binds, so a bind of `/` does not cover them.
    for fresh in ["--proc", "/proc", "--dev", "/dev"] {
        args.push(fresh.into());
    }
    let mut fds = Vec::new();
    for program in filters {
        let fd = filter_pipe(program)?;
        args.push("--add-seccomp-fd".into());
        args.push(std::os::fd::AsRawFd::as_raw_fd(&fd).to_string().into());
        fds.push(fd);
    }
    Ok(Wrap {
        bwrap: bwrap.to_path_buf(),
        args,
        filters: fds,
    })
}

/// A pipe holding `program` as the kernel reads a filter (`struct sock_filter` in order); its
/// read end, close-on-exec.
fn filter_pipe(program: &BpfProgram) -> std::io::Result<OwnedFd> {
    let mut ends = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both descriptors are open and ours alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    // A filter is at most a few kilobytes: it fits the pipe's buffer, so this never blocks.
    std::fs::File::from(write).write_all(&bytes)?;
    Ok(read)
}
