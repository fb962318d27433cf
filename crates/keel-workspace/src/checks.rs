//! Checks that go beyond one document's schema: references between documents (an agent's
//! model and tools, the runtime's default agent, an agent's required tools, a tool's bound
//! hooks and their events, a policy's agents), provider settings that depend on each other,
//! tool names that shadow built-ins, tool argument schemas that must themselves be valid JSON
//! Schemas, hook matchers and redaction patterns that must be valid regexes, and fields that
//! would be parsed without effect (a store other than the default, settings of another
//! provider): nothing a user writes is silently ignored. `McpServer` documents and the MCP
//! names agents list are checked in `checks/mcp.rs`, the Runtime's `observability.otlp` in
//! `checks/observability.rs`.
//!
//! They read the merged YAML trees, not the typed specs, so that a document with a schema
//! error still has its references checked: every problem is reported in one pass. Values of
//! the wrong type are skipped here (schema validation reports them).

mod facade;
mod mcp;
mod memory;
mod model;
mod observability;
mod skills;
mod workflow;

pub(crate) use skills::check_agent_skills;

use std::collections::BTreeSet;

use globset::Glob;
use serde_json::Value;

use crate::documents::{Document, Documents, Kind};
use crate::mcp::{MCP_TOOL_PREFIX, READ_MCP_RESOURCE_TOOL, has_glob_chars, split_mcp_tool};
use crate::memory::{MEMORY_SEARCH_TOOL, MEMORY_TOOLS, REMEMBER_TOOL};
use crate::skills::{PROPOSE_SKILL_TOOL, SKILL_TOOLS};
use crate::suggest::{closest, list};
use crate::validate::{Reporter, segments};
use crate::yaml::{Loc, Node, NodeValue, Seg};
use crate::{BUILTIN_TOOLS, DEFAULT_STORE_URL, Diagnostic};

/// Runs every check on every document that has a spec.
/// `provided` names tools the embedding program supplies in code (the SDK's injected tools).
pub(crate) fn check_all(docs: &Documents, provided: &BTreeSet<String>, out: &mut Vec<Diagnostic>) {
    for doc in &docs.list {
        let Some(spec) = &doc.spec else { continue };
        let mut checker = Checker {
            docs,
            provided,
            doc,
            spec,
            out: &mut *out,
        };
        match doc.kind {
            Kind::Runtime => checker.runtime(),
            Kind::Model => checker.model(),
            Kind::Tool => checker.tool(),
            Kind::Agent => checker.agent(),
            Kind::Policy => checker.policy(),
            Kind::Hook => checker.hook(),
            Kind::McpServer => checker.mcp_server(),
            Kind::Memory => checker.memory(),
            Kind::Workflow => checker.workflow(),
            // Checked with their cases files (`eval.rs`).
            Kind::Eval | Kind::RemoteAgent => {}
        }
    }
}

struct Checker<'a> {
    docs: &'a Documents,
    provided: &'a BTreeSet<String>,
    doc: &'a Document,
    spec: &'a Node,
    out: &'a mut Vec<Diagnostic>,
}

impl<'a> Checker<'a> {
    fn push(&mut self, loc: &Loc, message: String, hint: Option<String>) {
        self.out.push(loc.error(message, hint));
    }

    /// The string at `key` of the spec, with its node.
    fn string(&self, key: &str) -> Option<(&'a str, &'a Node)> {
        let spec: &'a Node = self.spec;
        let node = spec.get(key)?;
        Some((node.as_str()?, node))
    }

