//! The loading pipeline behind [`Workspace::load_with`]: find the files, parse them into
//! located trees, read envelopes, merge overlays, interpolate the environment, validate and
//! deserialize each spec, run the cross-document checks, and either compile the workspace
//! (with its explain table) or return every diagnostic, sorted.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::TASK_TOOL;
use crate::checks::{check_agent_skills, check_all, check_runnable};
use crate::documents::{Document, Documents, Kind, read_envelope};
use crate::env::load_env;
use crate::explain::explain_document;
use crate::interpolate::interpolate_tree;
use crate::memory::{MEMORY_SEARCH_TOOL, REMEMBER_TOOL};
use crate::skills::{SKILL_TOOLS, SkillLibrary, SkillRoot, glob_matches, scan_skills};
use crate::validate::validate_spec;
use crate::yaml::{Loc, Node, Source, parse_documents};
use crate::{
    AgentSpec, Diagnostic, HookSpec, LoadError, LoadOptions, McpServerSpec, ModelSpec, PolicySpec,
    RuntimeSpec, ToolSpecDoc, Workspace,
};

/// A document's spec after validation and deserialization.
#[derive(Debug, Clone)]
pub(crate) enum Typed {
    Runtime(Box<RuntimeSpec>),
    Model(ModelSpec),
    Tool(ToolSpecDoc),
    Agent(Box<AgentSpec>),
    Policy(PolicySpec),
    Hook(HookSpec),
    McpServer(McpServerSpec),
    Memory(crate::MemorySpec),
    Workflow(Box<crate::WorkflowSpec>),
    Eval(Box<crate::EvalSpec>),
}

/// Loads the workspace at `root`.
pub(crate) fn load(root: &Path, options: &LoadOptions) -> Result<Workspace, LoadError> {
    let root = open_root(root)?;
    crate::validate::warm_up();
    let mut diagnostics = Vec::new();
    let env = load_env(&root, &options.env, &mut diagnostics);

    let mut docs = Documents::default();
    let before_files = diagnostics.len();
    // The files read whole that hold no document (empty, or only comments).
    let mut empty = Vec::new();
    let files = yaml_files(&root.join("config"), Path::new("config"), &mut diagnostics);
    // A file (or folder) that could not be read at all, or not decoded: nothing of it is known.
    let mut unreadable = diagnostics.len() > before_files;
    for file in files {
        let shown = display_path(&root, &file, &file);
        let source = Source {
            file: shown.clone(),
            overlay: false,
        };
        let before = diagnostics.len();
        let Some(read) = read_file(&file, source, &mut diagnostics) else {
            unreadable = true;
            continue;
        };
        if read.is_empty() && diagnostics.len() == before {
            empty.push(shown);
        }
        for doc in read {
            docs.add_own(doc, &mut diagnostics);
        }
    }
    for overlay in &options.overlays {
        for (file, shown) in overlay_files(&root, overlay, &mut diagnostics) {
            let source = Source {
                file: shown,
                overlay: true,
            };
            let Some(read) = read_file(&file, source, &mut diagnostics) else {
                unreadable = true;
                continue;
            };
            for doc in read {
                docs.add_overlay(doc);
            }
        }
    }
    // A file that could not be read or parsed may hold the agent: only a workspace read whole
    // is known to have none.
    let read_whole = diagnostics.len() == before_files;
    // And a reference to a document not found may name one in a file that could not be read
    // at all; a file that could not be parsed says where, and references are still checked.
    if unreadable {
        docs.set_partial();
    }

    let mut interpolation = Vec::new();
    for doc in &mut docs.list {
        if let Some(spec) = &mut doc.spec {
            interpolate_tree(spec, &env, &mut interpolation);
        }
    }
    // A scalar whose interpolation failed keeps its `${…}` text; do not also report that
    // text as the wrong type.
    let failed: HashSet<_> = interpolation.iter().map(position).collect();
    diagnostics.append(&mut interpolation);

    let mut checked = Vec::new();
    crate::validate::prepare(docs.list.iter().map(|doc| doc.kind));
    let mut typed: Vec<Option<Typed>> = docs
        .list
        .iter()
        .map(|doc| compile(doc, &mut checked))
        .collect();
    check_all(&docs, &options.provided_tools, &mut checked);
    let evals = docs
        .list
        .iter()
        .zip(typed.iter_mut())
        .filter_map(|(doc, typed)| match typed {
            Some(Typed::Eval(spec)) => Some((doc, spec.as_mut())),
            _ => None,
        });
    crate::eval::load_evals(&root, &docs, evals, &mut checked);
    let roots = skill_roots(&typed);
    // A broken skill does not stop the workspace from loading: it is left out, its problems
    // kept in the library (`keel validate` reports them as errors). They are listed with the
    // workspace's own errors when there are any.
    let skills = scan_skills(&root, &roots);
    check_agent_skills(&docs, &skills.skills, &skills.broken, &mut checked);
    if options.require_agent && read_whole {
        check_runnable(&docs, Path::new("config"), &empty, &mut checked);
    }
    diagnostics.extend(
        checked
            .into_iter()
            .filter(|d| !failed.contains(&position(d))),
    );

    if !diagnostics.is_empty() {
        diagnostics.extend(skills.diagnostics);
        diagnostics.sort_by(|a, b| {
            (&a.file, a.line, a.column, &a.message).cmp(&(&b.file, b.line, b.column, &b.message))
        });
        diagnostics.dedup();
        return Err(LoadError::Invalid(diagnostics));
    }
    let mut workspace = build(root, env, &docs, typed);
    workspace.skills = Arc::new(SkillLibrary::new(&workspace.root, roots, skills));
    Ok(workspace)
}

