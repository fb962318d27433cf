//! The life of a tool source (an MCP server) as the runtime records it in
//! `runtime.mcp.lifecycle`: a closed set of wire names.

use serde::{Deserialize, Serialize};

use crate::wire_name::wire_names;

wire_names! {
    /// What happened in the life of a tool source (an MCP server), as
    /// `runtime.mcp.lifecycle` records it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum SourceLifecycle: "tool source lifecycle" {
        /// Connecting for the first time.
        Starting = "starting",
        /// Connected; its tools are listed.
        Ready = "ready",
        /// It failed or crashed (`detail` says why).
        Down = "down",
        /// Connecting again after a failure, with backoff.
        Restarting = "restarting",
        /// It announced a new tool list, which replaced the old one.
        ToolsChanged = "tools_changed",
        /// Stopped by the runtime (shutdown, reload).
        Stopped = "stopped",
    }
}