    fn runtime(&mut self) {
        self.store_url();
        self.redaction_patterns();
        self.context_without_windows();
        self.observability();
        let repair_model = self
            .spec
            .get("gateway")
            .and_then(|g| g.get("repairModel"))
            .and_then(|n| Some((n.as_str()?, n)));
        if let Some((model, node)) = repair_model
            && !self.docs.contains(Kind::Model, model)
        {
            let hint = missing_hint(model, self.docs.names(Kind::Model), "Model", "models");
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("`gateway.repairModel` names model `{model}`, which is not defined"),
                Some(hint),
            );
        }
        let Some((agent, node)) = self.string("defaultAgent") else {
            return;
        };
        if self.docs.has_agent(agent) {
            return;
        }
        let hint = missing_hint(agent, self.docs.agent_names(), "Agent", "agents");
        self.push(
            &node.loc,
            format!("`defaultAgent` names agent `{agent}`, which is not defined"),
            Some(hint),
        );
    }

    /// The store's URL must fit its kind: SQLite keeps `.keel/keel.db` (the one place
    /// inspection commands find it), PostgreSQL needs a `postgres://` URL; a database
    /// artifact store needs the PostgreSQL store, and a schema name must be plain.
    fn store_url(&mut self) {
        let store = self.spec.get("store");
        let kind = store
            .and_then(|s| s.get("kind"))
            .and_then(|k| k.as_str().map(|v| (v, k.loc.clone())));
        let url = store
            .and_then(|s| s.get("url"))
            .and_then(|n| Some((n.as_str()?, n.loc.clone())));
        let postgres = match (&kind, &url) {
            (Some((kind, _)), _) => *kind == "postgres",
            (None, Some((url, _))) => crate::spec::is_postgres_url(url),
            (None, None) => false,
        };
        if let Some((url, loc)) = &url {
            if postgres && !crate::spec::is_postgres_url(url) {
                self.push(
                    loc,
                    format!("`store.url` `{url}` is not a PostgreSQL URL"),
                    Some(
                        "write `postgres://user@host:port/database`, e.g. `${DATABASE_URL}`".into(),
                    ),
                );
            } else if !postgres && *url != DEFAULT_STORE_URL {
                let hint = match crate::spec::is_postgres_url(url) {
                    true => "this is a PostgreSQL URL: set `store.kind: postgres`",
                    false => {
                        "remove `store.url`, or set `store.kind: postgres` with a `postgres://` URL"
                    }
                };
                self.push(
                    loc,
                    format!(
                        "`store.url` `{url}` is not supported: the SQLite store is always `{DEFAULT_STORE_URL}`"
                    ),
                    Some(hint.into()),
                );
            }
        } else if let Some((_, loc)) = kind.as_ref().filter(|_| postgres) {
            self.push(
                loc,
                "`store.kind: postgres` needs `store.url`".to_owned(),
                Some("add `url: ${DATABASE_URL}` (a `postgres://` URL)".into()),
            );
        }
        if !postgres {
            for key in ["schema", "leaseTtl"] {
                if let Some(node) = store.and_then(|s| s.get(key)) {
                    let loc = node.loc.clone();
                    self.push(
                        &loc,
                        format!("`store.{key}` applies only to the PostgreSQL store"),
                        Some("remove it, or set `store.kind: postgres`".into()),
                    );
                }
            }
            let database = store
                .and_then(|s| s.get("artifacts"))
                .and_then(|a| a.get("kind"))
                .filter(|k| k.as_str() == Some("database"));
            if let Some(node) = database {
                let loc = node.loc.clone();
                self.push(
                    &loc,
                    "`store.artifacts.kind: database` needs the PostgreSQL store".to_owned(),
                    Some("use `filesystem` (the default) with the SQLite store".into()),
                );
            }
        }
        if postgres && let Some(node) = store.and_then(|s| s.get("mirror")) {
            let loc = node.loc.clone();
            self.push(
                &loc,
                "`store.mirror` applies only to the SQLite store (PostgreSQL keeps no JSONL mirror)"
                    .to_owned(),
                Some("remove it; `keel runs export ID` writes a run's JSONL from any store".into()),
            );
        }
        if let Some(node) = store.and_then(|s| s.get("schema")) {
            let valid = node.as_str().is_some_and(|s| {
                !s.is_empty()
                    && s.len() <= 63
                    && !s.starts_with(|c: char| c.is_ascii_digit())
                    && s.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
            if !valid {
                let loc = node.loc.clone();
                self.push(
                    &loc,
                    "`store.schema` must be lower-case letters, digits and `_` (at most 63, not starting with a digit)".to_owned(),
                    None,
                );
            }
        }
    }

    /// Each `redaction.patterns` item must be a valid regex.
    fn redaction_patterns(&mut self) {
        let patterns = strings(self.spec.get("redaction").and_then(|r| r.get("patterns")));
        for (index, (pattern, node)) in patterns.into_iter().enumerate() {
            if let Err(e) = regex::Regex::new(pattern) {
                self.push(
                    &node.loc,
                    format!(
                        "`redaction.patterns[{index}]` is not a valid regex: {}",
                        regex_reason(e)
                    ),
                    Some("write a regex over secret values, e.g. `sk-[A-Za-z0-9]{20,}`".into()),
                );
            }
        }
    }

    /// Each of `fields` that is set (not null) would be ignored: an error at its key, with the
    /// message and hint `say` gives for the field.
    fn fields_without_effect(&mut self, fields: &[&str], say: impl Fn(&str) -> (String, String)) {
        let spec: &'a Node = self.spec;
        for field in fields {
            let Some(entry) = spec.entry(field).filter(|e| !e.value.is_null()) else {
                continue;
            };
            let (message, hint) = say(field);
            self.push(&entry.key_loc, message, Some(hint));
        }
    }

    /// The runtime's `context`, written out, compacts against the models' `contextWindow`s:
    /// with no model declaring one, it would have no effect.
    fn context_without_windows(&mut self) {
        let spec: &'a Node = self.spec;
        let Some(entry) = spec.entry("context").filter(|e| !e.value.is_null()) else {
            return;
        };
        let windowed = self.docs.names(Kind::Model).any(|model| {
            self.docs
                .get(Kind::Model, model)
                .and_then(|doc| doc.spec.as_ref())
                .is_some_and(|spec| spec.get("contextWindow").is_some_and(|n| !n.is_null()))
        });
        if !windowed && self.docs.names(Kind::Model).next().is_some() {
            let loc = entry.key_loc.clone();
            self.push(
                &loc,
                "`context` has no effect: no model declares `contextWindow`".to_owned(),
                Some(
                    "add `contextWindow:` (tokens) to the models whose prompts should be compacted"
                        .into(),
                ),
            );
        }
    }

    /// An agent's own `context` compacts against its model's `contextWindow`: a model that
    /// declares none would leave the setting without effect.
    fn context_needs_a_window(&mut self, agent: &str) {
        let spec: &'a Node = self.spec;
        let Some(entry) = spec.entry("context").filter(|e| !e.value.is_null()) else {
            return;
        };
        let Some((model, _)) = self.string("model") else {
            return;
        };
        let windowed = self
            .docs
            .get(Kind::Model, model)
            .and_then(|doc| doc.spec.as_ref())
            .is_some_and(|spec| spec.get("contextWindow").is_some_and(|n| !n.is_null()));
        if self.docs.contains(Kind::Model, model) && !windowed {
            let loc = entry.key_loc.clone();
            self.push(
                &loc,
                format!(
                    "agent `{agent}` sets `context`, but its model `{model}` declares no `contextWindow`"
                ),
                Some(format!(
                    "add `contextWindow:` (tokens) to model `{model}`; compaction measures the prompt against it"
                )),
            );
        }
    }

    fn tool(&mut self) {
        let name = &self.doc.name;
        if BUILTIN_TOOLS.contains(&name.as_str()) {
            let loc = self.doc.name_loc.clone();
            self.push(
                &loc,
                format!("tool `{name}` has the name of a built-in tool"),
                Some("rename it; built-in tools need no `Tool` document".into()),
            );
        }
        self.tool_name_reserved_for_mcp();
        if let Some(schema) = self.spec.get("schema")
            && matches!(schema.value, NodeValue::Map(_))
        {
            self.tool_schema(schema, &schema.to_json());
        }
        if let Some(hooks) = self.spec.get("hooks") {
            self.tool_hooks(hooks, "preCall", "PreToolUse");
            self.tool_hooks(hooks, "postCall", "PostToolUse");
        }
    }

    /// `mcp__…` names and `read_mcp_resource` belong to MCP servers: a `Tool` document with
    /// such a name would be mistaken for one of their tools.
    fn tool_name_reserved_for_mcp(&mut self) {
        let name = &self.doc.name;
        let message = if name.starts_with(MCP_TOOL_PREFIX) {
            format!("tool `{name}` starts with `{MCP_TOOL_PREFIX}`, which names MCP servers' tools")
        } else if name == READ_MCP_RESOURCE_TOOL {
            format!("tool `{name}` has the name of the tool that reads MCP resources")
        } else if SKILL_TOOLS.contains(&name.as_str()) || name == PROPOSE_SKILL_TOOL {
            format!("tool `{name}` has the name of one of Keel's skill tools")
        } else if MEMORY_TOOLS.contains(&name.as_str()) {
            format!("tool `{name}` has the name of one of Keel's memory tools")
        } else if name == crate::TASK_TOOL {
            format!("tool `{name}` has the name of the tool agents delegate to subagents with")
        } else {
            return;
        };
        let loc = self.doc.name_loc.clone();
        self.push(
            &loc,
            message,
            Some("rename it; an MCP server's tools come from a `kind: McpServer` document".into()),
        );
    }

    /// Each hook named in `hooks.<key>` must be a `Hook` document listening to `event`.
    fn tool_hooks(&mut self, hooks: &Node, key: &str, event: &str) {
        let tool = self.doc.name.clone();
        for (hook, node) in strings(hooks.get(key)) {
            let Some(doc) = self.docs.get(Kind::Hook, hook) else {
                let hint = missing_hint(hook, self.docs.names(Kind::Hook), "Hook", "hooks");
                self.push(
                    &node.loc,
                    format!(
                        "tool `{tool}` binds hook `{hook}` in `hooks.{key}`, which is not defined"
                    ),
                    Some(hint),
                );
                continue;
            };
            let declared = doc
                .spec
                .as_ref()
                .and_then(|spec| spec.get("event"))
                .and_then(Node::as_str)
                .and_then(canonical_event);
            if let Some(declared) = declared
                && declared != event
            {
                self.push(
                    &node.loc,
                    format!(
                        "tool `{tool}` binds hook `{hook}` in `hooks.{key}`, but that hook's event is `{declared}`, not `{event}`"
                    ),
                    Some(format!(
                        "`hooks.{key}` takes `{event}` hooks; set `event: {event}` on Hook `{hook}` (at {}) or bind another hook",
                        doc.name_loc.short()
                    )),
                );
            }
        }
    }

    fn policy(&mut self) {
        let policy = self.doc.name.clone();
        for (agent, node) in strings(self.spec.get("agents")) {
            if self.docs.has_agent(agent) {
                continue;
            }
            let hint = missing_hint(agent, self.docs.agent_names(), "Agent", "agents");
            self.push(
                &node.loc,
                format!("policy `{policy}` applies to agent `{agent}`, which is not defined"),
                Some(hint),
            );
        }
    }

    fn hook(&mut self) {
        self.hook_on_error();
        let Some((matcher, node)) = self.string("matcher") else {
            return;
        };
        let hook = self.doc.name.clone();
        let event = self
            .string("event")
            .and_then(|(event, _)| Some((event, canonical_event(event)?)));
        if let Some((written, event)) = event
            && !TOOL_EVENTS.contains(&event)
        {
            self.push(
                &node.loc,
                format!(
                    "hook `{hook}` has a `matcher`, but its event `{written}` is not a tool event"
                ),
                Some(format!(
                    "matchers select tools, so they apply only to {}; remove `matcher`",
                    list(TOOL_EVENTS.iter().copied())
                )),
            );
            return;
        }
        if let Err(e) = regex::Regex::new(matcher) {
            let reason = regex_reason(e);
            self.push(
                &node.loc,
                format!("`matcher` of hook `{hook}` is not a valid regex: {reason}"),
                Some(
                    "write a regex over tool names, e.g. `^(write_file|edit_file)$` or `mcp__.*`"
                        .into(),
                ),
            );
        }
    }

    /// `onError: deny` denies the tool call a `PreToolUse` hook guards; on any other event
    /// there is no call to deny, and it would act like `warn`.
    fn hook_on_error(&mut self) {
        let Some((on_error, node)) = self.string("onError") else {
            return;
        };
        let event = self
            .string("event")
            .and_then(|(event, _)| Some((event, canonical_event(event)?)));
        let Some((written, event)) = event else {
            return;
        };
        if on_error != "deny" || event == "PreToolUse" {
            return;
        }
        let hook = self.doc.name.clone();
        let loc = node.loc.clone();
        self.push(
            &loc,
            format!(
                "`onError: deny` of hook `{hook}` has no effect: its event `{written}` guards no tool call"
            ),
            Some(
                "only `PreToolUse` hooks can deny a call; use `fail-run`, `warn` or `skip`"
                    .into(),
            ),
        );
    }

    /// The argument schema must be a valid JSON Schema describing an object.
    fn tool_schema(&mut self, node: &Node, schema: &Value) {
        let label = self.doc.label();
        let before = self.out.len();
        match jsonschema::meta::validator_for(schema) {
            Ok(meta) => {
                let reporter = Reporter {
                    doc: self.doc,
                    spec: self.spec,
                    base: vec![Seg::Key("schema".into())],
                    schema: &Value::Null,
                };
                for error in meta.iter_errors(schema) {
                    reporter.report(&error, self.out);
                }
            }
            Err(e) => self.push(
                &node.loc,
                format!("`spec.schema` of {label} is not a valid JSON Schema: {e}"),
                None,
            ),
        }
        if self.out.len() > before {
            return;
        }
        if schema.get("type") != Some(&Value::String("object".into())) {
            let loc = node.get("type").map_or(&node.loc, |t| &t.loc).clone();
            self.push(
                &loc,
                format!("`spec.schema` of {label} must describe an object"),
                Some(
                    "tool arguments are a JSON object: put `type: object` at the root of the schema"
                        .into(),
                ),
            );
            return;
        }
        if let Err(e) = jsonschema::validator_for(schema) {
            let loc = node.deepest(&segments(e.instance_path())).loc.clone();
            self.push(
                &loc,
                format!("`spec.schema` of {label} is not a usable JSON Schema: {e}"),
                None,
            );
        }
    }

    fn agent(&mut self) {
        let agent = self.doc.name.clone();
        if let Some((model, node)) = self.string("model")
            && !self.docs.contains(Kind::Model, model)
        {
            let hint = missing_hint(model, self.docs.names(Kind::Model), "Model", "models");
            let message = format!("agent `{agent}` uses model `{model}` which is not defined");
            let loc = node.loc.clone();
            self.push(&loc, message, Some(hint));
        }
        self.context_needs_a_window(&agent);
        let tools = strings(self.spec.get("tools"));
        let prefixes = self.mcp_prefixes();
        for (tool, node) in &tools {
            if BUILTIN_TOOLS.contains(tool)
                || self.docs.contains(Kind::Tool, tool)
                || self.provided.contains(*tool)
            {
                continue;
            }
            if *tool == crate::TASK_TOOL {
                continue;
            }
            if SKILL_TOOLS.contains(tool) || *tool == PROPOSE_SKILL_TOOL {
                self.skill_tool_entry(&agent, tool, node);
            } else if MEMORY_TOOLS.contains(tool) {
                self.memory_tool_entry(&agent, tool, node);
            } else if *tool == READ_MCP_RESOURCE_TOOL {
                self.read_mcp_resource_entry(&agent, node, &prefixes);
            } else if tool.starts_with(MCP_TOOL_PREFIX) {
                self.mcp_tool_entry(&agent, tool, node, &prefixes);
            } else if has_glob_chars(tool) {
                self.glob_outside_mcp(&agent, tool, node, &prefixes);
            } else {
                self.unknown_tool(&agent, tool, node, !prefixes.is_empty());
            }
        }
        self.required_tools(&agent, &tools, &prefixes);
        self.agent_delegation(&agent);
        facade::check_clamp(&agent, self.spec, self.out);
    }

    /// A skill tool in an agent's `tools`: the skill tools need skills to use.
    fn skill_tool_entry(&mut self, agent: &str, tool: &str, node: &Node) {
        let has_skills = !strings(self.spec.get("skills")).is_empty();
        if tool != PROPOSE_SKILL_TOOL && !has_skills {
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!("agent `{agent}` lists `{tool}` but no `skills`"),
                Some(
                    "list the skills it may use in `skills` (it then has this tool anyway)".into(),
                ),
            );
        }
    }

    /// A memory tool in an agent's `tools`: a `Memory` document must let the agent search
    /// (`memory_search`) or write (`remember`).
    fn memory_tool_entry(&mut self, agent: &str, tool: &str, node: &Node) {
        let field = if tool == REMEMBER_TOOL {
            "writers"
        } else {
            "readers"
        };
        debug_assert!(tool == REMEMBER_TOOL || tool == MEMORY_SEARCH_TOOL);
        let allowed = self
            .docs
            .list
            .iter()
            .filter(|d| d.kind == Kind::Memory)
            .filter_map(|d| d.spec.as_ref())
            .any(|spec| {
                strings(spec.get(field))
                    .iter()
                    .any(|(entry, _)| crate::skills::glob_matches(entry, agent))
            });
        if !allowed {
            let loc = node.loc.clone();
            self.push(
                &loc,
                format!(
                    "agent `{agent}` lists `{tool}` but no `Memory` document has it in `{field}`"
                ),
                Some(format!(
                    "add `{agent}` to a Memory document's `{field}` (it then has this tool anyway)"
                )),
            );
        }
    }

    /// An agent's tool that is neither built in, declared, provided nor an MCP name.
    fn unknown_tool(&mut self, agent: &str, tool: &str, node: &Node, mcp: bool) {
        let known: Vec<&str> = BUILTIN_TOOLS
            .iter()
            .copied()
            .chain(self.docs.names(Kind::Tool))
            .chain(mcp.then_some(READ_MCP_RESOURCE_TOOL))
            .collect();
        let hint = match closest(tool, known.iter().copied(), 2) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!(
                "built-in tools are {}; declare others with a `kind: Tool` document",
                list(BUILTIN_TOOLS.iter().copied())
            ),
        };
        self.push(
            &node.loc,
            format!("agent `{agent}` uses tool `{tool}` which is neither built in nor defined"),
            Some(hint),
        );
    }

    /// Each of `contract.requiredTools` names one tool the agent lists: by name, or through
    /// an `mcp__<prefix>__…` glob in `tools` of a declared server (`prefixes`).
    fn required_tools(&mut self, agent: &str, tools: &[(&str, &Node)], prefixes: &[&str]) {
        let required = strings(
            self.spec
                .get("contract")
                .and_then(|c| c.get("requiredTools")),
        );
        for (tool, node) in required {
            if has_glob_chars(tool) {
                self.push(
                    &node.loc,
                    format!(
                        "agent `{agent}` requires `{tool}` in its contract, but `requiredTools` names tools, not globs"
                    ),
                    Some(
                        "name each tool that must be called, e.g. `mcp__files__read_file`".into(),
                    ),
                );
                continue;
            }
            let listed = tools
                .iter()
                .any(|(listed, _)| *listed == tool || mcp_glob_matches(listed, tool, prefixes));
            if listed {
                continue;
            }
            self.push(
                &node.loc,
                format!(
                    "agent `{agent}` requires tool `{tool}` in its contract but does not list it in `tools`"
                ),
                Some(format!(
                    "add `{tool}` to `spec.tools`, or remove it from `requiredTools`"
                )),
            );
        }
    }
}

