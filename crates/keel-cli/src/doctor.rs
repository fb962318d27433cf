//! `keel doctor`: what this machine can enforce, whether the workspace's sandbox profiles
//! are enforceable here, the store, and each MCP stdio server's program — with a one-line
//! verdict, and exit 1 when something the workspace needs is missing.

use std::path::{Path, PathBuf};

use clap::Args;
use keel::Workspace;
use keel::sandbox::{Machine, Profile, Sandboxes, on_path};
use keel_workspace::{HookHandler, McpTransport, SandboxFallback, ToolImpl};
use serde_json::json;

use crate::error::CliError;
use crate::out;

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The report as one JSON document.
    #[arg(long)]
    json: bool,
}

/// One profile the workspace asks for.
#[derive(Debug)]
struct ProfileReport {
    /// `runtime`, `agent`, `tool`, `mcpServer` or `hook`.
    scope: &'static str,
    name: String,
    record: keel_types::SandboxRecord,
    /// Whether a process can start in it here (nothing missing, or `fallback: warn`).
    enforceable: bool,
}

/// One stdio MCP server's program.
#[derive(Debug)]
struct ServerReport {
    name: String,
    program: String,
    found: Option<PathBuf>,
}

pub(crate) async fn doctor(root: &Path, args: DoctorArgs) -> Result<(), CliError> {
    let workspace = Workspace::load(root)?;
    let machine = Machine::get();
    let profiles = profiles(&workspace);
    let servers = servers(&workspace);
    let store = crate::store::inspect(&workspace).await;
    let mut problems: Vec<String> = Vec::new();
    for profile in profiles.iter().filter(|p| !p.enforceable) {
        problems.push(format!(
            "the sandbox of {} `{}` cannot be enforced: {}",
            profile.scope,
            profile.name,
            profile.record.missing.join("; ")
        ));
    }
    for server in servers.iter().filter(|s| s.found.is_none()) {
        problems.push(format!(
            "MCP server `{}`: program `{}` not found",
            server.name, server.program
        ));
    }
    let store_line = match &store {
        Ok(report) => {
            if let Some(problem) = &report.problem {
                problems.push(format!("the store: {problem}"));
            }
            json!({
                "kind": report.kind,
                "location": report.location,
                "schemaVersion": report.found,
                "supported": report.supported,
                "problem": report.problem,
            })
        }
        Err(error) => {
            let said = match error {
                CliError::Usage(message) | CliError::Failed(message) => message.clone(),
                other => format!("{other:?}"),
            };
            problems.push(format!("the store: {said}"));
            json!({ "problem": said })
        }
    };
    let verdict = match problems.len() {
        0 => "ok: this machine can run the workspace as it asks".to_owned(),
        1 => format!("not ready: {}", problems[0]),
        n => format!("not ready: {} (and {} more)", problems[0], n - 1),
    };
    if args.json {
        out::line(&serde_json::to_string_pretty(&json!({
            "machine": {
                "landlockAbi": machine.landlock_abi,
                "seccomp": machine.seccomp,
                "userNamespaces": machine.user_namespaces,
                "bubblewrap": machine.bubblewrap,
                "cgroupV2": machine.cgroup_v2,
                "pidsCgroup": machine.pids_cgroup,
                "root": machine.root,
            },
            "profiles": profiles.iter().map(|p| {
                let mut value = serde_json::to_value(&p.record).unwrap_or_default();
                value["scope"] = json!(p.scope);
                value["name"] = json!(p.name);
                value["enforceable"] = json!(p.enforceable);
                value
            }).collect::<Vec<_>>(),
            "store": store_line,
            "mcpServers": servers.iter().map(|s| json!({
                "name": s.name,
                "program": s.program,
                "found": s.found,
            })).collect::<Vec<_>>(),
            "problems": problems,
            "ok": problems.is_empty(),
            "verdict": verdict,
        }))?);
    } else {
        print_text(machine, &profiles, &store_line, &servers, &verdict);
    }
    match problems.is_empty() {
        true => Ok(()),
        // The verdict is printed already.
        false => Err(CliError::Silent(crate::error::EXIT_FAILED)),
    }
}

