//! The tool gateway and Keel's own tools.
//!
//! [`gateway`] is the one path every tool call takes (inventory → parse → schema validation →
//! execution); [`builtin`] holds the built-in tools, [`command`] runs declared command tools,
//! and [`paths`] keeps every path inside the workspace. Start reading at
//! [`gateway::Gateway`].

use std::path::Path;
use std::sync::Arc;

use keel_types::Tool;
use keel_workspace::ToolSpecDoc;

pub mod builtin;
pub mod command;
pub mod gateway;
pub mod paths;

/// The tool a workspace's `Tool` document declares, whatever its kind.
pub fn declared(name: &str, doc: &ToolSpecDoc, workspace_root: &Path) -> Arc<dyn Tool> {
    Arc::new(command::CommandTool::new(name, doc, workspace_root))
}
