//! W3C trace context (`traceparent`): the trace a run belongs to, and the span ids Keel
//! derives for what a run does.
//!
//! A run's spans are computed from its events (`keel_runtime::trace`), live for export and
//! afterwards for `GET /api/requests/{id}/trace`. So both agree, every span id is derived
//! from the run's id and a key naming what the span covers ([`span_id`]): the run's attempt
//! (`run@<seq>`), a model round (`chat@<seq>`), a tool call or workflow node (`call:<id>`,
//! which is also the key a child run names its parent by), and so on. Nothing but the trace
//! itself ([`RunTrace`], on the run record) has to be stored.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::RequestId;

/// A 16-byte trace id (never all zero).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id (never all zero).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// A new random trace id (all 16 bytes random, so its last 7 are, as W3C Trace Context
    /// level 2 asks and ratio sampling relies on).
    pub fn random() -> Self {
        Self(fastrand::u128(1..).to_be_bytes())
    }

    /// The trace of a run's later attempt (after `keel runs resume`): derived from the first
    /// attempt's trace, the run and the `seq` the attempt began at, so it is the same
    /// whenever it is computed.
    pub fn of_attempt(first: TraceId, run: &RequestId, seq: u64) -> Self {
        let digest = digest(&[&first.0, run.0.as_bytes(), &seq.to_be_bytes()]);
        let mut id = [0; 16];
        id.copy_from_slice(&digest[..16]);
        if id == [0; 16] {
            id[15] = 1;
        }
        Self(id)
    }

    /// Whether a ratio sampler keeps this trace: its last 7 bytes (the random ones), read as
    /// a number, fall below `ratio` of their range (OpenTelemetry's `TraceIdRatioBased` with
    /// its 56-bit threshold).
    pub fn sampled_at(&self, ratio: f64) -> bool {
        if ratio >= 1.0 {
            return true;
        }
        if ratio <= 0.0 {
            return false;
        }
        let mut low = [0; 8];
        low[1..].copy_from_slice(&self.0[9..]);
        let value = u64::from_be_bytes(low);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bound = (ratio * (1u64 << 56) as f64) as u64;
        value < bound
    }
}

/// The span id Keel gives what `key` names in run `run` (see the module's documentation).
pub fn span_id(run: &RequestId, key: &str) -> SpanId {
    let digest = digest(&[run.0.as_bytes(), b"\0", key.as_bytes()]);
    let mut id = [0; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    SpanId(id)
}

/// The key of a run's attempt that began with event `seq` (1 for the first attempt; the
/// `runtime.request.resumed` event's for a resumed one).
pub fn attempt_key(seq: u64) -> String {
    format!("run@{seq}")
}

/// The key of a tool call or a workflow node's attempt (`call` as in
/// [`crate::RunLinks::parent_call`]): a child run's parent span.
pub fn call_key(call: &str) -> String {
    format!("call:{call}")
}

/// The key of a span opened by event `seq` (`chat`, `hook`, …).
pub fn seq_key(kind: &str, seq: u64) -> String {
    format!("{kind}@{seq}")
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// Writes `bytes` as lowercase hex in one call (ids are formatted for every model round and
/// tool call).
fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 32];
    for (i, b) in bytes.iter().take(16).enumerate() {
        text[2 * i] = DIGITS[usize::from(b >> 4)];
        text[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
    let len = bytes.len().min(16) * 2;
    f.write_str(std::str::from_utf8(&text[..len]).unwrap_or_default())
}

fn parse_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let mut out = [0; N];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

macro_rules! hex_id {
    ($ty:ident, $len:literal, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_hex(f, &self.0)
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($ty))
            }
        }

        impl FromStr for $ty {
            type Err = TraceContextError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match parse_hex::<$len>(text) {
                    Some(bytes) if bytes != [0; $len] => Ok(Self(bytes)),
                    _ => Err(TraceContextError(format!(
                        concat!(
                            "`{}` is not a ",
                            $what,
                            " (",
                            stringify!($len),
                            " bytes as lowercase hex, not all zero)"
                        ),
                        text
                    ))),
                }
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

hex_id!(TraceId, 16, "trace id");
hex_id!(SpanId, 8, "span id");

/// Why a `traceparent` (or an id in it) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TraceContextError(String);

/// A W3C `traceparent`: the trace, the caller's span, whether the caller records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` header (`00-<trace id>-<span id>-<flags>`). A later version's
    /// header is read by its first four fields, as the W3C specification asks.
    pub fn parse(header: &str) -> Result<Self, TraceContextError> {
        let header = header.trim();
        let refuse =
            |why: &str| TraceContextError(format!("traceparent `{header}` is not valid: {why}"));
        let mut fields = header.split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(refuse("it needs four fields, version-traceid-spanid-flags"));
        };
        let version =
            parse_hex::<1>(version).ok_or_else(|| refuse("the version is not 2 hex digits"))?;
        if version[0] == 0xff {
            return Err(refuse("version ff is forbidden"));
        }
        if version[0] == 0 && fields.next().is_some() {
            return Err(refuse("version 00 has exactly four fields"));
        }
        let trace_id = trace.parse().map_err(|e: TraceContextError| refuse(&e.0))?;
        let span_id = span.parse().map_err(|e: TraceContextError| refuse(&e.0))?;
        let flags =
            parse_hex::<1>(flags).ok_or_else(|| refuse("the flags are not 2 hex digits"))?;
        Ok(Self {
            trace_id,
            span_id,
            sampled: flags[0] & 1 == 1,
        })
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = u8::from(self.sampled);
        write!(f, "00-{}-{}-{flags:02x}", self.trace_id, self.span_id)
    }
}

