//! Identities a caller asserts (`metadata.user`, any `{metadata.KEY}` a memory namespace is
//! rendered from): normalised to Unicode NFKC, so `ａｌｉｃｅ` (full-width) and `alice` are
//! the same value, and refused when they carry characters that show nothing — zero-width
//! spaces and joiners, bidirectional controls, other format characters, control characters —
//! with which two values that look the same could differ.

use unicode_normalization::UnicodeNormalization;

/// `value` in NFKC, or why it is refused: an invisible character, named by its code point
/// (`field` names where the value came from, e.g. `metadata.user`).
pub fn normalise(field: &str, value: &str) -> Result<String, String> {
    if let Some(c) = value.chars().find(|c| invisible(*c)) {
        return Err(format!(
            "`{field}` contains the invisible character U+{:04X}; send the value without it",
            u32::from(c)
        ));
    }
    Ok(value.nfkc().collect())
}

/// Whether `c` is a control or format character (general categories Cc and Cf), or another
/// character that renders as nothing (combining grapheme joiner, Hangul fillers, variation
/// selectors).
fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            u32::from(c),
            0x00AD
                | 0x034F
                | 0x061C
                | 0x0600..=0x0605
                | 0x06DD
                | 0x070F
                | 0x0890..=0x0891
                | 0x08E2
                | 0x115F..=0x1160
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0001
                | 0xE0020..=0xE007F
                | 0xE0100..=0xE01EF
        )
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn confusable_forms_become_one_and_invisible_characters_are_named() {
        assert_eq!(normalise("metadata.user", "ａｌｉｃｅ").unwrap(), "alice");
        assert_eq!(normalise("metadata.user", "ﬁ").unwrap(), "fi");
        for (value, point) in [
            ("al\u{200B}ice", "U+200B"),
            ("alice\u{202E}", "U+202E"),
            ("\u{FEFF}alice", "U+FEFF"),
            ("a\u{2060}lice", "U+2060"),
            ("ali\u{200D}ce", "U+200D"),
        ] {
            let error = normalise("metadata.user", value).unwrap_err();
            assert!(
                error.contains("`metadata.user`") && error.contains(point),
                "{error}"
            );
        }
    }
}
