//! Path containment: every path a tool touches is resolved here, inside the workspace.
//!
//! [`resolve`] turns a path the model asked for into the real (canonical) path on disk, or
//! refuses it: `..` components are rejected outright, absolute paths must already lie inside
//! the root, and symlinks are resolved so that a link pointing outside the workspace cannot be
//! used to read or write there. Writes are also refused inside `.keel/`, Keel's own state.
//! [`display`] renders a resolved path the way the model should see it: relative to the root.
//! [`issue`] runs the same resolution for a tool's `check`, so the gateway blocks an escaping
//! path before the tool runs; the tools resolve again when they run (defence in depth).
//!
//! The check happens before the file operation, so a process racing the tool (swapping a
//! directory for a symlink in between) is outside what this module defends against; the model
//! itself cannot do that through the file tools.

use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};

use keel_types::{Issue, ToolError};

/// The folder inside the workspace that holds Keel's own state.
pub const STATE_DIR: &str = ".keel";

/// What the caller is going to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read (or list) it: the path must exist, and is returned fully canonicalized.
    Read,
    /// Create or replace a file there: the parent directories may be missing (the existing
    /// part is canonicalized, the rest is appended as written); refused inside `.keel/` and
    /// for the workspace root itself.
    Write,
}

/// Workspace roots already resolved: root as given → its canonical form. Every file tool call
/// resolves its root (twice: the gateway's check and the call), and `realpath` costs a system
/// call per component of the root's path; a cached root costs one `stat`.
static ROOTS: LazyLock<Mutex<HashMap<PathBuf, PathBuf>>> = LazyLock::new(Mutex::default);

/// How many roots [`ROOTS`] keeps before it starts again (a process serves a few workspaces).
const ROOTS_KEPT: usize = 64;

/// The canonical form of the workspace root. It is resolved once per process and root, and
/// resolved again when the folder it named is gone (moved or deleted).
pub fn canonical_root(root: &Path) -> Result<PathBuf, ToolError> {
    let cached = ROOTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(root)
        .cloned();
    if let Some(canonical) = cached.filter(|canonical| canonical.is_dir()) {
        return Ok(canonical);
    }
    let canonical = root.canonicalize().map_err(|e| {
        ToolError::Io(format!(
            "cannot open the workspace root `{}`: {e}",
            root.display()
        ))
    })?;
    let mut roots = ROOTS.lock().unwrap_or_else(PoisonError::into_inner);
    if roots.len() >= ROOTS_KEPT {
        roots.clear();
    }
    roots.insert(root.to_path_buf(), canonical.clone());
    Ok(canonical)
}

/// Resolves `requested` (relative to `root`, or absolute inside it) to a real path inside the
/// workspace, or fails with [`ToolError::PathEscape`] when it would leave it.
///
/// An empty path means the root itself.
pub fn resolve(root: &Path, requested: &str, mode: Access) -> Result<PathBuf, ToolError> {
    let root = canonical_root(root)?;
    let parts = relative_parts(&root, requested)?;
    match mode {
        Access::Read => resolve_existing(&root, &parts, requested),
        Access::Write => resolve_for_write(&root, &parts, requested),
    }
}

/// `expected` of a path argument that must be inside the workspace (the gateway's headline
/// of a blocked call tells path problems by it).
pub const EXPECTED_PATH: &str = "a path inside the workspace";
/// `expected` of a path argument that must be a writable file inside the workspace.
pub const EXPECTED_WRITABLE_PATH: &str =
    "a writable file path inside the workspace (not under `.keel/`)";

/// The issue raised by the path argument at JSON pointer `pointer` (e.g. `/path`) holding
/// `requested`, if resolving it for `mode` escapes the workspace or is refused (`.keel/`, the
/// root as a file). Paths that merely do not exist raise no issue: the tool reports them.
pub fn issue(root: &Path, pointer: &str, requested: &str, mode: Access) -> Option<Issue> {
    let message = match resolve(root, requested, mode) {
        Ok(_) | Err(ToolError::Io(_) | ToolError::Timeout(_) | ToolError::Failed(_)) => {
            return None;
        }
        Err(err @ ToolError::PathEscape(_)) => format!(
            "{err}; use a path relative to the workspace root, without `..`, that does not \
             go through a symbolic link pointing outside"
        ),
        Err(ToolError::InvalidArguments(message)) => message,
    };
    let expected = match mode {
        Access::Read => EXPECTED_PATH,
        Access::Write => EXPECTED_WRITABLE_PATH,
    };
    Some(Issue {
        path: pointer.to_owned(),
        expected: expected.to_owned(),
        found: requested.to_owned(),
        message,
    })
}

/// `path` (a resolved path) relative to the canonical `root`, with `/` separators; `.` for the
/// root itself. Paths outside the root are shown as they are.
pub fn display(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => path.display().to_string(),
    }
}

/// Whether `path` (canonical) is the state folder or inside it.
pub fn is_state_path(root: &Path, path: &Path) -> bool {
    path.starts_with(root.join(STATE_DIR))
}

/// The normal components of `requested`, relative to `root`.
fn relative_parts(root: &Path, requested: &str) -> Result<Vec<PathBuf>, ToolError> {
    let escape = || ToolError::PathEscape(requested.to_owned());
    if requested.contains('\0') {
        return Err(ToolError::InvalidArguments(
            "paths cannot contain NUL characters".to_owned(),
        ));
    }
    let path = Path::new(requested);
    let relative = if path.is_absolute() {
        absolute_inside(root, path).ok_or_else(escape)?
    } else {
        path.to_path_buf()
    };
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(PathBuf::from(part)),
            Component::CurDir => {}
            // `..` is never needed to name a file inside the workspace.
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escape());
            }
        }
    }
    Ok(parts)
}

