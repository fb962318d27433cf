//! The skills a running workspace uses: the load's scan, cached, and scanned again when a
//! skill's files change, so a long-running `keel serve` picks up new and edited skills
//! without a restart.
//!
//! A run reads [`SkillLibrary::current`] — one lock-free-enough `Arc` clone, no file system
//! access. [`SkillLibrary::refresh`] compares a cheap fingerprint of the roots (each root's,
//! each skill folder's and each `SKILL.md`'s modification time and size) with the one of the
//! last scan and scans again only when it differs; the SDK calls it from a background task
//! every `skills.refreshInterval`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use super::{Skill, SkillRoot, SkillScan, scan_skills};
use crate::Diagnostic;

/// The skills of one scan.
#[derive(Debug, Default)]
pub struct SkillSet {
    /// The valid skills, by name.
    pub skills: BTreeMap<String, Skill>,
    /// What the scan found wrong: the broken skills are left out and their problems kept
    /// here, at load as after a refresh (`keel validate` reports them as errors).
    pub problems: Vec<Diagnostic>,
    /// The names of the skills left out for those problems.
    pub broken: BTreeSet<String>,
    /// Skills an overriding root replaced: `(winner, hidden)` files.
    pub overridden: Vec<(PathBuf, PathBuf)>,
    /// Counts the scans: 1 for the load's, then one more for each rescan.
    pub generation: u64,
    fingerprint: Fingerprint,
}

impl SkillSet {
    /// The skill called `name`, if the scan found a valid one.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }
}

/// Where skills come from and what was last found there.
#[derive(Debug)]
pub struct SkillLibrary {
    workspace: PathBuf,
    roots: Vec<SkillRoot>,
    current: RwLock<Arc<SkillSet>>,
}

impl SkillLibrary {
    /// A library holding `scan`, the scan of `roots` just made.
    pub fn new(workspace: &Path, roots: Vec<SkillRoot>, scan: SkillScan) -> Self {
        let fingerprint = fingerprint(workspace, &roots);
        let set = SkillSet {
            skills: scan.skills,
            problems: scan.diagnostics,
            broken: scan.broken,
            overridden: scan.overridden,
            generation: 1,
            fingerprint,
        };
        Self {
            workspace: workspace.to_path_buf(),
            roots,
            current: RwLock::new(Arc::new(set)),
        }
    }

    /// A library without roots (a workspace built in code).
    pub fn empty(workspace: &Path) -> Self {
        Self::new(workspace, Vec::new(), SkillScan::default())
    }

    /// Scans `roots` (relative ones from `workspace`) now.
    pub fn scan(workspace: &Path, roots: Vec<SkillRoot>) -> Self {
        let scan = scan_skills(workspace, &roots);
        Self::new(workspace, roots, scan)
    }

    /// The roots, in precedence order.
    pub fn roots(&self) -> &[SkillRoot] {
        &self.roots
    }

    /// The skills of the latest scan.
    pub fn current(&self) -> Arc<SkillSet> {
        match self.current.read() {
            Ok(set) => Arc::clone(&set),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Scans again if a skill's files changed since the last scan; returns the new set when
    /// it did. Blocking (file system reads): call it off the async executor.
    pub fn refresh(&self) -> Option<Arc<SkillSet>> {
        let now = fingerprint(&self.workspace, &self.roots);
        if now == self.current().fingerprint {
            return None;
        }
        Some(self.rescan_with(now))
    }

    /// Scans again, whatever changed.
    pub fn rescan(&self) -> Arc<SkillSet> {
        self.rescan_with(fingerprint(&self.workspace, &self.roots))
    }

    fn rescan_with(&self, fingerprint: Fingerprint) -> Arc<SkillSet> {
        let scan = scan_skills(&self.workspace, &self.roots);
        let generation = self.current().generation + 1;
        let set = Arc::new(SkillSet {
            skills: scan.skills,
            problems: scan.diagnostics,
            broken: scan.broken,
            overridden: scan.overridden,
            generation,
            fingerprint,
        });
        match self.current.write() {
            Ok(mut current) => *current = Arc::clone(&set),
            Err(poisoned) => *poisoned.into_inner() = Arc::clone(&set),
        }
        set
    }
}

/// What a change to a root shows in: (path, modification time, size) of each root, each
/// folder in it and each `SKILL.md`, in a stable order.
type Fingerprint = Vec<(PathBuf, Option<SystemTime>, u64)>;

fn fingerprint(workspace: &Path, roots: &[SkillRoot]) -> Fingerprint {
    let mut print = Vec::new();
    let stamp = |path: PathBuf, print: &mut Fingerprint| {
        let meta = std::fs::metadata(&path).ok();
        let modified = meta.as_ref().and_then(|m| m.modified().ok());
        let len = meta.map_or(0, |m| m.len());
        print.push((path, modified, len));
    };
    for root in roots {
        let dir = match root.path.is_absolute() {
            true => root.path.clone(),
            false => workspace.join(&root.path),
        };
        stamp(dir.clone(), &mut print);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        folders.sort();
        for folder in folders {
            stamp(folder.join("SKILL.md"), &mut print);
            stamp(folder, &mut print);
        }
    }
    print
}
