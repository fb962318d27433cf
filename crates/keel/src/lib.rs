//! keel
