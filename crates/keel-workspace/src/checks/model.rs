//! Checks of `Model` documents: what each provider needs (`script`, `model`), fields only
//! another provider reads, and `fallbacks` that name other `Model` documents.

use super::{Checker, missing_hint, strings};
use crate::documents::Kind;
use crate::yaml::Node;

impl<'a> Checker<'a> {
    pub(super) fn model(&mut self) {
        let Some((provider, node)) = self.string("provider") else {
            return;
        };
        self.foreign_model_fields(provider);
        self.fallback_models();
        self.pricing_currency();
        let has = |key: &str| self.spec.get(key).is_some_and(|n| !n.is_null());
        let name = &self.doc.name;
        let problem = match provider {
            "anthropic" if !has("model") => Some((
                format!("anthropic model `{name}` has no `model`"),
                "add `model:` with the Claude model name, e.g. `claude-sonnet-4-5`",
            )),
            "scripted" if !has("script") => Some((
                format!("scripted model `{name}` has no `script`"),
                "add `script:` with the script file, relative to the workspace root",
            )),
            "replay" if !has("cassette") => Some((
                format!("replay model `{name}` has no `cassette`"),
                "add `cassette:` with the file `keel runs export ID --cassette FILE` wrote",
            )),
            "openai" if !has("model") => Some((
                format!("openai model `{name}` has no `model`"),
                "add `model:` with the model name the endpoint expects",
            )),
            _ => None,
        };
        if let Some((message, hint)) = problem {
            let loc = node.loc.clone();
            self.push(&loc, message, Some(hint.into()));
        }
    }

    /// `pricing.currency` is an ISO 4217 code: three letters.
    fn pricing_currency(&mut self) {
        let spec: &'a Node = self.spec;
        let Some(currency) = spec.get("pricing").and_then(|p| p.get("currency")) else {
            return;
        };
        let text = currency.to_json();
        let ok = text
            .as_str()
            .is_some_and(|code| keel_types::cost::Currency::parse(code).is_some());
        if !ok {
            let loc = currency.loc.clone();
            self.push(
                &loc,
                format!("`pricing.currency` {text} is not a currency code"),
                Some("write three letters, an ISO 4217 code such as USD or EUR".into()),
            );
        }
    }

    /// Each of `fallbacks` (a list, or `{models: […]}`) names a `Model` document other than
    /// this one.
    fn fallback_models(&mut self) {
        let spec: &'a Node = self.spec;
        let Some(fallbacks) = spec.get("fallbacks") else {
            return;
        };
        let listed = match fallbacks.get("models") {
            Some(models) => strings(Some(models)),
            None => strings(Some(fallbacks)),
        };
        let name = self.doc.name.clone();
        for (model, node) in listed {
            let problem = if model == name {
                Some((format!("model `{name}` lists itself as a fallback"), None))
            } else if !self.docs.contains(Kind::Model, model) {
                let hint = missing_hint(model, self.docs.names(Kind::Model), "Model", "models");
                Some((
                    format!("model `{name}` falls back to `{model}`, which is not defined"),
                    Some(hint),
                ))
            } else {
                None
            };
            if let Some((message, hint)) = problem {
                let loc = node.loc.clone();
                self.push(&loc, message, hint);
            }
        }
    }

    /// Fields that only another provider reads would be ignored: each is an error.
    fn foreign_model_fields(&mut self, provider: &str) {
        const READERS: &[(&str, &[&str])] = &[
            ("baseUrl", &["openai", "anthropic"]),
            ("apiKeyEnv", &["openai", "anthropic"]),
            ("timeout", &["openai", "anthropic"]),
            ("params", &["openai", "anthropic", "replay"]),
            ("script", &["scripted"]),
            ("cache", &["anthropic"]),
            ("cassette", &["replay"]),
            ("match", &["replay"]),
        ];
        if !["openai", "anthropic", "scripted", "replay"].contains(&provider) {
            return;
        }
        let foreign: Vec<&str> = READERS
            .iter()
            .filter(|(_, readers)| !readers.contains(&provider))
            .map(|(field, _)| *field)
            .collect();
        let name = self.doc.name.clone();
        self.fields_without_effect(&foreign, |field| {
            let readers = READERS
                .iter()
                .find(|(f, _)| *f == field)
                .map_or(&[][..], |(_, readers)| *readers);
            let owners = readers
                .iter()
                .map(|r| format!("`{r}`"))
                .collect::<Vec<_>>()
                .join(" and ");
            (
                format!("`{field}` has no effect on {provider} model `{name}`"),
                format!("remove it; `{field}` applies to {owners} models only"),
            )
        });
        let spec: &'a Node = self.spec;
        if provider != "anthropic"
            && let Some(entry) = spec.get("params").and_then(|p| p.entry("thinking"))
        {
            let loc = entry.key_loc.clone();
            self.push(
                &loc,
                format!("`params.thinking` has no effect on {provider} model `{name}`"),
                Some("remove it; extended thinking applies to `anthropic` models only".into()),
            );
        }
    }
}
