//! Closed sets of wire names: the [`wire_names!`] table that declares such an enum, and the
//! [`UnknownName`] error of parsing one.
//!
//! One table per enum declares each variant with its wire name (and the aliases serde also
//! accepts). From it come the serde names, `as_str`, `FromStr`, `Display`, `ALL` and `NAMES`,
//! so the text a value is written as and the text it is read from can never disagree.

/// A name that is not one of a closed set's, e.g. an unknown permission mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}` (one of: {})", .accepted.join(", "))]
pub struct UnknownName {
    /// What the name was meant to name, e.g. `permission mode`.
    pub what: &'static str,
    /// The name given.
    pub value: String,
    /// The names accepted (without aliases).
    pub accepted: &'static [&'static str],
}

/// Declares a unit enum whose variants are written as the given wire names:
///
/// ```text
/// wire_names! {
///     #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
///     pub enum Color: "color" {
///         Red = "red" | "RED",
///         Green = "green",
///     }
/// }
/// ```
///
/// Each variant gets `#[serde(rename = …, alias = …)]`; the enum gets `ALL`, `NAMES`,
/// `as_str`, `FromStr` (accepting the aliases too, failing with [`UnknownName`]) and
/// `Display`. The derives are the caller's (serde's must be among them).
macro_rules! wire_names {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $what:literal {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $wire:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                #[serde(rename = $wire $(, alias = $alias)*)]
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// Every wire name, in declaration order (aliases are not listed).
            pub const NAMES: &'static [&'static str] = &[$($wire),+];

            /// The wire name, as serde writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            /// Reads a wire name (or an alias), exactly as serde does.
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($wire $(| $alias)* => Ok(Self::$variant),)+
                    _ => Err($crate::UnknownName {
                        what: $what,
                        value: text.to_owned(),
                        accepted: Self::NAMES,
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use wire_names;

#[cfg(test)]
// The table's items are `pub` for the crates' enums; this test's enum is private.
#[allow(unreachable_pub)]
mod tests {
    use serde::{Deserialize, Serialize};

    wire_names! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        enum Color: "color" {
            Red = "red" | "RED",
            DarkGreen = "darkGreen",
        }
    }

    #[test]
    fn names_round_trip_through_as_str_from_str_and_serde() {
        for color in Color::ALL {
            assert_eq!(color.as_str().parse::<Color>(), Ok(*color));
            assert_eq!(color.to_string(), color.as_str());
            let json = serde_json::to_value(color).unwrap();
            assert_eq!(json, color.as_str());
        }
        assert_eq!("RED".parse::<Color>(), Ok(Color::Red));
        assert_eq!(
            serde_json::from_str::<Color>("\"RED\"").unwrap(),
            Color::Red
        );
    }

    #[test]
    fn an_unknown_name_says_what_is_accepted() {
        let error = "blue".parse::<Color>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown color `blue` (one of: red, darkGreen)"
        );
    }
}
