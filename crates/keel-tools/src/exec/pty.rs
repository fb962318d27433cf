//! Pseudo-terminals for exec sessions: a pair opened with `openpty`, the child made the
//! leader of a new session whose controlling terminal is the pair's terminal end.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A terminal pair: Keel keeps `master`; the program gets `terminal` as stdin, stdout and
/// stderr.
pub(crate) struct Pair {
    pub master: OwnedFd,
    pub terminal: OwnedFd,
}

fn size(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a pair of `rows` × `cols`; neither end is inherited by programs started later.
pub(crate) fn open(rows: u16, cols: u16) -> io::Result<Pair> {
    let (mut master, mut terminal): (RawFd, RawFd) = (-1, -1);
    let size = size(rows, cols);
    // SAFETY: openpty writes two descriptors; the name and termios pointers may be null.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if opened != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openpty succeeded: both descriptors are open and ours alone.
    let pair = unsafe {
        Pair {
            master: OwnedFd::from_raw_fd(master),
            terminal: OwnedFd::from_raw_fd(terminal),
        }
    };
    for fd in [pair.master.as_raw_fd(), pair.terminal.as_raw_fd()] {
        // SAFETY: fcntl on a descriptor we own.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(pair)
}

/// Changes the terminal's size (the program gets SIGWINCH).
pub(crate) fn resize(master: &OwnedFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = size(rows, cols);
    // SAFETY: TIOCSWINSZ reads the winsize it is given.
    match unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Has `command`'s child lead a new session with its stdin (the terminal) as controlling
/// terminal. Registered before the sandbox's setup, which refuses `setsid` afterwards.
pub(crate) fn lead_session(command: &mut tokio::process::Command) {
    let child_setup = || -> io::Result<()> {
        // SAFETY: setsid and ioctl take no pointers the child does not own.
        unsafe {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure makes two system calls and allocates nothing on success.
    unsafe {
        command.pre_exec(child_setup);
    }
}
