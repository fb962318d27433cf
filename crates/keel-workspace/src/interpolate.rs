//! Environment interpolation in string scalars: `${VAR}`, `${VAR:-default}` (the default is
//! used when the variable is unset or empty, and may itself hold references) and `$$` for a
//! literal dollar. A `$` followed by anything else is kept as written.
//!
//! Interpolation runs on the text of a scalar before it is resolved, so a plain scalar such
//! as `maxSteps: ${STEPS:-8}` becomes the integer 8; quoted scalars stay strings.

use std::collections::BTreeMap;

use crate::Diagnostic;
use crate::yaml::{Node, NodeValue};

/// Interpolates every string scalar under `node`, reporting missing variables and malformed
/// references.
pub(crate) fn interpolate_tree(
    node: &mut Node,
    env: &BTreeMap<String, String>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match &mut node.value {
        NodeValue::Scalar(scalar) => {
            if !scalar.text.contains('$') {
                return;
            }
            let expansion = expand(&scalar.text, env);
            for var in &expansion.missing {
                diagnostics.push(node.loc.error(
                    format!("environment variable `{var}` is not set"),
                    Some(format!(
                        "set it in the environment or in .env, or give a default with `${{{var}:-default}}`"
                    )),
                ));
            }
            if let Some(problem) = &expansion.error {
                diagnostics.push(node.loc.error(
                    problem.clone(),
                    Some("write `${VAR}` or `${VAR:-default}`, and `$$` for a literal `$`".into()),
                ));
            }
            if expansion.missing.is_empty() && expansion.error.is_none() {
                scalar.text = expansion.text;
                node.env_var = expansion.used.into_iter().next();
            }
        }
        NodeValue::Seq(items) => {
            for item in items {
                interpolate_tree(item, env, diagnostics);
            }
        }
        NodeValue::Map(entries) => {
            for entry in entries {
                interpolate_tree(&mut entry.value, env, diagnostics);
            }
        }
    }
}

/// The result of expanding one string.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Expansion {
    pub text: String,
    /// Variables whose values were used, in order.
    pub used: Vec<String>,
    /// Variables that were needed but are not set and have no default.
    pub missing: Vec<String>,
    /// A malformed reference, if any.
    pub error: Option<String>,
}

/// Expands `${…}` references in `input`.
pub(crate) fn expand(input: &str, env: &BTreeMap<String, String>) -> Expansion {
    let mut expander = Expander {
        chars: input.chars().collect(),
        pos: 0,
        env,
        out: Expansion::default(),
    };
    let text = expander.text(false);
    expander.out.text = text;
    expander.out
}

struct Expander<'e> {
    chars: Vec<char>,
    pos: usize,
    env: &'e BTreeMap<String, String>,
    out: Expansion,
}

impl Expander<'_> {
    /// Reads text up to the end, or up to an unmatched `}` inside a default.
    fn text(&mut self, in_default: bool) -> String {
        let mut text = String::new();
        while let Some(&c) = self.chars.get(self.pos) {
            if self.out.error.is_some() {
                break;
            }
            if in_default && c == '}' {
                return text;
            }
            if c != '$' {
                text.push(c);
                self.pos += 1;
                continue;
            }
            match self.chars.get(self.pos + 1) {
                Some('$') => {
                    text.push('$');
                    self.pos += 2;
                }
                Some('{') => {
                    self.pos += 2;
                    text.push_str(&self.reference());
                }
                _ => {
                    text.push('$');
                    self.pos += 1;
                }
            }
        }
        text
    }

    /// Reads `NAME}` or `NAME:-default}` after a `${`.
    fn reference(&mut self) -> String {
        let start = self.pos;
        while self
            .chars
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        let valid_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        match (self.chars.get(self.pos), self.chars.get(self.pos + 1)) {
            (Some('}'), _) if valid_name => {
                self.pos += 1;
                match self.env.get(&name) {
                    Some(value) => {
                        self.out.used.push(name);
                        value.clone()
                    }
                    None => {
                        self.out.missing.push(name);
                        String::new()
                    }
                }
            }
            (Some(':'), Some('-')) if valid_name => {
                self.pos += 2;
                let (used, missing) = (self.out.used.len(), self.out.missing.len());
                let default = self.text(true);
                if self.chars.get(self.pos) != Some(&'}') {
                    self.fail(format!("`${{{name}:-` is not closed with `}}`"));
                    return String::new();
                }
                self.pos += 1;
                match self.env.get(&name).filter(|v| !v.is_empty()) {
                    Some(value) => {
                        // The default was not needed: forget what it referred to.
                        self.out.used.truncate(used);
                        self.out.missing.truncate(missing);
                        self.out.used.push(name);
                        value.clone()
                    }
                    None => default,
                }
            }
            (None, _) => {
                self.fail("`${` is not closed with `}`".into());
                String::new()
            }
            _ => {
                let rest: String = self.chars[start..].iter().take(20).collect();
                self.fail(format!("invalid variable reference `${{{rest}`"));
                String::new()
            }
        }
    }

    fn fail(&mut self, message: String) {
        if self.out.error.is_none() {
            self.out.error = Some(message);
        }
        self.pos = self.chars.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("A", "alpha"), ("EMPTY", ""), ("N", "8")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn text(input: &str) -> String {
        let e = expand(input, &env());
        assert_eq!(e.error, None, "{input}");
        assert!(e.missing.is_empty(), "{input}");
        e.text
    }

    #[test]
    fn references_defaults_and_escapes() {
        assert_eq!(text("${A}"), "alpha");
        assert_eq!(text("x-${A}-y"), "x-alpha-y");
        assert_eq!(text("${B:-beta}"), "beta");
        assert_eq!(text("${EMPTY:-fallback}"), "fallback");
        assert_eq!(text("${A:-unused}"), "alpha");
        assert_eq!(text("${B:-${A}}"), "alpha");
        assert_eq!(text("${B:-}"), "");
        assert_eq!(text("$$HOME and $HOME and $"), "$HOME and $HOME and $");
        assert_eq!(text("$${A}"), "${A}");
    }

    #[test]
    fn used_variables_are_recorded() {
        assert_eq!(expand("${N}", &env()).used, ["N"]);
        assert_eq!(expand("${B:-1}", &env()).used, Vec::<String>::new());
        assert_eq!(
            expand("${A:-${MISSING}}", &env()).missing,
            Vec::<String>::new()
        );
    }

    #[test]
    fn missing_and_malformed_references() {
        assert_eq!(expand("${X}/${Y:-y}/${Z}", &env()).missing, ["X", "Z"]);
        assert_eq!(expand("${B:-${X}}", &env()).missing, ["X"]);
        assert!(expand("${A", &env()).error.is_some());
        assert!(expand("${A:-x", &env()).error.is_some());
        assert!(expand("${1A}", &env()).error.is_some());
        assert!(expand("${}", &env()).error.is_some());
        assert!(expand("${A B}", &env()).error.is_some());
    }
}
