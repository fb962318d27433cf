//! Integers that do not fit 64 bits, found in the raw argument text.
//!
//! `serde_json` reads an integer beyond `i64`/`u64` as the nearest `f64`, so
//! `18446744073709551617` would reach a tool as `18446744073709551616`. The gateway never
//! lets a tool see a number other than the one sent: [`oversized_integers`] scans JSON text
//! (already known to be valid) for integer literals that do not fit, with the JSON pointer of
//! each; the gateway blocks such a call, and a repair never decodes such text.

use serde_json::Value;

/// An integer literal that fits neither `i64` nor `u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversized {
    /// The JSON pointer of the number inside the text.
    pub pointer: String,
    /// The literal as sent.
    pub literal: String,
}

/// Where the scanner is inside a container.
enum Frame {
    /// An object; `key` is the key of the value being read, once its `:` is passed.
    Object { key: String, in_value: bool },
    /// An array and the index of the current item.
    Array { index: usize },
}

/// Every integer literal in `raw` that fits neither `i64` nor `u64`. Cheap when `parsed` (the
/// value `raw` parsed to) holds no float, since only a float can be such an integer read
/// lossily.
pub fn oversized_integers(raw: &str, parsed: &Value) -> Vec<Oversized> {
    if !holds_float(parsed) {
        return Vec::new();
    }
    let bytes = raw.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut issues = Vec::new();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'{' => stack.push(Frame::Object {
                key: String::new(),
                in_value: false,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array { index }) => *index += 1,
                Some(Frame::Object { in_value, .. }) => *in_value = false,
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { in_value, .. }) = stack.last_mut() {
                    *in_value = true;
                }
            }
            b'"' => {
                let end = string_end(bytes, at);
                if let Some(Frame::Object { key, in_value }) = stack.last_mut()
                    && !*in_value
                {
                    let literal = raw.get(at..end).unwrap_or_default();
                    *key = serde_json::from_str(literal).unwrap_or_default();
                }
                at = end;
                continue;
            }
            b'-' | b'0'..=b'9' => {
                let end = bytes
                    .iter()
                    .skip(at)
                    .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .map_or(bytes.len(), |len| at + len);
                let literal = raw.get(at..end).unwrap_or_default();
                if !literal.contains(['.', 'e', 'E'])
                    && literal.parse::<i64>().is_err()
                    && literal.parse::<u64>().is_err()
                {
                    issues.push(Oversized {
                        pointer: pointer(&stack),
                        literal: literal.to_owned(),
                    });
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    issues
}

/// The index just past the string literal opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The JSON pointer of the value the scanner is on.
fn pointer(stack: &[Frame]) -> String {
    let mut out = String::new();
    for frame in stack {
        out.push('/');
        match frame {
            Frame::Object { key, .. } => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Frame::Array { index } => out.push_str(&index.to_string()),
        }
    }
    out
}

fn holds_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(holds_float),
        Value::Object(map) => map.values().any(holds_float),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(raw: &str) -> Vec<(String, String)> {
        let parsed: Value = serde_json::from_str(raw).unwrap();
        oversized_integers(raw, &parsed)
            .into_iter()
            .map(|o| (o.pointer, o.literal))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, f)| ((*p).to_owned(), (*f).to_owned()))
            .collect()
    }

    #[test]
    fn integers_beyond_64_bits_are_found_with_their_path() {
        let raw = r#"{"a": 18446744073709551617, "b": [1, -9223372036854775809],
                      "c": {"k/\"x": 1e300, "d": 99999999999999999999999}}"#;
        assert_eq!(
            found(raw),
            pairs(&[
                ("/a", "18446744073709551617"),
                ("/b/1", "-9223372036854775809"),
                ("/c/d", "99999999999999999999999"),
            ])
        );
    }

    #[test]
    fn numbers_that_fit_and_floats_are_not_flagged() {
        let raw = r#"{"max": 18446744073709551615, "min": -9223372036854775808,
                      "f": 1.5, "e": 2e30, "s": "18446744073709551617"}"#;
        assert!(found(raw).is_empty());
    }

    #[test]
    fn keys_with_escapes_name_the_path() {
        let raw = r#"{"a\"b": {"c~d": [0, 0, 36893488147419103232]}}"#;
        assert_eq!(
            found(raw),
            pairs(&[("/a\"b/c~0d/2", "36893488147419103232")])
        );
    }
}
