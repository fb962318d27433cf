//! Identifiers: sortable (UUIDv7-based) strings with a short prefix naming what they identify.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A new sortable identifier with the given prefix, e.g. `run_0193…`.
pub fn new_id(prefix: &str) -> String {
    // UUIDv7 layout (48-bit millisecond time, then random bits) with the random part from a
    // fast thread-local generator: ids are made for every event, and asking the OS for
    // randomness each time is a system call per event.
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let random: [u8; 10] = std::array::from_fn(|_| fastrand::u8(..));
    let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
    let mut buf = uuid::Uuid::encode_buffer();
    format!("{prefix}_{}", uuid.simple().encode_lower(&mut buf))
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// A fresh identifier.
            pub fn generate() -> Self {
                Self(new_id($prefix))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(value)
            }
        }
    };
}

id_type!(
    /// Identifies a request and the run that records it.
    RequestId,
    "run"
);
id_type!(
    /// Identifies a session (a conversation boundary spanning requests).
    SessionId,
    "ses"
);
id_type!(
    /// Identifies one event.
    EventId,
    "evt"
);
