//! Prices and money budgets in the workspace: `Model.pricing` (per million tokens) and
//! `limits.maxCost`. Both are exact decimals ([`keel_types::cost::Amount`]): written as a
//! number (`3`, `0.075`) or a string (`"0.075"`); a budget may name its currency
//! (`"2.50 EUR"`, USD otherwise).

use std::fmt;

use keel_types::cost::{Amount, Cost, Currency, PRICE_DECIMALS, Pricing};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A decimal number of money, from YAML as a number or a string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Price(pub Amount);

/// A number's decimal text: YAML numbers are read as floats, and a float's shortest
/// round-trip form is the decimal the author wrote (`0.3`, not `0.299999…`).
fn decimal_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Integer(u64),
        Float(f64),
        Text(String),
    }
    Ok(match Written::deserialize(deserializer)? {
        Written::Integer(n) => n.to_string(),
        Written::Float(f) => f.to_string(),
        Written::Text(text) => text,
    })
}

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = decimal_text(deserializer)?;
        Amount::parse_with(&text, PRICE_DECIMALS)
            .map(Price)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Price {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl JsonSchema for Price {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Price".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["number", "string"],
            "pattern": "^[0-9]*\\.?[0-9]+$",
            "minimum": 0,
            "description": "a non-negative decimal, e.g. 3 or 0.075 (at most 12 decimal places)"
        })
    }
}

/// `Model.pricing`: what the model costs per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PricingSpec {
    /// Input tokens (neither read from nor written to a cache).
    pub input_per_m_tok: Price,
    pub output_per_m_tok: Price,
    /// Input tokens read from the provider's cache (default: `inputPerMTok`).
    #[serde(default)]
    pub cached_input_per_m_tok: Option<Price>,
    /// Input tokens written to the provider's cache (default: `inputPerMTok`).
    #[serde(default)]
    pub cache_write_per_m_tok: Option<Price>,
    /// ISO 4217 code (default `USD`).
    #[serde(default = "usd")]
    pub currency: String,
}

fn usd() -> String {
    "USD".to_owned()
}

impl PricingSpec {
    /// The prices, if the currency is a code (validation checks it).
    pub fn pricing(&self) -> Option<Pricing> {
        Some(Pricing {
            input: self.input_per_m_tok.0,
            output: self.output_per_m_tok.0,
            cached_input: self.cached_input_per_m_tok.map(|p| p.0),
            cache_write: self.cache_write_per_m_tok.map(|p| p.0),
            currency: Currency::parse(&self.currency)?,
        })
    }
}

/// `limits.maxCost`: the most a run may spend, `2.50` (USD) or `"2.50 EUR"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostLimit(pub Cost);

impl<'de> Deserialize<'de> for CostLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = decimal_text(deserializer)?;
        let (amount, currency) = match text.trim().split_once(' ') {
            Some((amount, code)) => (
                amount,
                Currency::parse(code.trim()).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "`{code}` is not a currency code (three letters, e.g. USD)"
                    ))
                })?,
            ),
            None => (text.trim(), Currency::USD),
        };
        let amount =
            Amount::parse_with(amount, PRICE_DECIMALS).map_err(serde::de::Error::custom)?;
        Ok(CostLimit(Cost { amount, currency }))
    }
}

impl Serialize for CostLimit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for CostLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl JsonSchema for CostLimit {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CostLimit".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["number", "string"],
            "pattern": "^[0-9]*\\.?[0-9]+( [A-Za-z]{3})?$",
            "minimum": 0,
            "description": "the most a run may spend: 2.50 (USD) or \"2.50 EUR\""
        })
    }
}
