//! The tool gateway and Keel's own tools.
//!
//! [`gateway`] is the one path every tool call takes (inventory → parse → schema validation →
//! execution); [`builtin`] holds the file tools, [`command`] runs declared command tools and
//! [`paths`] keeps every path inside the workspace. Start reading at [`gateway::Gateway`].

pub mod builtin;
pub mod command;
pub mod gateway;
pub mod paths;
