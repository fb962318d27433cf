//! Workspace loading (`docs/workspace.md`): reads `config/**/*.yaml` plus overlays, interpolates
//! the environment, validates every document and compiles the result into an immutable
//! [`Workspace`]. Every problem is reported at once as a located [`Diagnostic`].
//!
//! Start reading at [`Workspace::load_with`]; the pipeline is in `load.rs`, and each stage has
//! its own module: `yaml` (located YAML tree), `documents` (envelopes, identity, overlay
//! merge), `env` and `interpolate`, `validate` (JSON Schema → diagnostics), `checks`
//! (references between documents) and `explain`.

mod checks;
mod documents;
mod env;
pub mod eval;
mod explain;
pub mod identity;
mod interpolate;
mod load;
mod mcp;
pub mod memory;
pub mod skills;
pub mod spec;
mod suggest;
pub mod template;
mod validate;
pub mod workflow;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use mcp::{MCP_TOOL_PREFIX, READ_MCP_RESOURCE_TOOL, mcp_filter_allows, mcp_tool_name};
pub use spec::eval::{EvalCase, EvalSpec, EvalTarget, GraderKind, GraderSpec};
pub use spec::{
    AgentLimits, AgentSpec, ApiKeyRole, ApiKeySpec, ArtifactsKind, ArtifactsSpec,
    BuiltinToolSettings, CliEvents, CliSpec, ContractSpec, DEFAULT_STORE_URL, Duration,
    EmbeddingsSpec, FallbacksSpec, FileChangeSettings, GatewayMode, GatewayOverride, GatewaySpec,
    HookEvent, HookHandler, HookOnError, HookSpec, HttpFetchSettings, HttpMethod, Limits,
    McpServerSpec, McpToolFilter, McpTransport, MemorySpec, MirrorSpec, ModelLimitsSpec,
    ModelParamsSpec, ModelSpec, NarrationSpec, NarrationStyle, PermissionMode, PolicyDecision,
    PolicyRule, PolicySpec, ProgressSpec, ProviderKind, RecallSpec, RedactionSpec, RetryPolicy,
    RetrySpec, RuntimeSpec, ServerSpec, ShellSettings, StoreKind, StoreSpec, ToolHooks, ToolImpl,
    ToolSpecDoc, WritePolicy,
};
pub use spec::{
    BackendSpec, Bounds, ByteSize, CacheMode, CassetteMatch, CompactStep, Condition, ContextSpec,
    CostLimit, EdgeSpec, FacadeClamp, FacadeParam, FacadeSpec, FilesystemMode, GateKind, GateSpec,
    InputSpec, NamespacesMode, NetworkMode, NodeKind, NodeOutput, NodeRetry, NodeSpec,
    ObservabilitySpec, OnBudget, OnDeny, OnDivergence, OtlpProtocol, OtlpSpec, OutputSpec,
    PhaseSpec, Price, PricingSpec, ProcessBackend, RemoteAgentSpec, RemoteBackend, RemoteProtocol,
    SandboxFallback, SandboxLimits, SandboxSpec, ThinkingSpec, TokenizerSpec, WorkflowOutput,
    WorkflowSpec,
};
pub use suggest::closest;
pub use workflow::{WorkflowGraph, approval_output_schema, describe_condition, mermaid, schema_at};

/// A built-in tool: one an agent may list without declaring it. This enum is the one list of
/// them: validation reads the names from it, `keel-tools` builds a tool for each variant (an
/// exhaustive match, so a new variant cannot go unbuilt) and the policy engine reads
/// [`BuiltinTool::read_only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    ReadFile,
    ListDir,
    Grep,
    WriteFile,
    EditFile,
    Glob,
    Shell,
    HttpFetch,
    ExecStart,
    ExecWrite,
    ExecRead,
    ExecResize,
    ExecStop,
}

impl BuiltinTool {
    /// Every built-in tool, in the order they are listed and built.
    pub const ALL: [Self; 13] = [
        Self::ReadFile,
        Self::ListDir,
        Self::Grep,
        Self::WriteFile,
        Self::EditFile,
        Self::Glob,
        Self::Shell,
        Self::HttpFetch,
        Self::ExecStart,
        Self::ExecWrite,
        Self::ExecRead,
        Self::ExecResize,
        Self::ExecStop,
    ];

