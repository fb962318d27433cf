//! Path containment.
