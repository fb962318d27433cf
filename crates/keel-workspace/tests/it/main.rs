//! Integration tests of the workspace loader: real files in temp folders, loaded through the
//! public API.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod env;
mod errors;
mod explain;
mod governance;
mod load;
mod overlays;
mod positions;
mod support;
mod yaml_value;
