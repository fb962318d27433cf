//! Exec sessions: programs started on a pseudo-terminal that a run talks to over several
//! calls (`exec_start`, `exec_write`, `exec_read`, `exec_resize`, `exec_stop`; the tools are in
//! `builtin/exec.rs`).
//!
//! Sessions live in this process only, in one registry: each belongs to the run that started
//! it and ends with it ([`end_run`]: when the run finishes, fails or is cancelled), when it is
//! stopped, when it has been idle for [`IDLE_TIMEOUT`], and with the process (closing the
//! terminal hangs it up). A resumed run finds none of its old sessions: they are never
//! resurrected. What a program writes is kept in a bounded buffer ([`MAX_BUFFERED`] unread
//! bytes; older output is dropped and the next read says how much).

pub(crate) mod pty;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::sandbox::Guard;

/// Unread output kept per session; older output is dropped past it.
pub const MAX_BUFFERED: usize = 1 << 20;
/// A session nobody has used for this long is ended.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Sessions one run may have open at once.
pub const MAX_PER_RUN: usize = 4;

/// What a program wrote and nobody has read yet.
#[derive(Debug, Default)]
struct Output {
    unread: Vec<u8>,
    /// Bytes dropped from the front since the last read.
    dropped: usize,
    /// The terminal closed: the program (and everything on its terminal) is gone.
    closed: bool,
}

/// One running program (the leader of its session and process group).
pub(crate) struct Session {
    pub id: String,
    pub run: String,
    pub command: String,
    pid: u32,
    master: std::os::fd::OwnedFd,
    writer: Mutex<File>,
    child: tokio::sync::Mutex<tokio::process::Child>,
    output: Mutex<Output>,
    arrived: Notify,
    last_used: Mutex<Instant>,
    _sandbox: Option<Guard>,
}

/// What a read collected.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub text: String,
    /// The program has ended (its terminal closed); its exit code when known.
    pub ended: bool,
    pub exit_code: Option<i32>,
}

static SESSIONS: LazyLock<Mutex<HashMap<String, Arc<Session>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn sessions() -> std::sync::MutexGuard<'static, HashMap<String, Arc<Session>>> {
    SESSIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Session {
    /// Registers a started program whose terminal's Keel end is `master`; starts reading it.
    pub(crate) fn register(
        run: &str,
        command: String,
        child: tokio::process::Child,
        master: std::os::fd::OwnedFd,
        sandbox: Option<Guard>,
    ) -> std::io::Result<Arc<Session>> {
        let pid = child.id().unwrap_or(0);
        let reader = File::from(master.try_clone()?);
        let writer = File::from(master.try_clone()?);
        let session = Arc::new(Session {
            id: keel_types::new_id("exec"),
            run: run.to_owned(),
            command,
            pid,
            master,
            writer: Mutex::new(writer),
            child: tokio::sync::Mutex::new(child),
            output: Mutex::new(Output::default()),
            arrived: Notify::new(),
            last_used: Mutex::new(Instant::now()),
            _sandbox: sandbox,
        });
        let reading = Arc::downgrade(&session);
        std::thread::Builder::new()
            .name("keel-exec-reader".into())
            .spawn(move || read_terminal(reader, &reading))?;
        sessions().insert(session.id.clone(), session.clone());
        Ok(session)
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Writes `input` to the program's terminal.
    pub(crate) fn write(&self, input: &[u8]) -> std::io::Result<()> {
        self.touch();
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.write_all(input)?;
        writer.flush()
    }

    /// Resizes the terminal.
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
        self.touch();
        pty::resize(&self.master, rows, cols)
    }

    /// The output since the last read: waits up to `wait` for the first byte, then until the
    /// program has been quiet for `quiet` (or `wait` has passed), so a prompt arrives whole.
    pub(crate) async fn collect(&self, wait: Duration, quiet: Duration) -> Collected {
        self.touch();
        let deadline = tokio::time::Instant::now() + wait;
        let mut seen = 0;
        loop {
            let arrived = self.arrived.notified();
            let (len, closed) = {
                let output = self.output.lock().unwrap_or_else(|p| p.into_inner());
                (output.unread.len(), output.closed)
            };
            if closed {
                break;
            }
            let until = match len {
                0 => deadline,
                _ if len == seen => break,
                _ => (tokio::time::Instant::now() + quiet).min(deadline),
            };
            seen = len;
            if tokio::time::timeout_at(until, arrived).await.is_err() {
                // Quiet (or out of time): take what is there.
                let len = self.output.lock().map(|o| o.unread.len()).unwrap_or(0);
                if len == seen {
                    break;
                }
                seen = len;
            }
        }
        let mut collected = {
            let mut output = self.output.lock().unwrap_or_else(|p| p.into_inner());
            let mut text = String::new();
            if output.dropped > 0 {
                text.push_str(&format!(
                    "[… {} bytes of earlier output dropped: the buffer keeps {MAX_BUFFERED}]\n",
                    output.dropped
                ));
                output.dropped = 0;
            }
            text.push_str(&String::from_utf8_lossy(&std::mem::take(
                &mut output.unread,
            )));
            Collected {
                text,
                ended: output.closed,
                exit_code: None,
            }
        };
        if collected.ended {
            collected.exit_code = self.exit_code().await;
        }
        collected
    }

    /// The program's exit code, once it has exited (waiting briefly for it).
    async fn exit_code(&self) -> Option<i32> {
        let mut child = self.child.lock().await;
        match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => None,
        }
    }

    /// Kills the program and everything on its terminal, and forgets the session.
    pub(crate) async fn stop(&self) -> Option<i32> {
        crate::process::kill_group(self.pid);
        sessions().remove(&self.id);
        let mut child = self.child.lock().await;
        let _ = child.start_kill();
        match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => None,
        }
    }
}