/// The part of an absolute `path` below `root`, if it is lexically inside it. The real-path
/// check happens later, after symlinks are resolved.
fn absolute_inside(root: &Path, path: &Path) -> Option<PathBuf> {
    if let Ok(rel) = path.strip_prefix(root) {
        return Some(rel.to_path_buf());
    }
    // The caller may spell the root through a symlink (e.g. `/tmp` → `/private/tmp`): find
    // the longest existing ancestor, canonicalize it, and compare again.
    let mut ancestor = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = ancestor.canonicalize() {
            let mut rel = real.strip_prefix(root).ok()?.to_path_buf();
            rel.extend(rest.iter().rev());
            return Some(rel);
        }
        rest.push(ancestor.file_name()?.to_os_string());
        ancestor = ancestor.parent()?;
    }
}

fn resolve_existing(root: &Path, parts: &[PathBuf], requested: &str) -> Result<PathBuf, ToolError> {
    if let Some(real) = real_below(root, parts) {
        return Ok(real);
    }
    let joined = parts.iter().fold(root.to_path_buf(), |acc, p| acc.join(p));
    let real = joined.canonicalize().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound if joined.symlink_metadata().is_ok() => {
            // A dangling symlink: where it points cannot be checked, so it is refused.
            ToolError::PathEscape(requested.to_owned())
        }
        // A missing entry below a link that leads out: even "does not exist" would tell the
        // caller something about the world outside.
        io::ErrorKind::NotFound if existing_ancestor_escapes(root, parts) => {
            ToolError::PathEscape(requested.to_owned())
        }
        io::ErrorKind::NotFound => ToolError::Io(format!("`{requested}` does not exist")),
        _ => ToolError::Io(format!("cannot open `{requested}`: {e}")),
    })?;
    if real.starts_with(root) {
        Ok(real)
    } else {
        Err(ToolError::PathEscape(requested.to_owned()))
    }
}

/// `root/parts…` when it exists and no component below the canonical `root` is a symbolic
/// link: then it is its own canonical form (the parts are plain names, never `.` or `..`),
/// which one `lstat` per component shows without a `realpath` over the root's components.
/// `None` sends the caller to the full resolution (links, missing entries, errors).
fn real_below(root: &Path, parts: &[PathBuf]) -> Option<PathBuf> {
    let mut current = root.to_path_buf();
    let plain = parts.iter().all(|part| {
        current.push(part);
        current
            .symlink_metadata()
            .is_ok_and(|meta| !meta.file_type().is_symlink())
    });
    plain.then_some(current)
}

/// Whether the deepest existing ancestor of `root/parts…` resolves outside `root` (or cannot
/// be resolved at all).
fn existing_ancestor_escapes(root: &Path, parts: &[PathBuf]) -> bool {
    for depth in (0..parts.len()).rev() {
        let prefix = parts
            .iter()
            .take(depth)
            .fold(root.to_path_buf(), |acc, p| acc.join(p));
        if prefix.symlink_metadata().is_ok() {
            return prefix
                .canonicalize()
                .map_or(true, |real| !real.starts_with(root));
        }
    }
    false
}

fn resolve_for_write(
    root: &Path,
    parts: &[PathBuf],
    requested: &str,
) -> Result<PathBuf, ToolError> {
    if parts.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "`{requested}` names the workspace root, not a file"
        )));
    }
    if parts.first().is_some_and(|p| p.as_os_str() == STATE_DIR) {
        return Err(state_refused(requested));
    }
    // Walk the existing prefix one component at a time, resolving symlinks as we go; the
    // first missing component and everything after it will be created as plain entries.
    let mut current = root.to_path_buf();
    for (index, part) in parts.iter().enumerate() {
        let next = current.join(part);
        match next.symlink_metadata() {
            Ok(_) => {
                current = next.canonicalize().map_err(|e| match e.kind() {
                    io::ErrorKind::NotFound => ToolError::PathEscape(requested.to_owned()),
                    _ => ToolError::Io(format!("cannot open `{requested}`: {e}")),
                })?;
                if !current.starts_with(root) {
                    return Err(ToolError::PathEscape(requested.to_owned()));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                current = parts
                    .iter()
                    .skip(index)
                    .fold(current, |acc, rest| acc.join(rest));
                break;
            }
            Err(e) => return Err(ToolError::Io(format!("cannot open `{requested}`: {e}"))),
        }
    }
    if current == root {
        return Err(ToolError::InvalidArguments(format!(
            "`{requested}` names the workspace root, not a file"
        )));
    }
    if is_state_path(root, &current) {
        return Err(state_refused(requested));
    }
    Ok(current)
}

fn state_refused(requested: &str) -> ToolError {
    ToolError::InvalidArguments(format!(
        "`{requested}` is inside `{STATE_DIR}/`, which holds Keel's own state and cannot be written"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_relative_with_slashes() {
        let root = Path::new("/ws");
        assert_eq!(display(root, Path::new("/ws")), ".");
        assert_eq!(display(root, Path::new("/ws/src/lib.rs")), "src/lib.rs");
        assert_eq!(display(root, Path::new("/elsewhere/x")), "/elsewhere/x");
    }

    #[test]
    fn parent_components_are_rejected_before_touching_the_disk() {
        let root = Path::new("/no/such/root");
        for requested in ["..", "a/../b", "./../x"] {
            assert_eq!(
                relative_parts(root, requested),
                Err(ToolError::PathEscape(requested.to_owned()))
            );
        }
        assert_eq!(
            relative_parts(root, "./a//b/."),
            Ok(vec![PathBuf::from("a"), PathBuf::from("b")])
        );
    }
}
