//! keel-cli