    /// The name agents list it by.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ReadFile => "read_file",
            Self::ListDir => "list_dir",
            Self::Grep => "grep",
            Self::WriteFile => "write_file",
            Self::EditFile => "edit_file",
            Self::Glob => "glob",
            Self::Shell => "shell",
            Self::HttpFetch => "http_fetch",
            Self::ExecStart => "exec_start",
            Self::ExecWrite => "exec_write",
            Self::ExecRead => "exec_read",
            Self::ExecResize => "exec_resize",
            Self::ExecStop => "exec_stop",
        }
    }

    /// Whether it never changes anything: such tools are allowed by default and in `plan`
    /// mode.
    pub const fn read_only(self) -> bool {
        matches!(
            self,
            Self::ReadFile | Self::ListDir | Self::Grep | Self::Glob | Self::ExecRead
        )
    }

    /// The built-in tool called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }
}

/// The tool an agent with `subagents` delegates with: `{agent, prompt}`, each call a child
/// run.
pub const TASK_TOOL: &str = "task";

/// Names of the built-in tools, in the order of [`BuiltinTool::ALL`].
pub const BUILTIN_TOOLS: &[&str] = &{
    let mut names = [""; BuiltinTool::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = BuiltinTool::ALL[i].name();
        i += 1;
    }
    names
};

/// Words that mark an environment variable as a secret (matched case-insensitively anywhere
/// in the name).
const SECRET_MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// Whether an environment variable's name suggests it holds a secret. Such values are kept
/// out of tool processes, redacted from events and hidden by `config explain`.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// A compiled, validated workspace. Immutable: reloading builds a new one.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace folder (absolute).
    pub root: PathBuf,
    /// The `Runtime` document, or defaults.
    pub runtime: RuntimeSpec,
    pub models: BTreeMap<String, ModelSpec>,
    pub tools: BTreeMap<String, ToolSpecDoc>,
    pub agents: BTreeMap<String, AgentSpec>,
    /// `Policy` documents by name.
    pub policies: BTreeMap<String, PolicySpec>,
    /// `Hook` documents with their names, in declaration order (files by path, then order
    /// within a file): the order hooks run in.
    pub hooks: Vec<(String, HookSpec)>,
    /// `McpServer` documents by name.
    pub mcp_servers: BTreeMap<String, McpServerSpec>,
    /// `Memory` documents by name.
    pub memories: BTreeMap<String, MemorySpec>,
    /// `Workflow` documents by name.
    pub workflows: BTreeMap<String, WorkflowSpec>,
    /// `Eval` documents by name, each with the cases of its `casesFile` after its own.
    pub evals: BTreeMap<String, EvalSpec>,
    /// Skills found in `resources/skills/` and the Runtime's `skills.roots`: the load's scan,
    /// scanned again when their files change ([`skills::SkillLibrary::refresh`]).
    pub skills: std::sync::Arc<skills::SkillLibrary>,
    /// The environment used for interpolation: `.env` overlaid by the process environment.
    pub env: BTreeMap<String, String>,
    explain: Vec<ExplainEntry>,
}

/// Where configuration comes from besides the workspace folder.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Overlay files or folders, merged after the workspace's own files, in order.
    pub overlays: Vec<PathBuf>,
    /// Environment variables (they win over `.env`).
    pub env: BTreeMap<String, String>,
    /// Tools the embedding program implements in code: agents may list them without a
    /// `Tool` document.
    pub provided_tools: BTreeSet<String>,
    /// Whether a workspace without an `Agent` document is an error (nothing could run). On in
    /// [`LoadOptions::from_process_env`], what the command line uses; off by default, so a
    /// program or a test may load a partial workspace.
    pub require_agent: bool,
}

