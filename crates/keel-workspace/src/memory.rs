//! Memory namespaces: templates over a request (`users/{metadata.user}`), rendered for a run
//! and matched against a namespace an operator names.

use std::collections::BTreeMap;

/// The tool that searches an agent's readable memories.
pub const MEMORY_SEARCH_TOOL: &str = "memory_search";
/// The tool that submits a memory candidate.
pub const REMEMBER_TOOL: &str = "remember";
/// Both memory tools: an agent that reads a memory has `memory_search`, one that writes has
/// `remember`.
pub const MEMORY_TOOLS: [&str; 2] = [MEMORY_SEARCH_TOOL, REMEMBER_TOOL];

/// One part of a namespace template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Agent,
    Session,
    Metadata(String),
}

/// A parsed namespace template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceTemplate {
    parts: Vec<Part>,
}

/// What a namespace is rendered for.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceScope<'a> {
    pub agent: &'a str,
    pub session: Option<&'a str>,
    pub metadata: &'a BTreeMap<String, String>,
}

/// Whether `value` may stand for a placeholder: one path segment of visible characters.
fn valid_segment(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("is empty".into());
    }
    if value.len() > 200 {
        return Err("is longer than 200 bytes".into());
    }
    if value == "." || value == ".." {
        return Err(format!("is `{value}`"));
    }
    match value
        .chars()
        .find(|c| *c == '/' || c.is_control() || c.is_whitespace())
    {
        Some(c) => Err(format!("contains {c:?} (a namespace segment may not)")),
        None => Ok(()),
    }
}

impl NamespaceTemplate {
    /// Parses `users/{metadata.user}`; an unknown placeholder or a stray brace is an error.
    pub fn parse(template: &str) -> Result<Self, String> {
        if template.trim().is_empty() {
            return Err("the namespace is empty".into());
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find(['{', '}']) {
            if rest[open..].starts_with('}') {
                return Err(format!("`}}` without `{{` in `{template}`"));
            }
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(format!("`{{` without `}}` in `{template}`"));
            };
            let name = rest[open + 1..open + close].trim();
            parts.push(match name {
                "agent" => Part::Agent,
                "session" => Part::Session,
                _ => match name.strip_prefix("metadata.") {
                    Some(key) if !key.is_empty() && !key.contains(['{', '}']) => {
                        Part::Metadata(key.to_owned())
                    }
                    _ => {
                        return Err(format!(
                            "unknown placeholder `{{{name}}}`; use `{{agent}}`, `{{session}}` or \
                             `{{metadata.KEY}}`"
                        ));
                    }
                },
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Self { parts })
    }

    /// The namespace for a run, or what is missing.
    pub fn render(&self, scope: &NamespaceScope<'_>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            let (value, what) = match part {
                Part::Text(text) => {
                    out.push_str(text);
                    continue;
                }
                Part::Agent => (Some(scope.agent), "`{agent}`".to_owned()),
                Part::Session => (
                    scope.session,
                    "`{session}` needs a session; send the request in one".to_owned(),
                ),
                Part::Metadata(key) => {
                    let Some(value) = scope.metadata.get(key) else {
                        return Err(format!(
                            "`{{metadata.{key}}}` needs request metadata `{key}`"
                        ));
                    };
                    // A caller's value: one form for look-alikes, nothing invisible.
                    let value = crate::identity::normalise(&format!("metadata.{key}"), value)?;
                    valid_segment(&value)
                        .map_err(|why| format!("the value of `metadata.{key}` {why}"))?;
                    out.push_str(&value);
                    continue;
                }
            };
            let Some(value) = value else {
                return Err(what);
            };
            valid_segment(value).map_err(|why| format!("the value for {what} {why}"))?;
            out.push_str(value);
        }
        Ok(out)
    }

    /// Whether `namespace` is one this template renders to (each placeholder standing for one
    /// segment).
    pub fn matches(&self, namespace: &str) -> bool {
        fn go(parts: &[Part], rest: &str) -> bool {
            match parts.split_first() {
                None => rest.is_empty(),
                Some((Part::Text(text), tail)) => rest
                    .strip_prefix(text.as_str())
                    .is_some_and(|r| go(tail, r)),
                Some((_, tail)) => {
                    // A placeholder takes one or more characters of one segment.
                    let end = rest.find('/').unwrap_or(rest.len());
                    (1..=end).any(|n| valid_segment(&rest[..n]).is_ok() && go(tail, &rest[n..]))
                }
            }
        }
        go(&self.parts, namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope<'a>(metadata: &'a BTreeMap<String, String>) -> NamespaceScope<'a> {
        NamespaceScope {
            agent: "assistant",
            session: None,
            metadata,
        }
    }

    #[test]
    fn templates_render_from_the_request_and_refuse_what_is_missing() {
        let t = NamespaceTemplate::parse("users/{metadata.user}/{agent}").unwrap();
        let mut metadata = BTreeMap::new();
        let error = t.render(&scope(&metadata)).unwrap_err();
        assert!(error.contains("request metadata `user`"), "{error}");
        metadata.insert("user".to_owned(), "../bob".to_owned());
        let error = t.render(&scope(&metadata)).unwrap_err();
        assert!(error.contains("contains '/'"), "{error}");
        metadata.insert("user".to_owned(), "alice".to_owned());
        assert_eq!(
            t.render(&scope(&metadata)).unwrap(),
            "users/alice/assistant"
        );
        let session = NamespaceTemplate::parse("chats/{session}").unwrap();
        assert!(
            session
                .render(&scope(&metadata))
                .unwrap_err()
                .contains("session")
        );
    }

    #[test]
    fn bad_templates_are_named() {
        for (bad, says) in [
            ("users/{user}", "unknown placeholder `{user}`"),
            ("users/{metadata.}", "unknown placeholder"),
            ("users/{metadata.user", "without `}`"),
            ("users}", "without `{`"),
            (" ", "empty"),
        ] {
            let error = NamespaceTemplate::parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn namespaces_match_their_template_segment_by_segment() {
        let t = NamespaceTemplate::parse("users/{metadata.user}").unwrap();
        assert!(t.matches("users/alice"));
        assert!(!t.matches("users/alice/notes"));
        assert!(!t.matches("users/"));
        assert!(!t.matches("teams/alice"));
        let fixed = NamespaceTemplate::parse("shared").unwrap();
        assert!(fixed.matches("shared"));
        assert!(!fixed.matches("shared2"));
    }
}