fn print_text(
    machine: &Machine,
    profiles: &[ProfileReport],
    store: &serde_json::Value,
    servers: &[ServerReport],
    verdict: &str,
) {
    let yes = |b: bool| if b { "yes" } else { "no" };
    out::line("machine");
    let landlock = match machine.landlock_abi {
        0 => "no".to_owned(),
        abi => format!("ABI {abi}"),
    };
    let rows = [
        ("landlock", landlock),
        ("seccomp", yes(machine.seccomp).to_owned()),
        ("user namespaces", yes(machine.user_namespaces).to_owned()),
        (
            "bubblewrap",
            machine
                .bubblewrap
                .as_ref()
                .map_or("not installed".to_owned(), |p| p.display().to_string()),
        ),
        (
            "cgroup",
            format!(
                "{}; process limits {}",
                if machine.cgroup_v2 { "v2" } else { "v1" },
                match (&machine.pids_cgroup, machine.root) {
                    (Some(dir), _) => format!("by the pids cgroup {}", dir.display()),
                    (None, false) => "by the process rlimit".to_owned(),
                    (None, true) => "unavailable (root, no writable pids cgroup)".to_owned(),
                }
            ),
        ),
    ];
    for (name, value) in rows {
        out::line(&format!("  {name:<16} {value}"));
    }
    out::line("sandbox profiles");
    if profiles.is_empty() {
        out::line("  none: processes start without a sandbox (docs/sandbox.md)");
    }
    for profile in profiles {
        let record = &profile.record;
        let mut line = format!(
            "  {} {}: filesystem {}, network {}",
            profile.scope, profile.name, record.filesystem, record.network
        );
        if !record.limits.is_empty() {
            line.push_str(&format!(", {}", record.limits.join(", ")));
        }
        line.push_str(&format!(" — by {}", record.mechanisms.join(", ")));
        if !record.missing.is_empty() {
            let how = match profile.enforceable {
                true => "runs without",
                false => "REFUSED, missing",
            };
            line.push_str(&format!(" — {how}: {}", record.missing.join("; ")));
        }
        out::line(&line);
    }
    out::line("store");
    match store.get("kind") {
        Some(kind) => out::line(&format!(
            "  {} {}: schema version {} (this keel: {}){}",
            kind.as_str().unwrap_or_default(),
            store["location"].as_str().unwrap_or_default(),
            store["schemaVersion"],
            store["supported"],
            match store["problem"].as_str() {
                Some(problem) => format!(" — {problem}"),
                None => ", reads and writes work".to_owned(),
            }
        )),
        None => out::line(&format!(
            "  unusable: {}",
            store["problem"].as_str().unwrap_or_default()
        )),
    }
    if !servers.is_empty() {
        out::line("mcp stdio servers");
        for server in servers {
            let found = match &server.found {
                Some(path) => format!("found at {}", path.display()),
                None => "NOT FOUND".to_owned(),
            };
            out::line(&format!("  {}: `{}` {found}", server.name, server.program));
        }
    }
    out::line(&format!("verdict: {verdict}"));
}

/// Every profile the workspace asks for, where it applies.
fn profiles(workspace: &Workspace) -> Vec<ProfileReport> {
    let sandboxes = Sandboxes::of(workspace);
    let mut reports = Vec::new();
    let mut add = |scope: &'static str, name: &str, profile: Option<Profile>| {
        if let Some(profile) = profile {
            let record = profile.record();
            let enforceable =
                record.missing.is_empty() || profile.fallback == SandboxFallback::Warn;
            reports.push(ProfileReport {
                scope,
                name: name.to_owned(),
                record,
                enforceable,
            });
        }
    };
    add("runtime", "default", sandboxes.profile("", None));
    for (name, agent) in &workspace.agents {
        if agent.sandbox.is_some() {
            add("agent", name, sandboxes.profile(name, None));
        }
    }
    for (name, tool) in &workspace.tools {
        if matches!(tool.implementation, ToolImpl::Command { .. }) && tool.sandbox.is_some() {
            add("tool", name, sandboxes.profile("", tool.sandbox.as_ref()));
        }
    }
    for (name, server) in &workspace.mcp_servers {
        if server.transport == McpTransport::Stdio && server.enabled && server.sandbox.is_some() {
            add(
                "mcpServer",
                name,
                sandboxes.profile("", server.sandbox.as_ref()),
            );
        }
    }
    for (name, hook) in &workspace.hooks {
        if matches!(hook.handler, HookHandler::Command { .. })
            && hook.enabled
            && hook.sandbox.is_some()
        {
            add("hook", name, sandboxes.profile("", hook.sandbox.as_ref()));
        }
    }
    reports
}

/// Each enabled stdio MCP server's program, and where it was found.
fn servers(workspace: &Workspace) -> Vec<ServerReport> {
    workspace
        .mcp_servers
        .iter()
        .filter(|(_, s)| s.transport == McpTransport::Stdio && s.enabled)
        .filter_map(|(name, server)| {
            let program = server.command.first()?;
            let found = match program.contains('/') {
                true => Some(workspace.root.join(program)).filter(|p| p.is_file()),
                false => on_path(program),
            };
            Some(ServerReport {
                name: name.clone(),
                program: program.clone(),
                found,
            })
        })
        .collect()
}