/// Whether `pattern`, an agent's `mcp__<prefix>__<glob>` entry for a declared prefix, selects
/// `tool`.
fn mcp_glob_matches(pattern: &str, tool: &str, prefixes: &[&str]) -> bool {
    let declared = split_mcp_tool(pattern)
        .is_some_and(|(prefix, _)| !has_glob_chars(prefix) && prefixes.contains(&prefix));
    declared
        && has_glob_chars(pattern)
        && Glob::new(pattern).is_ok_and(|glob| glob.compile_matcher().is_match(tool))
}

/// Why a regex does not compile, in one line (the crate's own message draws a caret diagram).
fn regex_reason(error: regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .map_or_else(
                || text.clone(),
                |l| l.trim_start_matches("error:").trim().to_owned(),
            ),
        other => other.to_string(),
    }
}

/// A workspace must define an agent or a workflow: without one nothing can run. `docs` is
/// every document read and `empty` the files that hold none; the error points at the first
/// empty file and names them all (an agent file saved empty is the usual cause), else at the
/// first document (or at `config/` when there is none).
pub(crate) fn check_runnable(
    docs: &Documents,
    config: &std::path::Path,
    empty: &[std::path::PathBuf],
    out: &mut Vec<Diagnostic>,
) {
    if docs.agent_names().next().is_some() || docs.names(Kind::Workflow).next().is_some() {
        return;
    }
    let mut message =
        "the workspace defines no agent (nor workflow), so nothing can run".to_owned();
    if !empty.is_empty() {
        let files: Vec<String> = empty.iter().map(|f| f.display().to_string()).collect();
        let (files, verb) = match files.len() {
            1 => (format!("`{}`", files[0]), "holds no document: it is empty"),
            _ => (
                list(files.iter().map(String::as_str)),
                "hold no document: they are empty",
            ),
        };
        message = format!("{message}; {files} {verb} (or only comments)");
    }
    let hint = Some(
        "add a `kind: Agent` document naming a model and its tools (`keel init` writes one)"
            .to_owned(),
    );
    let at_file = |file: &std::path::Path, message, hint| Diagnostic {
        file: file.to_path_buf(),
        line: 1,
        column: 1,
        message,
        hint,
    };
    let diagnostic = match (empty.first(), docs.list.first()) {
        (Some(file), _) => at_file(file, message, hint),
        (None, Some(doc)) => doc.loc.error(message, hint),
        (None, None) => at_file(config, message, hint),
    };
    out.push(diagnostic);
}

