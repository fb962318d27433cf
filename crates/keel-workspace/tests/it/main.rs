//! Integration tests of the workspace loader: real files in temp folders, loaded through the
//! public API.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod env;
mod errors;
mod explain;
mod fidelity;
mod governance;
mod load;
mod mcp;
mod observability;
mod overlays;
mod positions;
mod skills;
mod support;
mod workflows;
mod yaml_value;
