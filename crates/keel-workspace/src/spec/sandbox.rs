//! `sandbox:` — what the operating system lets a process Keel starts do (`docs/sandbox.md`):
//! on the Runtime (the default of every process), and overridden per Agent (its `shell` and
//! skill scripts), Tool, McpServer and Hook, field by field.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A sandbox profile; a field left out is taken from the level below (Tool, McpServer or
/// Hook → Agent → Runtime → the built-in default, `off`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SandboxSpec {
    /// What the process may read and write: `workspace-write` (read the system's usual
    /// read-only folders, the workspace and the program's own installation; write only the
    /// workspace and the run's temporary folder), `read-only` (the same reads, no writes but
    /// the temporary folder), or `off`.
    pub filesystem: Option<FilesystemMode>,
    /// `deny`: no internet sockets (IPv4, IPv6, raw); `allow`: any.
    pub network: Option<NetworkMode>,
    /// More folders or files the process may read (absolute, or relative to the workspace).
    pub read_paths: Option<Vec<String>>,
    /// More folders or files the process may read and write.
    pub write_paths: Option<Vec<String>>,
    /// Resource limits of the process (and what it starts).
    pub limits: Option<SandboxLimits>,
    /// Bubblewrap's namespaces (pid, mount, IPC, and network when it is denied): `auto`
    /// (default) uses them where bubblewrap is installed and Landlock is not available; `on`
    /// always (about 7 ms more per process start; refused where bubblewrap is missing); `off`
    /// never.
    pub namespaces: Option<NamespacesMode>,
    /// When this machine cannot enforce the profile: `deny` (default) refuses to start the
    /// process, naming what is missing; `warn` starts it with what can be enforced and says so.
    pub fallback: Option<SandboxFallback>,
}

/// A process's resource limits; each left out is not limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SandboxLimits {
    /// CPU time, in seconds (the process is killed past it).
    #[schemars(range(min = 1))]
    pub cpu_seconds: Option<u64>,
    /// Address space: bytes, or a size such as `512MiB` or `2GB`.
    pub memory: Option<ByteSize>,
    /// Processes and threads at once, the process's own included.
    #[schemars(range(min = 1))]
    pub processes: Option<u32>,
    /// The largest file the process may write: bytes, or a size.
    pub file_size: Option<ByteSize>,
    /// Open files at once.
    #[schemars(range(min = 16))]
    pub open_files: Option<u64>,
}

/// What the filesystem lets a sandboxed process do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FilesystemMode {
    WorkspaceWrite,
    ReadOnly,
    Off,
}

/// Whether a sandboxed process may open internet sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Deny,
    Allow,
}

/// Whether a sandboxed process gets bubblewrap's namespaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NamespacesMode {
    #[default]
    Auto,
    On,
    Off,
}

/// What happens when a profile cannot be enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxFallback {
    #[default]
    Deny,
    Warn,
}

impl SandboxSpec {
    /// This profile with the fields it leaves out taken from `base`.
    pub fn over(&self, base: &SandboxSpec) -> SandboxSpec {
        SandboxSpec {
            filesystem: self.filesystem.or(base.filesystem),
            network: self.network.or(base.network),
            read_paths: self.read_paths.clone().or_else(|| base.read_paths.clone()),
            write_paths: self
                .write_paths
                .clone()
                .or_else(|| base.write_paths.clone()),
            limits: match (self.limits, base.limits) {
                (Some(mine), Some(theirs)) => Some(SandboxLimits {
                    cpu_seconds: mine.cpu_seconds.or(theirs.cpu_seconds),
                    memory: mine.memory.or(theirs.memory),
                    processes: mine.processes.or(theirs.processes),
                    file_size: mine.file_size.or(theirs.file_size),
                    open_files: mine.open_files.or(theirs.open_files),
                }),
                (mine, theirs) => mine.or(theirs),
            },
            namespaces: self.namespaces.or(base.namespaces),
            fallback: self.fallback.or(base.fallback),
        }
    }

    /// Whether the profile asks for anything at all.
    pub fn is_off(&self) -> bool {
        matches!(self.filesystem, None | Some(FilesystemMode::Off))
            && self.network != Some(NetworkMode::Deny)
            && self.namespaces != Some(NamespacesMode::On)
            && self.limits.is_none_or(|l| l == SandboxLimits::default())
    }

    /// The profile `keel init` writes for `shell`, command tools and skill scripts.
    pub fn recommended() -> SandboxSpec {
        SandboxSpec {
            filesystem: Some(FilesystemMode::WorkspaceWrite),
            network: Some(NetworkMode::Deny),
            limits: Some(SandboxLimits {
                processes: Some(256),
                ..SandboxLimits::default()
            }),
            ..SandboxSpec::default()
        }
    }
}

/// A size in bytes, written as a number or with a unit (`512MiB`, `2GB`, `64k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `512MiB`, `2 GB`, `64k` or `1048576`.
    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: f64 = number
            .parse()
            .map_err(|_| format!("invalid size `{text}`: expected a number and a unit"))?;
        let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1_000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            "t" | "tb" => 1_000_000_000_000,
            "tib" => 1 << 40,
            other => {
                return Err(format!(
                    "invalid size `{text}`: unknown unit `{other}` (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)"
                ));
            }
        };
        let bytes = number * factor as f64;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
            return Err(format!("invalid size `{text}`: out of range"));
        }
        Ok(ByteSize(bytes as u64))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Text(String),
        }
        match Written::deserialize(d)? {
            Written::Number(0) => Err(serde::de::Error::custom("a size must be at least 1 byte")),
            Written::Number(n) => Ok(ByteSize(n)),
            Written::Text(text) => ByteSize::parse(&text).map_err(serde::de::Error::custom),
        }
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": "^ *[0-9]+(\\.[0-9]+)? *([kKmMgGtT]([iI]?[bB])?|[bB])? *$"}
            ],
            "description": "bytes, or a size such as 512MiB or 2GB"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_units() {
        assert_eq!(ByteSize::parse("512MiB"), Ok(ByteSize(512 << 20)));
        assert_eq!(ByteSize::parse("2 GB"), Ok(ByteSize(2_000_000_000)));
        assert_eq!(ByteSize::parse("64k"), Ok(ByteSize(64_000)));
        assert_eq!(ByteSize::parse("1.5GiB"), Ok(ByteSize(3 << 29)));
        assert!(
            ByteSize::parse("12 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(ByteSize::parse("MiB").is_err());
    }

    #[test]
    fn a_profile_takes_what_it_leaves_out_from_below() {
        let runtime = SandboxSpec::recommended();
        let tool = SandboxSpec {
            network: Some(NetworkMode::Allow),
            limits: Some(SandboxLimits {
                memory: Some(ByteSize(1 << 30)),
                ..SandboxLimits::default()
            }),
            ..SandboxSpec::default()
        };
        let merged = tool.over(&runtime);
        assert_eq!(merged.filesystem, Some(FilesystemMode::WorkspaceWrite));
        assert_eq!(merged.network, Some(NetworkMode::Allow));
        let limits = merged.limits.unwrap();
        assert_eq!(
            (limits.processes, limits.memory),
            (Some(256), Some(ByteSize(1 << 30)))
        );
        assert!(SandboxSpec::default().is_off());
        assert!(!merged.is_off());
    }
}