impl LoadOptions {
    /// Options from the process: its environment, and overlays from `KEEL_CONFIG_PATHS`; an
    /// agent is required.
    pub fn from_process_env() -> Self {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let overlays = env
            .get("KEEL_CONFIG_PATHS")
            .map(|paths| {
                paths
                    .split(':')
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default();
        Self {
            overlays,
            env,
            provided_tools: BTreeSet::new(),
            require_agent: true,
        }
    }
}

/// One problem in a workspace, located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, relative to the workspace root when inside it.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Why a workspace could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The folder is missing or has no `config/` folder.
    #[error("{path} is not a Keel workspace: {reason}")]
    NotAWorkspace { path: PathBuf, reason: String },
    /// The workspace has problems; all of them are listed.
    #[error("{}", render_diagnostics(.0))]
    Invalid(Vec<Diagnostic>),
}

fn render_diagnostics(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        out.push_str(&d.to_string());
        out.push('\n');
    }
    let n = diagnostics.len();
    out.push_str(&format!(
        "{n} error{} in workspace",
        if n == 1 { "" } else { "s" }
    ));
    out
}

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A workspace file.
    File { file: PathBuf, line: usize },
    /// An overlay from `KEEL_CONFIG_PATHS`.
    Overlay { file: PathBuf, line: usize },
    /// Interpolated from an environment variable, in the given file.
    Env {
        var: String,
        file: PathBuf,
        line: usize,
    },
    /// Keel's built-in default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { file, line } => write!(f, "{}:{line}", file.display()),
            Self::Overlay { file, line } => write!(f, "overlay {}:{line}", file.display()),
            Self::Env { var, file, line } => write!(f, "env {var} ({}:{line})", file.display()),
            Self::Default => f.write_str("default"),
        }
    }
}

/// The effective value of one field and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainEntry {
    /// `Kind/name.spec.field.sub`, e.g. `Agent/assistant.spec.limits.maxSteps`.
    pub path: String,
    pub value: Value,
    pub origin: Origin,
}

impl Workspace {
    /// The gateway mode for a call of `tool` by `agent`: the tool's override, else the
    /// agent's, else the runtime's.
    pub fn gateway_mode(&self, agent: &str, tool: &str) -> GatewayMode {
        self.tools
            .get(tool)
            .and_then(|t| t.gateway.mode)
            .or_else(|| self.agents.get(agent).and_then(|a| a.gateway.mode))
            .unwrap_or(self.runtime.gateway.mode)
    }

    /// Loads the workspace at `root` with the process environment and `KEEL_CONFIG_PATHS`.
    pub fn load(root: &Path) -> Result<Self, LoadError> {
        Self::load_with(root, &LoadOptions::from_process_env())
    }

    /// Loads the workspace at `root`.
    ///
    /// Reads `config/**/*.yaml` (and `*.yml`) in path order, then every overlay in order;
    /// interpolates `${VAR}` from `.env` and `options.env`; validates every document and the
    /// references between them. All problems are returned together in
    /// [`LoadError::Invalid`], sorted by file, line and column.
    pub fn load_with(root: &Path, options: &LoadOptions) -> Result<Self, LoadError> {
        load::load(root, options)
    }

    /// Every effective field with its origin, in document order.
    pub fn explain(&self) -> &[ExplainEntry] {
        &self.explain
    }

    /// The agent used when a request names none: `Runtime.spec.defaultAgent`, else the only
    /// agent.
    pub fn default_agent(&self) -> Option<&str> {
        if let Some(name) = &self.runtime.default_agent {
            return Some(name);
        }
        if self.agents.len() == 1 {
            return self.agents.keys().next().map(String::as_str);
        }
        None
    }
}

/// Parses one YAML document into JSON with the same rules as workspace files (YAML 1.2 core
/// schema; quoted scalars are strings; anchors and aliases allowed). An empty text is `null`.
/// `file` is only used to name the file in the diagnostic.
pub fn parse_yaml_value(text: &str, file: &Path) -> Result<Value, Diagnostic> {
    let source = std::sync::Arc::new(yaml::Source {
        file: file.to_path_buf(),
        overlay: false,
    });
    let parsed = yaml::parse_documents(text, &source);
    if let Some(first) = parsed.errors.into_iter().min_by_key(|d| (d.line, d.column)) {
        return Err(first);
    }
    match parsed.documents.as_slice() {
        [] => Ok(Value::Null),
        [document] => Ok(document.to_json()),
        [_, second, ..] => Err(second.loc.error(
            format!(
                "expected one YAML document, found {}",
                parsed.documents.len()
            ),
            Some("remove the `---` separators".into()),
        )),
    }
}
