//! The built-in dataset, read from `crates/keel-tools/evals/gateway.yaml` (embedded): the
//! mutation kinds with their expected outcome per gateway mode, the generator's parameters,
//! and literal cases of the built-in tools.

use std::path::Path;

use keel_workspace::GatewayMode;
use serde::{Deserialize, Serialize};

use super::cases::{CaseLine, Origin};
use super::{Expect, GatewayCase, GatewayEvalError};

/// The dataset's text, as the repository holds it.
const DATASET: &str = include_str!("../../evals/gateway.yaml");
/// How the dataset's file is named in messages.
const DATASET_FILE: &str = "evals/gateway.yaml";

/// The built-in dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dataset {
    pub parameters: Parameters,
    /// One rule per [`Mutation`], in the order the generator applies them.
    pub kinds: Vec<KindRule>,
    /// Literal cases of the built-in tools, for `repair` mode.
    #[serde(default, skip_serializing)]
    cases: Vec<CaseLine>,
}

/// What the generator draws on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Parameters {
    /// At most this many cases of one kind for one tool.
    pub max_cases_per_kind: usize,
    /// Property names a model invents (`unknown_field`).
    pub unknown_fields: Vec<String>,
    /// Tool names a model invents (`tool_name_unknown`).
    pub hallucinated_tools: Vec<String>,
    /// Registered tools an agent might call without listing them (`unlisted_tool`).
    pub unlisted_tools: Vec<String>,
    /// An integer literal beyond 64 bits (`oversized_integer`).
    pub oversized_integer: String,
}

/// A mutation kind as the dataset documents it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindRule {
    pub kind: String,
    pub expect: ModeExpect,
    /// Where the kind applies and how it breaks the call.
    pub when: String,
    /// Why the contract expects that outcome.
    pub why: String,
}

/// The expected outcome in each gateway mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeExpect {
    pub repair: Expect,
    pub validate: Expect,
    pub off: Expect,
}

impl ModeExpect {
    /// The outcome in `mode`.
    pub fn of(self, mode: GatewayMode) -> Expect {
        match mode {
            GatewayMode::Repair => self.repair,
            GatewayMode::Validate => self.validate,
            GatewayMode::Off => self.off,
        }
    }
}

macro_rules! mutations {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The mutation kinds the generator knows; `evals/gateway.yaml` documents each.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Mutation {
            $($(#[$doc])* $variant,)*
        }

        impl Mutation {
            /// Every kind, in the generator's order.
            pub const ALL: &[Mutation] = &[$(Mutation::$variant,)*];

            /// The kind's name in the dataset and the report.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Mutation::$variant => $name,)*
                }
            }
        }
    };
}

mutations! {
    /// The synthesised valid call.
    Valid = "valid",
    /// The whole arguments object sent as a JSON string.
    ArgumentsAsJsonString = "arguments_as_json_string",
    /// A number sent as its text.
    NumberAsString = "number_as_string",
    /// A boolean sent as its text.
    BooleanAsString = "boolean_as_string",
    /// A fraction's text where an integer is expected.
    FractionForInteger = "fraction_for_integer",
    /// A lone item where an array is expected.
    ScalarForArray = "scalar_for_array",
    /// An object or array sent as its JSON text.
    JsonTextForObject = "json_text_for_object",
    /// A number where a string is expected.
    ScalarForString = "scalar_for_string",
    /// A value of a type no repair converts.
    WrongType = "wrong_type",
    /// An optional property sent as `null`.
    NullForOptional = "null_for_optional",
    /// A required property sent as `null`.
    NullForRequired = "null_for_required",
    /// A required property left out.
    MissingRequired = "missing_required",
    /// A required property with a default left out.
    MissingRequiredWithDefault = "missing_required_with_default",
    /// An undeclared property where the schema forbids them.
    UnknownField = "unknown_field",
    /// An undeclared property where the schema allows them.
    UnknownFieldAllowed = "unknown_field_allowed",
    /// The argument text cut in half.
    TruncatedJson = "truncated_json",
    /// An integer beyond 64 bits.
    OversizedInteger = "oversized_integer",
    /// The tool name in another case.
    ToolNameCase = "tool_name_case",
    /// The tool name with two letters swapped.
    ToolNameTypo = "tool_name_typo",
    /// A hallucinated tool name.
    ToolNameUnknown = "tool_name_unknown",
    /// A registered tool the agent does not list.
    UnlistedTool = "unlisted_tool",
    /// An enum option in another case.
    EnumCase = "enum_case",
    /// An enum option with two letters swapped.
    EnumTypo = "enum_typo",
    /// A coercible value inside an object or array property.
    NestedRepairable = "nested_repairable",
    /// A value no repair converts inside an object or array property.
    NestedWrongType = "nested_wrong_type",
}