/// The folders skills come from: the workspace's `resources/skills/`, then the Runtime
/// document's `skills.roots`.
fn skill_roots(typed: &[Option<Typed>]) -> Vec<SkillRoot> {
    let mut roots = vec![SkillRoot {
        path: PathBuf::from("resources/skills"),
        overrides: false,
    }];
    for spec in typed.iter().flatten() {
        if let Typed::Runtime(runtime) = spec {
            roots.extend(runtime.skills.roots.iter().map(|r| SkillRoot {
                path: PathBuf::from(&r.path),
                overrides: r.overrides,
            }));
        }
    }
    roots
}

fn position(d: &Diagnostic) -> (PathBuf, usize, usize) {
    (d.file.clone(), d.line, d.column)
}

/// The absolute workspace folder, if it is one.
fn open_root(root: &Path) -> Result<PathBuf, LoadError> {
    let not_a_workspace = |reason: &str| LoadError::NotAWorkspace {
        path: root.to_path_buf(),
        reason: reason.into(),
    };
    let absolute = std::fs::canonicalize(root).map_err(|_| {
        not_a_workspace("the folder does not exist; create a workspace with `keel init`")
    })?;
    if !absolute.is_dir() {
        return Err(not_a_workspace(
            "it is not a folder; point at a workspace folder, or create one with `keel init`",
        ));
    }
    if !absolute.join("config").is_dir() {
        return Err(not_a_workspace(
            "it has no `config/` folder; create a workspace with `keel init`",
        ));
    }
    Ok(absolute)
}

/// `file` relative to `root` when inside it, else `given`.
fn display_path(root: &Path, file: &Path, given: &Path) -> PathBuf {
    file.strip_prefix(root)
        .map_or_else(|_| given.to_path_buf(), Path::to_path_buf)
}

/// `*.yaml` and `*.yml` files under `dir`, sorted by path; hidden entries are skipped.
/// `shown` names `dir` in diagnostics.
fn yaml_files(dir: &Path, shown: &Path, diagnostics: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let walker = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        match entry {
            Ok(entry) => {
                let is_yaml = entry
                    .path()
                    .extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml");
                if entry.file_type().is_file() && is_yaml {
                    files.push(entry.into_path());
                }
            }
            Err(e) => {
                let at = e.path().map_or_else(
                    || shown.to_path_buf(),
                    |p| shown.join(p.strip_prefix(dir).unwrap_or(p)),
                );
                let source = Arc::new(Source {
                    file: at,
                    overlay: false,
                });
                diagnostics.push(Loc::start_of(&source).error(format!("cannot read: {e}"), None));
            }
        }
    }
    files.sort();
    files
}

