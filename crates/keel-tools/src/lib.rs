//! The tool gateway and Keel's own tools.
//!
//! [`gateway`] is the one path every tool call takes (inventory → parse → schema validation,
//! with [`repair`]s before blocking → semantic checks → execution); [`builtin`] holds the
//! built-in tools, [`command`] runs declared command tools (on the process machinery of
//! [`process`], shared with `shell`), `http` holds the HTTP client plumbing (shared by
//! `http_fetch`, declared http tools and http hooks) and runs declared http tools,
//! [`paths`] keeps every path inside the workspace,
//! [`policy`] decides allow / ask / deny from the workspace's policies, and [`hooks`] runs
//! `Hook` documents (on the same process and HTTP machinery). Start reading at
//! [`gateway::Gateway`]. [`gateway_eval`] measures the gateway against its contract: malformed
//! calls generated from each tool's schema, guarded (never run) and scored.
//!
//! Feature `http` (on by default) brings the HTTP client (`reqwest`): `http_fetch`, declared
//! `http` tools and `http` hook handlers. Without it those tools keep their names and schemas
//! but every call fails saying why (`unavailable`), and so does every call of an http hook
//! (settled by its `onError`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use keel_types::Tool;
use keel_workspace::{ToolImpl, ToolSpecDoc, Workspace};

pub mod builtin;
pub mod command;
// Terminals: openpty, setsid and ioctls between fork and exec.
#[allow(unsafe_code)]
pub mod exec;
pub mod gateway;
pub mod gateway_eval;
pub mod hooks;
#[cfg(feature = "http")]
pub mod http;
pub mod input;
pub mod paths;
pub mod policy;
pub mod process;
pub mod repair;
// The sandbox is made of system calls between fork and exec: unsafe by nature, kept here.
#[allow(unsafe_code)]
pub mod sandbox;
#[cfg(not(feature = "http"))]
pub mod unavailable;

/// The tool a workspace's `Tool` document declares, whatever its kind. An `http` tool built
/// here masks only its own secret header values in responses; [`declared_in`] also masks the
/// workspace's secret environment values.
pub fn declared(name: &str, doc: &ToolSpecDoc, workspace_root: &Path) -> Arc<dyn Tool> {
    declared_with_env(name, doc, workspace_root, &BTreeMap::new())
}

/// The tool a `Tool` document of `workspace` declares, whatever its kind.
pub fn declared_in(name: &str, doc: &ToolSpecDoc, workspace: &Workspace) -> Arc<dyn Tool> {
    match doc.implementation {
        ToolImpl::Command { .. } => Arc::new(
            command::CommandTool::new(name, doc, &workspace.root)
                .with_sandboxes(sandbox::Sandboxes::of(workspace)),
        ),
        ToolImpl::Http { .. } => declared_with_env(name, doc, &workspace.root, &workspace.env),
    }
}

fn declared_with_env(
    name: &str,
    doc: &ToolSpecDoc,
    workspace_root: &Path,
    env: &BTreeMap<String, String>,
) -> Arc<dyn Tool> {
    match doc.implementation {
        ToolImpl::Command { .. } => Arc::new(command::CommandTool::new(name, doc, workspace_root)),
        #[cfg(feature = "http")]
        ToolImpl::Http { .. } => Arc::new(http::HttpTool::new(name, doc, env)),
        #[cfg(not(feature = "http"))]
        ToolImpl::Http { .. } => {
            let _ = env;
            Arc::new(unavailable::Unavailable::declared_http(name, doc))
        }
    }
}