impl Dataset {
    /// The dataset in `evals/gateway.yaml`, checked: its kinds are exactly [`Mutation::ALL`]
    /// and its literal cases are valid cases.
    pub fn builtin() -> Result<Self, GatewayEvalError> {
        Self::parse(DATASET)
    }

    fn parse(text: &str) -> Result<Self, GatewayEvalError> {
        let bad = |message: String| GatewayEvalError::Dataset(message);
        let value = keel_workspace::parse_yaml_value(text, Path::new(DATASET_FILE))
            .map_err(|d| bad(d.to_string()))?;
        let dataset: Self = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        let documented: Vec<&str> = dataset.kinds.iter().map(|k| k.kind.as_str()).collect();
        let known: Vec<&str> = Mutation::ALL.iter().map(|m| m.as_str()).collect();
        if documented != known {
            return Err(bad(format!(
                "its kinds must be exactly, in order: {}; found: {}",
                known.join(", "),
                documented.join(", ")
            )));
        }
        for (index, line) in dataset.cases.iter().enumerate() {
            line.clone()
                .into_case(Origin::Dataset(index + 1))
                .map_err(|message| bad(format!("case {}: {message}", index + 1)))?;
        }
        Ok(dataset)
    }

    /// The expected outcome of `mutation` in `mode`.
    pub fn expect(&self, mutation: Mutation, mode: GatewayMode) -> Expect {
        self.kinds
            .iter()
            .find(|rule| rule.kind == mutation.as_str())
            .map_or(Expect::Block, |rule| rule.expect.of(mode))
    }

    /// The literal cases of `tool`; none unless `mode` is `repair`, the mode they are written
    /// for.
    pub fn literal_cases(&self, tool: &str, mode: GatewayMode) -> Vec<GatewayCase> {
        if mode != GatewayMode::Repair {
            return Vec::new();
        }
        self.cases
            .iter()
            .enumerate()
            .filter(|(_, line)| line.tool == tool)
            .filter_map(|(index, line)| line.clone().into_case(Origin::Dataset(index + 1)).ok())
            .collect()
    }

    /// How many literal cases the dataset holds.
    pub fn literal_case_count(&self) -> usize {
        self.cases.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_dataset_documents_every_kind_in_order() {
        let dataset = Dataset::builtin().unwrap();
        let kinds: Vec<&str> = dataset.kinds.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(kinds.len(), Mutation::ALL.len());
        assert_eq!(kinds[0], "valid");
        assert!(dataset.literal_case_count() >= 10);
        for rule in &dataset.kinds {
            assert!(!rule.when.trim().is_empty(), "{}", rule.kind);
            assert!(!rule.why.trim().is_empty(), "{}", rule.kind);
        }
    }

    #[test]
    fn expectations_follow_the_mode() {
        let dataset = Dataset::builtin().unwrap();
        use GatewayMode::{Off, Repair, Validate};
        let of = |m: Mutation| [Repair, Validate, Off].map(|mode| dataset.expect(m, mode).as_str());
        assert_eq!(of(Mutation::NumberAsString), ["repair", "block", "pass"]);
        assert_eq!(of(Mutation::TruncatedJson), ["block", "block", "block"]);
        assert_eq!(of(Mutation::ToolNameTypo), ["repair", "block", "block"]);
        assert_eq!(of(Mutation::Valid), ["pass", "pass", "pass"]);
        assert_eq!(of(Mutation::EnumTypo), ["block", "block", "pass"]);
    }

    #[test]
    fn a_dataset_whose_kinds_disagree_with_the_code_is_refused() {
        let text = DATASET.replace("- kind: enum_typo", "- kind: enum_typos");
        let error = Dataset::parse(&text).unwrap_err();
        assert!(
            error.to_string().contains("found: valid,") && error.to_string().contains("enum_typos"),
            "{error}"
        );
        let error = Dataset::parse("parameters: 3").unwrap_err();
        assert!(matches!(error, GatewayEvalError::Dataset(_)), "{error}");
    }

    #[test]
    fn literal_cases_apply_only_in_repair_mode() {
        let dataset = Dataset::builtin().unwrap();
        let cases = dataset.literal_cases("read_file", GatewayMode::Repair);
        assert!(cases.len() >= 5, "{cases:?}");
        assert!(cases.iter().all(|c| c.tool == "read_file"));
        assert!(cases[0].origin.starts_with("evals/gateway.yaml#"));
        assert!(
            dataset
                .literal_cases("read_file", GatewayMode::Validate)
                .is_empty()
        );
        assert!(
            dataset
                .literal_cases("no_such_tool", GatewayMode::Repair)
                .is_empty()
        );
    }
}
