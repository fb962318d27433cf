//! Identifiers: sortable (UUIDv7-based) strings with a short prefix naming what they identify.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// A new sortable identifier with the given prefix, e.g. `run_0193…`. Within a process the
/// identifiers sort in the order they were made, also when many are made in one millisecond.
pub fn new_id(prefix: &str) -> String {
    // UUIDv7 layout (48-bit millisecond time, then random bits) with the random part from a
    // fast thread-local generator: ids are made for every event, and asking the OS for
    // randomness each time is a system call per event. The 12 bits after the version are a
    // counter within the millisecond (RFC 9562, 6.2, method 1).
    let (millis, counter) = next_tick();
    let mut random: [u8; 10] = std::array::from_fn(|_| fastrand::u8(..));
    let [high, low] = counter.to_be_bytes();
    random[0] = high;
    random[1] = low;
    let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
    let mut buf = uuid::Uuid::encode_buffer();
    let hex = uuid.simple().encode_lower(&mut buf);
    let mut id = String::with_capacity(prefix.len() + 1 + hex.len());
    id.push_str(prefix);
    id.push('_');
    id.push_str(hex);
    id
}

/// Bits of the counter within a millisecond.
const COUNTER_BITS: u32 = 12;

/// The last (milliseconds << 12 | counter) handed out in this process.
static LAST_TICK: AtomicU64 = AtomicU64::new(0);

/// The time and counter of the next identifier: now's millisecond with counter 0, or one past
/// the last one handed out when that is not older (a 4,097th identifier in one millisecond, or
/// a clock that stepped back, borrows the next millisecond).
fn next_tick() -> (u64, u16) {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .min(u64::MAX >> COUNTER_BITS);
    let now = millis << COUNTER_BITS;
    let mut tick = now;
    // The closure always answers, so the update always happens.
    let _ = LAST_TICK.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
        tick = now.max(last.saturating_add(1));
        Some(tick)
    });
    let counter = u16::try_from(tick & ((1 << COUNTER_BITS) - 1)).unwrap_or(0);
    (tick >> COUNTER_BITS, counter)
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

/// The longest session id accepted, in characters.
pub const SESSION_ID_MAX_LEN: usize = 128;

/// The rule of [`SessionId::parse`] as a regular expression (for schemas and documents).
pub const SESSION_ID_PATTERN: &str = "^[A-Za-z0-9._-]{1,128}$";

/// A session id that breaks the rule every surface (CLI, HTTP header, path, query and body)
/// checks: 1–128 characters, each an ASCII letter, digit, `.`, `_` or `-`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSessionId {
    /// The id is empty.
    #[error("invalid session id: it is empty; use 1-128 letters, digits, `.`, `_` or `-`")]
    Empty,
    /// The id is longer than [`SESSION_ID_MAX_LEN`] characters.
    #[error(
        "invalid session id: it has {len} characters, more than 128; use 1-128 letters, digits, `.`, `_` or `-`"
    )]
    TooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The id holds a character outside `[A-Za-z0-9._-]`.
    #[error(
        "invalid session id `{id}`: {found:?} is not allowed; use 1-128 letters, digits, `.`, `_` or `-`"
    )]
    BadCharacter {
        /// The id as given (at most 128 characters), control characters escaped for display.
        id: String,
        /// The first character that is not allowed.
        found: char,
    },
}

impl SessionId {
    /// Checks `text` against the session id rule (1–128 characters of `[A-Za-z0-9._-]`) and
    /// wraps it. Every surface that takes a session id from outside calls this.
    pub fn parse(text: &str) -> Result<Self, InvalidSessionId> {
        let len = text.chars().count();
        if len == 0 {
            return Err(InvalidSessionId::Empty);
        }
        if len > SESSION_ID_MAX_LEN {
            return Err(InvalidSessionId::TooLong { len });
        }
        match text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            Some(found) => Err(InvalidSessionId::BadCharacter {
                id: text.escape_debug().to_string(),
                found,
            }),
            None => Ok(Self(text.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{InvalidSessionId, SessionId, new_id};

    #[test]
    fn ids_sort_in_the_order_they_were_made() {
        // Far more than one millisecond holds, from two threads at once.
        let made: Vec<Vec<String>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| (0..20_000).map(|_| new_id("evt")).collect()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for ids in &made {
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "out of order");
        }
        let mut all: Vec<&String> = made.iter().flatten().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 40_000, "every id is unique");
        // Still a UUIDv7: version 7, RFC variant.
        let uuid = uuid::Uuid::parse_str(&made[0][0]["evt_".len()..]).unwrap();
        assert_eq!(uuid.get_version_num(), 7);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn session_ids_follow_one_rule() {
        for good in ["a", "chat-1", "user_42.thread", &"x".repeat(128)] {
            assert_eq!(SessionId::parse(good).map(|id| id.0), Ok(good.to_owned()));
        }
        assert_eq!(SessionId::parse(""), Err(InvalidSessionId::Empty));
        assert_eq!(
            SessionId::parse(&"x".repeat(60_000)),
            Err(InvalidSessionId::TooLong { len: 60_000 })
        );
        assert!(matches!(
            SessionId::parse("../x"),
            Err(InvalidSessionId::BadCharacter { found: '/', .. })
        ));
        assert!(matches!(
            SessionId::parse("a\0b"),
            Err(InvalidSessionId::BadCharacter { found: '\0', .. })
        ));
        assert!(matches!(
            SessionId::parse("a b"),
            Err(InvalidSessionId::BadCharacter { found: ' ', .. })
        ));
        let message = SessionId::parse("a\0b").unwrap_err().to_string();
        assert_eq!(
            message,
            "invalid session id `a\\0b`: '\\0' is not allowed; use 1-128 letters, digits, `.`, `_` or `-`"
        );
    }
}