/// Reads the terminal into the session's buffer until it closes.
fn read_terminal(mut reader: File, session: &std::sync::Weak<Session>) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let read = reader.read(&mut chunk);
        let Some(session) = session.upgrade() else {
            return;
        };
        let mut output = session.output.lock().unwrap_or_else(|p| p.into_inner());
        match read {
            Ok(0) | Err(_) => {
                // EIO: no process has the terminal open any more.
                output.closed = true;
                drop(output);
                session.arrived.notify_waiters();
                return;
            }
            Ok(n) => {
                output.unread.extend_from_slice(&chunk[..n]);
                let over = output.unread.len().saturating_sub(MAX_BUFFERED);
                if over > 0 {
                    output.unread.drain(..over);
                    output.dropped += over;
                }
            }
        }
        drop(output);
        session.arrived.notify_waiters();
    }
}

/// The session `id` of run `run`, if it is still running.
pub(crate) fn find(run: &str, id: &str) -> Result<Arc<Session>, String> {
    end_idle();
    match sessions().get(id) {
        Some(session) if session.run == run => Ok(session.clone()),
        _ => Err(format!(
            "exec session `{id}` is not running: it was stopped, it ended with its run, it \
             was idle for {}, or its run was resumed after an interruption (sessions are never \
             carried over); start a new one with exec_start",
            humantime::format_duration(IDLE_TIMEOUT)
        )),
    }
}

/// How many sessions run `run` has open.
pub(crate) fn open_in(run: &str) -> usize {
    end_idle();
    sessions().values().filter(|s| s.run == run).count()
}

/// Ends every session of run `run` (it has ended).
pub fn end_run(run: &str) {
    let ending: Vec<Arc<Session>> = sessions()
        .values()
        .filter(|s| s.run == run)
        .cloned()
        .collect();
    for session in ending {
        crate::process::kill_group(session.pid);
        sessions().remove(&session.id);
    }
}

/// Ends the sessions idle for longer than [`IDLE_TIMEOUT`].
fn end_idle() {
    let idle: Vec<Arc<Session>> = sessions()
        .values()
        .filter(|s| {
            s.last_used
                .lock()
                .map(|at| at.elapsed() > IDLE_TIMEOUT)
                .unwrap_or(false)
        })
        .cloned()
        .collect();
    for session in idle {
        tracing::debug!(session = %session.id, "Exec session ended: idle.");
        crate::process::kill_group(session.pid);
        sessions().remove(&session.id);
    }
}
