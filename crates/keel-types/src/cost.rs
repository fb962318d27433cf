//! Money, exactly: what a model round costs at the prices its `Model` document declares.
//!
//! An [`Amount`] is a whole number of 10⁻¹⁸ of a currency unit, so a price given with up to
//! 12 decimal places per million tokens times any token count is exact, and sums never
//! drift. Amounts travel as decimal strings (`"0.000315"`), never as floats.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Decimal places an [`Amount`] keeps.
const SCALE: u32 = 18;
/// Decimal places a price may have (per million tokens): the other 6 of the 18 an amount
/// keeps are the division by a million.
pub const PRICE_DECIMALS: u32 = 12;

/// An exact, non-negative amount of money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(u128);

/// Why a text is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not an amount: {why}")]
pub struct AmountError {
    pub text: String,
    pub why: &'static str,
}

impl Amount {
    /// Nothing.
    pub const ZERO: Amount = Amount(0);

    /// Parses a non-negative decimal (`3`, `0.075`, `15.25`) with at most `decimals`
    /// places.
    pub fn parse_with(text: &str, decimals: u32) -> Result<Self, AmountError> {
        let fail = |why| AmountError {
            text: text.to_owned(),
            why,
        };
        let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(fail("it is empty"));
        }
        if !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
        {
            return Err(fail(
                "only digits and one decimal point (no sign, no exponent)",
            ));
        }
        let fraction = fraction.trim_end_matches('0');
        if fraction.len() > decimals as usize {
            return Err(fail("it has more decimal places than are kept"));
        }
        let digits = |s: &str| -> Result<u128, AmountError> {
            if s.is_empty() {
                return Ok(0);
            }
            s.parse::<u128>().map_err(|_| fail("it is too large"))
        };
        let unit = 10u128.pow(SCALE);
        let whole = digits(whole)?
            .checked_mul(unit)
            .ok_or_else(|| fail("it is too large"))?;
        let fraction = digits(fraction)? * 10u128.pow(SCALE - fraction.len() as u32);
        Ok(Amount(whole + fraction))
    }

    /// The sum (saturating at the largest amount).
    pub fn plus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }

    /// `tokens` at `per_million` (a price per million tokens): exact for a price of up to
    /// [`PRICE_DECIMALS`] places.
    pub fn for_tokens(per_million: Amount, tokens: u64) -> Amount {
        Amount(per_million.0.saturating_mul(u128::from(tokens)) / 1_000_000)
    }

    /// `n` times this amount (saturating).
    pub fn times(self, n: u64) -> Amount {
        Amount(self.0.saturating_mul(u128::from(n)))
    }

    /// Whether this is nothing.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Amount {
    /// The shortest exact decimal: `0.000315`, `12`, `1.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = 10u128.pow(SCALE);
        let (whole, fraction) = (self.0 / unit, self.0 % unit);
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let fraction = format!("{fraction:018}");
        write!(f, "{whole}.{}", fraction.trim_end_matches('0'))
    }
}

impl FromStr for Amount {
    type Err = AmountError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse_with(text, SCALE)
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An ISO 4217 currency code (`USD`, `EUR`): three upper-case letters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Currency([u8; 3]);

impl Currency {
    /// US dollars, the default.
    pub const USD: Currency = Currency(*b"USD");

    /// The code, if `text` is three ASCII letters (upper-cased).
    pub fn parse(text: &str) -> Option<Currency> {
        let bytes: [u8; 3] = text.as_bytes().try_into().ok()?;
        bytes
            .iter()
            .all(u8::is_ascii_alphabetic)
            .then(|| Currency(bytes.map(|b| b.to_ascii_uppercase())))
    }

    pub fn as_str(&self) -> &str {
        // Three ASCII letters by construction.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl Default for Currency {
    fn default() -> Self {
        Self::USD
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Currency::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{text}` is not a currency code (three letters, e.g. USD)"
            ))
        })
    }
}

/// An amount in a currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    pub amount: Amount,
    pub currency: Currency,
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.amount, self.currency)
    }
}

/// A model's prices per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pricing {
    /// Input tokens neither read from nor written to a cache.
    pub input: Amount,
    pub output: Amount,
    /// Input tokens read from the provider's cache (default: `input`).
    pub cached_input: Option<Amount>,
    /// Input tokens written to the provider's cache (default: `input`).
    pub cache_write: Option<Amount>,
    pub currency: Currency,
}

impl Pricing {
    /// What `usage` costs at these prices.
    pub fn cost(&self, usage: &crate::Usage) -> Cost {
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        let parts = [
            (self.input, usage.prompt_tokens.saturating_sub(cached)),
            (
                self.cached_input.unwrap_or(self.input),
                usage.cache_read_tokens,
            ),
            (
                self.cache_write.unwrap_or(self.input),
                usage.cache_write_tokens,
            ),
            (self.output, usage.completion_tokens),
        ];
        let amount = parts.iter().fold(Amount::ZERO, |sum, (price, tokens)| {
            sum.plus(Amount::for_tokens(*price, *tokens))
        });
        Cost {
            amount,
            currency: self.currency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    #[test]
    fn amounts_parse_and_print_as_exact_decimals() {
        for (text, shown) in [
            ("3", "3"),
            ("0.075", "0.075"),
            ("15.250", "15.25"),
            (".5", "0.5"),
            ("0.000000000001", "0.000000000001"),
        ] {
            let amount = Amount::parse_with(text, PRICE_DECIMALS).unwrap();
            assert_eq!(amount.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Amount>().unwrap(), amount);
        }
        for bad in ["", "-1", "1e3", "1.2.3", "0.0000000000001", "abc"] {
            assert!(Amount::parse_with(bad, PRICE_DECIMALS).is_err(), "{bad}");
        }
    }

    #[test]
    fn ten_thousand_rounds_cost_exactly_what_their_tokens_cost_together() {
        let pricing = Pricing {
            input: Amount::parse_with("3", PRICE_DECIMALS).unwrap(),
            output: Amount::parse_with("15", PRICE_DECIMALS).unwrap(),
            cached_input: Some(Amount::parse_with("0.3", PRICE_DECIMALS).unwrap()),
            cache_write: Some(Amount::parse_with("3.75", PRICE_DECIMALS).unwrap()),
            currency: Currency::USD,
        };
        let round = Usage {
            cache_read_tokens: 700,
            cache_write_tokens: 11,
            ..Usage::new(1_237, 83)
        };
        let mut sum = Amount::ZERO;
        let mut total = Usage::default();
        for _ in 0..10_000 {
            sum = sum.plus(pricing.cost(&round).amount);
            total.add(&round);
        }
        assert_eq!(sum, pricing.cost(&total).amount);
        // 526×3 + 700×0.3 + 11×3.75 + 83×15 per million, ten thousand times.
        assert_eq!(sum.to_string(), "30.7425");
        assert_eq!(
            serde_json::to_string(&pricing.cost(&round)).unwrap(),
            r#"{"amount":"0.00307425","currency":"USD"}"#
        );
    }
}
