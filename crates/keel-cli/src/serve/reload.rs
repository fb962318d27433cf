//! Reloading `keel serve`'s workspace on SIGHUP and, with `server.watch: true`, when its
//! configuration files change (`docs/workspace.md#reloading-the-workspace`). The files are
//! checked every second by their modification times and sizes — `config/`, `.env` and the
//! overlays of `KEEL_CONFIG_PATHS` —, so no file-notification dependency is needed; a change
//! that does not change the compiled workspace's digest swaps nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::out;

/// How often watched files are checked.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The reload triggers of one server.
pub(crate) struct Reloads {
    hangup: Signal,
    /// The watched files (none without `server.watch`).
    watched: Option<Vec<PathBuf>>,
}

impl Reloads {
    pub(crate) fn install(root: &Path, runtime: &keel::Runtime) -> std::io::Result<Self> {
        let watched = runtime.workspace().runtime.server.watch.then(|| {
            let mut paths = vec![root.join("config"), root.join(".env")];
            if let Ok(overlays) = std::env::var("KEEL_CONFIG_PATHS") {
                paths.extend(
                    overlays
                        .split(':')
                        .filter(|p| !p.is_empty())
                        .map(PathBuf::from),
                );
            }
            paths
        });
        Ok(Self {
            hangup: signal(SignalKind::hangup())?,
            watched,
        })
    }

    /// Reloads on each trigger until the process ends.
    pub(crate) async fn run(mut self, runtime: keel::Runtime) {
        let mut seen = self.watched.as_deref().map(fingerprint);
        let mut ticks = tokio::time::interval(WATCH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let why = tokio::select! {
                got = self.hangup.recv() => match got {
                    Some(()) => "SIGHUP",
                    None => return,
                },
                _ = ticks.tick(), if self.watched.is_some() => {
                    let now = self.watched.as_deref().map(fingerprint);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    "a configuration file changed"
                }
            };
            match keel_server::reload_workspace(&runtime).await {
                Ok(report) if report["changed"] == true => out::status(&format!(
                    "» Reloaded the workspace ({why}): {} ({})",
                    report["digest"].as_str().unwrap_or_default(),
                    report["changes"]
                        .as_array()
                        .map(|c| c.iter().filter_map(|c| c.as_str()).collect::<Vec<_>>())
                        .unwrap_or_default()
                        .join(", ")
                )),
                Ok(_) => out::status(&format!(
                    "» The workspace is unchanged ({why}); nothing to reload."
                )),
                Err(error) => out::status(&format!(
                    "» The workspace was not reloaded ({why}); the loaded one keeps serving:\n{error}"
                )),
            }
        }
    }
}

/// Modification time and size of every file under `paths`, in a stable order.
fn fingerprint(paths: &[PathBuf]) -> Vec<(PathBuf, Option<SystemTime>, u64)> {
    let mut print = Vec::new();
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.filter_map(Result::ok).map(|e| e.path()));
            }
            continue;
        }
        print.push((path, meta.modified().ok(), meta.len()));
    }
    print.sort();
    print
}