/// The trace a run belongs to, kept on its record (`RunRecord::trace`): the trace id of its
/// first attempt, the span it runs under (a caller's `traceparent`, or the parent run's call
/// or node), whether the trace is sampled, and the caller's `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTrace {
    pub trace_id: TraceId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<SpanId>,
    /// The parent span is a caller's (an incoming `traceparent`), not another run's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub remote_parent: bool,
    pub sampled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl RunTrace {
    /// A new trace, kept with probability `ratio`.
    pub fn root(ratio: f64) -> Self {
        let trace_id = TraceId::random();
        Self {
            trace_id,
            parent_span_id: None,
            remote_parent: false,
            sampled: trace_id.sampled_at(ratio),
            tracestate: None,
        }
    }

    /// The trace of a caller's `traceparent` (and `tracestate`): its sampling decision is kept.
    pub fn remote(parent: TraceParent, tracestate: Option<String>) -> Self {
        Self {
            trace_id: parent.trace_id,
            parent_span_id: Some(parent.span_id),
            remote_parent: true,
            sampled: parent.sampled,
            tracestate: tracestate.filter(|s| !s.trim().is_empty()),
        }
    }

    /// A child run's trace: the parent's, under the parent's span `parent_span`.
    pub fn child(&self, parent_span: SpanId) -> Self {
        Self {
            trace_id: self.trace_id,
            parent_span_id: Some(parent_span),
            remote_parent: false,
            sampled: self.sampled,
            tracestate: self.tracestate.clone(),
        }
    }

    /// The `traceparent` naming `span` of this trace.
    pub fn parent_of(&self, span: SpanId) -> TraceParent {
        TraceParent {
            trace_id: self.trace_id,
            span_id: span,
            sampled: self.sampled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_and_writes_back() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parent = TraceParent::parse(header).unwrap();
        assert!(parent.sampled);
        assert_eq!(parent.to_string(), header);
        let unsampled =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.sampled);
        // A later version is read by its first four fields.
        let later =
            TraceParent::parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what")
                .unwrap();
        assert!(later.sampled);
    }

    #[test]
    fn a_bad_traceparent_says_why() {
        for (header, why) in [
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "four",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "span id",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "lowercase",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "forbidden",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "exactly four",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
                "flags",
            ),
        ] {
            let error = TraceParent::parse(header).unwrap_err().to_string();
            assert!(error.contains(why), "{header}: {error}");
        }
    }

    #[test]
    fn span_ids_are_derived_the_same_way_every_time() {
        let run = RequestId("r1".into());
        assert_eq!(span_id(&run, "chat@3"), span_id(&run, "chat@3"));
        assert_ne!(span_id(&run, "chat@3"), span_id(&run, "chat@4"));
        assert_ne!(
            span_id(&run, "chat@3"),
            span_id(&RequestId("r2".into()), "chat@3")
        );
        let first = TraceId::random();
        assert_eq!(
            TraceId::of_attempt(first, &run, 9),
            TraceId::of_attempt(first, &run, 9)
        );
        assert_ne!(TraceId::of_attempt(first, &run, 9), first);
    }

    #[test]
    fn the_ratio_sampler_keeps_about_its_share() {
        let kept = (0..4000)
            .filter(|_| TraceId::random().sampled_at(0.25))
            .count();
        assert!((700..1300).contains(&kept), "{kept} of 4000 kept at 0.25");
        assert!(TraceId::random().sampled_at(1.0));
        assert!(!TraceId::random().sampled_at(0.0));
    }

    #[test]
    fn a_run_trace_round_trips_as_json() {
        let trace = RunTrace::remote(
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap(),
            Some("vendor=x".into()),
        );
        let json = serde_json::to_value(&trace).unwrap();
        assert_eq!(json["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(json["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(serde_json::from_value::<RunTrace>(json).unwrap(), trace);
    }
}
