//! What a sandboxed process's error output says the sandbox refused, in words the model can
//! act on ("the sandbox blocked writing /etc/hosts: filesystem is workspace-write").

use std::path::Path;

use keel_workspace::{FilesystemMode, NetworkMode};

use super::{DEVICE_WRITE, Profile, SYSTEM_READ, mode_word};

/// Words of error output that name a network call (`network is unreachable`: a network
/// namespace of its own).
const NETWORK_WORDS: &[&str] = &[
    "socket",
    "connect",
    "urlopen",
    "requests.",
    "http",
    "network",
    "tcp",
    "econn",
];
/// Words of a line that name a write.
const WRITE_WORDS: &[&str] = &[
    "cannot create",
    "write",
    "touch",
    "mkdir",
    "read-only file system",
    "creat",
    "cannot remove",
    "rename",
    "copy",
];
/// The most refusals one result names.
const MOST: usize = 3;

/// The refusals the sandbox made that `stderr` shows: a denied read or write of a path outside
/// what the profile allows, an internet socket refused, the memory limit reached. Empty when
/// the errors are not the sandbox's doing (a path the profile allows was refused by the
/// file's own permissions, say).
pub fn explain(profile: &Profile, stderr: &str) -> Vec<String> {
    let lower = stderr.to_ascii_lowercase();
    let mut said: Vec<String> = Vec::new();
    let mut say = |text: String| {
        if !said.contains(&text) && said.len() < MOST {
            said.push(text);
        }
    };
    if let Some(memory) = profile.limits.memory
        && [
            "memoryerror",
            "cannot allocate memory",
            "out of memory",
            "bad_alloc",
        ]
        .iter()
        .any(|w| lower.contains(w))
    {
        say(format!(
            "the sandbox's memory limit ({} bytes of address space) was reached",
            memory.0
        ));
    }
    // Internet sockets are refused with EPERM by the seccomp filter (or EACCES by Landlock).
    let socket_refused = lower.contains("operation not permitted")
        || lower.contains("network is unreachable")
        || lower.contains("errno 1]")
        || lower.contains("eperm")
        || lower.contains("eacces");
    if profile.network == NetworkMode::Deny
        && socket_refused
        && NETWORK_WORDS.iter().any(|w| lower.contains(w))
    {
        say("the sandbox blocked a network connection: network is deny".to_owned());
    }
    // Under bubblewrap what the profile does not allow is not there at all.
    let bubblewrap = profile.uses_bubblewrap();
    if profile.filesystem != FilesystemMode::Off {
        for line in lower.lines().zip(stderr.lines()) {
            let (lower_line, line) = line;
            let hidden = bubblewrap && lower_line.contains("no such file or directory");
            let refused = hidden
                || lower_line.contains("permission denied")
                || lower_line.contains("read-only file system")
                || lower_line.contains("operation not permitted");
            let Some(path) = refused.then(|| first_path(line)).flatten() else {
                continue;
            };
            let writing = WRITE_WORDS.iter().any(|w| lower_line.contains(w));
            if allowed(profile, Path::new(path), writing) {
                continue;
            }
            let what = match (hidden, writing) {
                (true, _) => format!("the sandbox hides {path}"),
                (false, true) => format!("the sandbox blocked writing {path}"),
                (false, false) => format!("the sandbox blocked reading {path}"),
            };
            say(format!(
                "{what}: filesystem is {}",
                mode_word(profile.filesystem)
            ));
        }
    }
    said
}

/// The first absolute path in `line`.
fn first_path(line: &str) -> Option<&str> {
    line.split(|c: char| {
        c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | ',' | '(' | ')' | '[' | ']')
    })
    .find(|w| w.starts_with('/') && w.len() > 1)
}

/// Whether the profile itself lets `path` be read (or written).
fn allowed(profile: &Profile, path: &Path, writing: bool) -> bool {
    let writable = profile.filesystem == FilesystemMode::WorkspaceWrite
        && path.starts_with(&profile.workspace)
        || profile.write_paths.iter().any(|p| path.starts_with(p))
        || DEVICE_WRITE.iter().any(|p| path.starts_with(p))
        || path.starts_with(std::env::temp_dir().join("keel-sandbox"));
    if writing {
        return writable;
    }
    writable
        || path.starts_with(&profile.workspace)
        || profile.read_paths.iter().any(|p| path.starts_with(p))
        || SYSTEM_READ.iter().any(|p| path.starts_with(p))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use keel_workspace::SandboxSpec;

    use super::*;

    fn profile() -> Profile {
        Profile::resolve(&SandboxSpec::recommended(), Path::new("/ws")).unwrap()
    }

    #[test]
    fn refusals_outside_the_profile_are_explained() {
        let profile = profile();
        let stderr = "sh: 1: cannot create /etc/hosts: Permission denied\n\
                      cat: /root/secret.txt: Permission denied\n\
                      sh: 1: cannot create /ws/out.txt: Permission denied\n\
                      cat: /etc/shadow: Permission denied";
        assert_eq!(
            explain(&profile, stderr),
            [
                "the sandbox blocked writing /etc/hosts: filesystem is workspace-write",
                "the sandbox blocked reading /root/secret.txt: filesystem is workspace-write",
            ],
            "a path the profile allows was refused by its own permissions, not the sandbox"
        );
    }

    #[test]
    fn a_refused_socket_is_explained() {
        let stderr = "  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n\
                      PermissionError: [Errno 1] Operation not permitted";
        assert_eq!(
            explain(&profile(), stderr),
            ["the sandbox blocked a network connection: network is deny"]
        );
        assert!(explain(&profile(), "No such file or directory").is_empty());
    }
}