/// The files of one overlay path with the names to show for them.
fn overlay_files(
    root: &Path,
    given: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(PathBuf, PathBuf)> {
    let Ok(absolute) = std::fs::canonicalize(given) else {
        let source = Arc::new(Source {
            file: given.to_path_buf(),
            overlay: true,
        });
        diagnostics.push(
            Loc::start_of(&source).error(
                format!("overlay `{}` does not exist", given.display()),
                Some(
                    "check KEEL_CONFIG_PATHS; relative paths resolve against the current directory"
                        .into(),
                ),
            ),
        );
        return Vec::new();
    };
    if !absolute.is_dir() {
        return vec![(absolute.clone(), display_path(root, &absolute, given))];
    }
    yaml_files(&absolute, given, diagnostics)
        .into_iter()
        .map(|file| {
            let inside = given.join(file.strip_prefix(&absolute).unwrap_or(&file));
            let shown = display_path(root, &file, &inside);
            (file, shown)
        })
        .collect()
}

/// Reads, parses and identifies the documents of one file; `None` when the file cannot be
/// read or is not UTF-8 (nothing of it is known).
fn read_file(
    path: &Path,
    source: Source,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<Document>> {
    let source = Arc::new(source);
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            diagnostics.push(Loc::start_of(&source).error(format!("cannot read file: {e}"), None));
            return None;
        }
    };
    let text = match decode_utf8(bytes, &source) {
        Ok(text) => text,
        Err(diagnostic) => {
            diagnostics.push(diagnostic);
            return None;
        }
    };
    let parsed = parse_documents(&text, &source);
    diagnostics.extend(parsed.errors);
    Some(
        parsed
            .documents
            .into_iter()
            .filter_map(|root| read_envelope(root, diagnostics))
            .collect(),
    )
}

/// The file's text, or a diagnostic at the first byte that is not UTF-8: its line, and its
/// column counted in characters like every other column.
fn decode_utf8(bytes: Vec<u8>, source: &Arc<Source>) -> Result<String, Diagnostic> {
    let error = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(error) => error,
    };
    let at = error.utf8_error().valid_up_to();
    let bytes = error.as_bytes();
    let valid = String::from_utf8_lossy(&bytes[..at]);
    let line_start = valid.rfind('\n').map_or(0, |i| i + 1);
    let loc = Loc {
        source: Arc::clone(source),
        line: valid.matches('\n').count() + 1,
        column: valid[line_start..].chars().count() + 1,
    };
    Err(loc.error(
        format!(
            "invalid UTF-8: byte 0x{:02x} at byte offset {at} does not start a valid character",
            bytes[at]
        ),
        Some("save the file as UTF-8".into()),
    ))
}

/// Validates and deserializes one document's spec.
fn compile(doc: &Document, diagnostics: &mut Vec<Diagnostic>) -> Option<Typed> {
    let Some(spec) = &doc.spec else {
        diagnostics.push(doc.loc.error(
            format!("missing `spec` in {}", doc.label()),
            Some(format!("add `spec:` with the fields of the {}", doc.kind)),
        ));
        return None;
    };
    let json = validate_spec(doc, spec, diagnostics)?;
    match doc.kind {
        Kind::Runtime => deserialize(doc, json, diagnostics).map(|s| Typed::Runtime(Box::new(s))),
        Kind::Model => deserialize(doc, json, diagnostics).map(Typed::Model),
        Kind::Tool => deserialize(doc, json, diagnostics).map(Typed::Tool),
        Kind::Agent => deserialize(doc, json, diagnostics).map(|s| Typed::Agent(Box::new(s))),
        Kind::Policy => deserialize(doc, json, diagnostics).map(Typed::Policy),
        Kind::Hook => deserialize(doc, json, diagnostics).map(Typed::Hook),
        Kind::McpServer => deserialize(doc, json, diagnostics).map(Typed::McpServer),
        Kind::Memory => deserialize(doc, json, diagnostics).map(Typed::Memory),
        Kind::Workflow => deserialize(doc, json, diagnostics).map(|s| Typed::Workflow(Box::new(s))),
        Kind::Eval => deserialize(doc, json, diagnostics).map(|s| Typed::Eval(Box::new(s))),
        Kind::RemoteAgent => {
            let remote: crate::RemoteAgentSpec = deserialize(doc, json, diagnostics)?;
            match remote.to_agent() {
                Ok(agent) => Some(Typed::Agent(Box::new(agent))),
                Err(error) => {
                    diagnostics.push(doc.loc.error(format!("{}: {error}", doc.label()), None));
                    None
                }
            }
        }
    }
}