/// Hook events that concern one tool call (a `matcher` selects the tools).
const TOOL_EVENTS: &[&str] = &["PreToolUse", "PostToolUse"];

/// The event a hook's `event` names, with aliases resolved; `None` for an unknown event
/// (schema validation reports it).
fn canonical_event(event: &str) -> Option<&'static str> {
    Some(match event {
        "PromptSubmit" | "UserPromptSubmit" => "PromptSubmit",
        "PreToolUse" | "PreAbilityCall" => "PreToolUse",
        "PostToolUse" | "PostAbilityCall" => "PostToolUse",
        "SessionStop" | "Stop" => "SessionStop",
        "RunStart" => "RunStart",
        "RunEnd" => "RunEnd",
        _ => return None,
    })
}

/// The string items of a list node (other items are left to schema validation).
fn strings(node: Option<&Node>) -> Vec<(&str, &Node)> {
    match node.map(|n| &n.value) {
        Some(NodeValue::Seq(items)) => items
            .iter()
            .filter_map(|item| Some((item.as_str()?, item)))
            .collect(),
        _ => Vec::new(),
    }
}

/// "did you mean …?", or which documents exist, or how to add one.
fn missing_hint<'a>(
    name: &str,
    defined: impl Iterator<Item = &'a str>,
    kind: &str,
    plural: &str,
) -> String {
    let defined: Vec<&str> = defined.collect();
    if let Some(near) = closest(name, defined.iter().copied(), 2) {
        return format!("did you mean `{near}`?");
    }
    if defined.is_empty() {
        return format!("no {plural} are defined; add a `kind: {kind}` document named `{name}`");
    }
    format!(
        "defined {plural} are {}; or add a `kind: {kind}` document named `{name}`",
        list(defined.iter().copied())
    )
}
