//! keel-models