/// Serde rarely fails once the schema passed (e.g. a number too large for its field); serde
/// does not say where, so the diagnostic points at `spec:`.
fn deserialize<T: DeserializeOwned>(
    doc: &Document,
    json: Value,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<T> {
    match serde_json::from_value(json) {
        Ok(value) => Some(value),
        Err(e) => {
            diagnostics.push(
                doc.spec_loc
                    .error(format!("invalid spec of {}: {e}", doc.label()), None),
            );
            None
        }
    }
}

/// The compiled workspace and its explain table (Runtime, then Models, Tools, Agents,
/// Policies and Hooks, each by name).
fn build(
    root: PathBuf,
    env: BTreeMap<String, String>,
    docs: &Documents,
    typed: Vec<Option<Typed>>,
) -> Workspace {
    let mut runtime = None;
    let mut models = BTreeMap::new();
    let mut tools = BTreeMap::new();
    let mut agents = BTreeMap::new();
    let mut policies = BTreeMap::new();
    let mut hooks = Vec::new();
    let mut mcp_servers = BTreeMap::new();
    let mut memories = BTreeMap::new();
    let mut workflows = BTreeMap::new();
    let mut evals = BTreeMap::new();
    let mut explained: Vec<(Kind, &str, Option<&Node>, Value)> = Vec::new();
    for (doc, typed) in docs.list.iter().zip(typed) {
        let Some(typed) = typed else { continue };
        let value = match &typed {
            Typed::Runtime(spec) => serde_json::to_value(spec),
            Typed::Model(spec) => serde_json::to_value(spec),
            Typed::Tool(spec) => serde_json::to_value(spec),
            Typed::Agent(spec) => serde_json::to_value(spec),
            Typed::Policy(spec) => serde_json::to_value(spec),
            Typed::Hook(spec) => serde_json::to_value(spec),
            Typed::McpServer(spec) => serde_json::to_value(spec),
            Typed::Memory(spec) => serde_json::to_value(spec),
            Typed::Workflow(spec) => serde_json::to_value(spec),
            Typed::Eval(spec) => serde_json::to_value(spec),
        };
        if let Ok(value) = value {
            explained.push((doc.kind, &doc.name, doc.spec.as_ref(), value));
        }
        let name = doc.name.clone();
        match typed {
            Typed::Runtime(spec) => runtime = Some(*spec),
            Typed::Model(spec) => drop(models.insert(name, spec)),
            Typed::Tool(spec) => drop(tools.insert(name, spec)),
            Typed::Agent(mut spec) => {
                // An agent with subagents has the tool that delegates to them.
                if !spec.subagents.is_empty() && !spec.tools.iter().any(|t| t == TASK_TOOL) {
                    spec.tools.push(TASK_TOOL.to_owned());
                }
                // An agent with skills has the tools that use them.
                if !spec.skills.is_empty() {
                    for tool in SKILL_TOOLS {
                        if !spec.tools.iter().any(|t| t == tool) {
                            spec.tools.push(tool.to_owned());
                        }
                    }
                }
                drop(agents.insert(name, *spec))
            }
            Typed::Policy(spec) => drop(policies.insert(name, spec)),
            // Documents keep the order they were first seen in, so hooks run in declaration
            // order and an overlay changes a hook in place.
            Typed::Hook(spec) => hooks.push((name, spec)),
            Typed::McpServer(spec) => drop(mcp_servers.insert(name, spec)),
            Typed::Memory(spec) => drop(memories.insert(name, spec)),
            Typed::Workflow(spec) => drop(workflows.insert(name, *spec)),
            Typed::Eval(spec) => drop(evals.insert(name, *spec)),
        }
    }
    // Readers of a memory search it, writers submit to it.
    for memory in memories.values() {
        let memory: &crate::MemorySpec = memory;
        for (name, agent) in &mut agents {
            let agent: &mut AgentSpec = agent;
            let listed = |entries: &[String]| entries.iter().any(|e| glob_matches(e, name));
            for (tool, granted) in [
                (MEMORY_SEARCH_TOOL, listed(&memory.readers)),
                (REMEMBER_TOOL, listed(&memory.writers)),
            ] {
                if granted && !agent.tools.iter().any(|t| t == tool) {
                    agent.tools.push(tool.to_owned());
                }
            }
        }
    }
    let runtime = runtime.unwrap_or_else(|| {
        if let Ok(value) = serde_json::to_value(RuntimeSpec::default()) {
            explained.push((Kind::Runtime, "default", None, value));
        }
        RuntimeSpec::default()
    });
    explained.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut explain = Vec::new();
    for (kind, name, spec, value) in &explained {
        explain_document(*kind, name, *spec, value, &mut explain);
    }
    let skills = Arc::new(SkillLibrary::empty(&root));
    Workspace {
        root,
        runtime,
        models,
        tools,
        agents,
        policies,
        hooks,
        mcp_servers,
        memories,
        workflows,
        evals,
        skills,
        env,
        explain,
    }
}
