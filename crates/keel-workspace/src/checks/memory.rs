//! Checks of `Memory` documents: the namespace template parses, `readers` and `writers` name
//! agents (a glob matches at least one), an embeddings model is a declared `openai` model,
//! and the limits are usable.

use super::{Checker, missing_hint, strings};
use crate::documents::Kind;
use crate::mcp::has_glob_chars;
use crate::memory::NamespaceTemplate;
use crate::skills::glob_matches;

impl Checker<'_> {
    pub(super) fn memory(&mut self) {
        if let Some((template, node)) = self.string("namespace")
            && let Err(error) = NamespaceTemplate::parse(template)
        {
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("namespace `{template}`: {error}"),
                Some("e.g. `users/{metadata.user}`, `agents/{agent}` or `team`".into()),
            );
        }
        for field in ["readers", "writers"] {
            for (entry, node) in strings(self.spec.get(field)) {
                let agents = || self.docs.agent_names();
                let found = match has_glob_chars(entry) {
                    true => agents().any(|a| glob_matches(entry, a)),
                    false => self.docs.has_agent(entry),
                };
                if !found {
                    let hint = missing_hint(entry, agents(), "Agent", "agents");
                    let loc = node.loc.clone();
                    self.push(
                        &loc,
                        format!("`{field}` entry `{entry}` names no agent of this workspace"),
                        Some(hint),
                    );
                }
            }
        }
        self.memory_limits();
        if let Some((model, node)) = self
            .spec
            .get("extraction")
            .and_then(|e| e.get("model"))
            .and_then(|n| Some((n.as_str()?, n)))
            && !self.docs.contains(Kind::Model, model)
        {
            let hint = missing_hint(model, self.docs.names(Kind::Model), "Model", "models");
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("`extraction.model` names model `{model}`, which is not defined"),
                Some(hint),
            );
        }
        let model = self
            .spec
            .get("embeddings")
            .and_then(|e| e.get("model"))
            .and_then(|n| Some((n.as_str()?, n)));
        let Some((model, node)) = model else { return };
        let loc = node.loc.clone();
        if !self.docs.contains(Kind::Model, model) {
            let hint = missing_hint(model, self.docs.names(Kind::Model), "Model", "models");
            self.push(
                &loc,
                format!("`embeddings.model` names model `{model}`, which is not defined"),
                Some(hint),
            );
            return;
        }
        let provider = self
            .docs
            .list
            .iter()
            .find(|d| d.kind == Kind::Model && d.name == model)
            .and_then(|d| {
                d.spec
                    .as_ref()?
                    .get("provider")?
                    .as_str()
                    .map(str::to_owned)
            });
        if provider.as_deref() != Some("openai") {
            self.push(
                &loc,
                format!(
                    "`embeddings.model` names model `{model}`, whose provider `{}` serves no \
                     embeddings",
                    provider.as_deref().unwrap_or("?")
                ),
                Some("use a model with `provider: openai` whose server has `/embeddings`".into()),
            );
        }
    }

    fn memory_limits(&mut self) {
        let number = |node: Option<&crate::yaml::Node>| {
            let node = node?;
            Some((node.as_f64()?, node.loc.clone()))
        };
        if let Some((chars, loc)) = number(self.spec.get("maxChars"))
            && !(1.0..=keel_types::MAX_MEMORY_TEXT as f64).contains(&chars)
        {
            self.push(
                &loc,
                format!(
                    "`maxChars` is {chars}; a record holds 1 to {} characters",
                    keel_types::MAX_MEMORY_TEXT
                ),
                None,
            );
        }
        let recall = self.spec.get("recall");
        if let Some((top_k, loc)) = number(recall.and_then(|r| r.get("topK")))
            && top_k < 1.0
        {
            self.push(
                &loc,
                "`recall.topK` must be at least 1".into(),
                Some("to recall nothing, set `recall.enabled: false`".into()),
            );
        }
    }
}
