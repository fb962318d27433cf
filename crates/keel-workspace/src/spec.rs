//! The typed documents of a workspace (`docs/workspace.md`). Field names are camelCase in YAML;
//! unknown fields are errors. JSON Schemas generated from these types drive validation, so every
//! constraint that can be stated here is stated here.

use std::{collections::BTreeMap, fmt, time::Duration as StdDuration};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

mod backend;
mod context;
pub(crate) mod eval;
mod facade;
mod memory;
mod model;
mod money;
mod observability;
mod sandbox;
mod skill_settings;
mod store;
mod workflow;
pub use backend::{BackendSpec, OnDivergence, ProcessBackend};
pub use backend::{RemoteAgentSpec, RemoteBackend, RemoteProtocol};
pub use context::{CompactStep, ContextSpec};
pub use facade::{Bounds, FacadeClamp, FacadeParam, FacadeSpec};
pub use memory::{EmbeddingsSpec, ExtractionSpec, MemorySpec, RecallSpec, WritePolicy};
pub use model::{
    CacheMode, CassetteMatch, FallbacksSpec, ModelLimitsSpec, ModelParamsSpec, ModelSpec,
    ProviderKind, ThinkingSpec, TokenizerSpec,
};
pub use money::{CostLimit, Price, PricingSpec};
pub use observability::{ObservabilitySpec, OtlpProtocol, OtlpSpec};
pub use sandbox::{
    ByteSize, FilesystemMode, NamespacesMode, NetworkMode, SandboxFallback, SandboxLimits,
    SandboxSpec,
};
pub use skill_settings::{SkillRootSpec, SkillsSettings};
pub use store::{
    ArtifactsKind, ArtifactsSpec, DEFAULT_STORE_URL, MirrorSpec, StoreKind, StoreSpec,
    is_postgres_url,
};
pub use workflow::{
    Condition, EdgeSpec, GateKind, GateSpec, InputSpec, NodeKind, NodeOutput, NodeRetry, NodeSpec,
    OnDeny, OutputSpec, PhaseSpec, WorkflowOutput, WorkflowSpec,
};

/// The governance vocabulary the documents use, from `keel-types` (shared with the events).
pub use keel_types::{HookEvent, PermissionMode, PolicyDecision};

/// A duration written like `500ms`, `10s`, `10m` or `1h 30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub StdDuration);

impl Duration {
    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(StdDuration::from_secs(secs))
    }

    /// A duration of `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Self(StdDuration::from_millis(ms))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map(Duration)
            .map_err(|e| serde::de::Error::custom(format!("invalid duration `{text}`: {e}")))
    }
}

/// What a [`Duration`] looks like: whole numbers (of at most 10 digits, so no sum overflows),
/// each with one of humantime's unit names.
const DURATION_PATTERN: &str = "^ *[0-9]{1,10} *(?:nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y)(?: *[0-9]{1,10} *(?:nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|years|year|yrs|yr|y))* *$";

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": "a duration such as 500ms, 10s, 10m or 1h 30m"
        })
    }
}

/// `kind: Runtime` — process-wide settings (at most one document).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RuntimeSpec {
    /// The agent used when a request names none.
    pub default_agent: Option<String>,
    pub store: StoreSpec,
    pub server: ServerSpec,
    pub limits: Limits,
    /// Keeping prompts within the models' context windows (agents may set their own).
    pub context: ContextSpec,
    pub retry: RetrySpec,
    pub progress: ProgressSpec,
    pub cli: CliSpec,
    /// How the tool gateway treats invalid calls (agents and tools may override the mode).
    pub gateway: GatewaySpec,
    /// Settings of the built-in tools.
    pub tools: BuiltinToolSettings,
    /// What is kept out of the run log besides secrets from the environment.
    pub redaction: RedactionSpec,
    /// Where skills come from besides `resources/skills/`.
    pub skills: SkillsSettings,
    /// The OS sandbox of every process Keel starts; agents, tools, MCP servers and hooks may
    /// override it field by field (`docs/sandbox.md`). Left out: no sandbox.
    pub sandbox: SandboxSpec,
    /// OpenTelemetry spans and metrics of runs, and their OTLP export (`docs/observability.md`).
    pub observability: ObservabilitySpec,
}

/// Redaction settings (`docs/workspace.md#runtime`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedactionSpec {
    /// Regexes whose matches are replaced by `[REDACTED]` in every event before it is stored,
    /// e.g. `sk-[A-Za-z0-9]{20,}`.
    pub patterns: Vec<String>,
}

/// The gateway's handling of invalid tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewaySpec {
    pub mode: GatewayMode,
    /// A `Model` asked to fix a call that deterministic repairs could not (none: no model).
    pub repair_model: Option<String>,
}

/// What the gateway does with a call that fails its schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GatewayMode {
    /// Try deterministic repairs (then the repair model), re-validate, block what is left.
    #[default]
    Repair,
    /// Block invalid calls without repairing them.
    Validate,
    /// Pass arguments through unchecked (only for tools that validate themselves).
    Off,
}

/// Per-level override of the gateway mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewayOverride {
    pub mode: Option<GatewayMode>,
}

/// Settings of the built-in tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BuiltinToolSettings {
    pub shell: ShellSettings,
    pub http_fetch: HttpFetchSettings,
    pub write_file: FileChangeSettings,
    pub edit_file: FileChangeSettings,
}

/// The `write_file` and `edit_file` tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FileChangeSettings {
    /// Refuse to change an existing file the run has not read (or written) first.
    pub require_read: bool,
}

impl Default for FileChangeSettings {
    fn default() -> Self {
        Self { require_read: true }
    }
}

/// The `shell` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ShellSettings {
    /// Default and maximum time a command may run.
    pub timeout: Duration,
    pub max_timeout: Duration,
}

impl Default for ShellSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
        }
    }
}

/// The `http_fetch` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HttpFetchSettings {
    /// URL patterns that may be fetched (`*` matches any run of characters), e.g.
    /// `https://api.example.com/*`. Empty: nothing may be fetched.
    pub allow: Vec<String>,
    pub timeout: Duration,
    /// Largest response body read.
    pub max_bytes: u64,
}

impl Default for HttpFetchSettings {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            timeout: Duration::from_secs(30),
            max_bytes: 1024 * 1024,
        }
    }
}

/// `keel serve` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerSpec {
    pub listen: String,
    pub api_keys: Vec<ApiKeySpec>,
    /// Requests that may wait for a run slot (beyond `limits.maxConcurrentRuns`) before new
    /// ones are refused with 429 and `Retry-After`.
    pub max_queued_requests: u32,
    /// The longest a request made over HTTP may run; it tightens `limits.runTimeout`.
    pub request_timeout: Duration,
    /// The largest request body accepted, in bytes; larger bodies get 413.
    #[schemars(range(min = 1024))]
    pub max_body_bytes: u64,
    /// On shutdown, how long runs in flight may take to finish before they are interrupted.
    pub shutdown_grace: Duration,
    /// How long a connection may take to send a request's headers, counted from when it
    /// opened or its previous answer went out (so also how long a kept-alive connection may
    /// sit idle); then it is closed.
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive once its headers have; then it fails.
    pub body_read_timeout: Duration,
    /// Open connections the server holds at once; more are closed as they arrive.
    #[schemars(range(min = 1))]
    pub max_connections: u32,
    /// Open connections one client address may hold at once; more are closed as they arrive.
    #[schemars(range(min = 1))]
    pub max_connections_per_client: u32,
    /// Reload the workspace when its configuration files change (checked every second);
    /// SIGHUP and `POST /api/workspace/reload` reload it in any case.
    pub watch: bool,
}

impl Default for ServerSpec {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8642".into(),
            api_keys: Vec::new(),
            max_queued_requests: 1024,
            request_timeout: Duration::from_secs(600),
            max_body_bytes: 1024 * 1024,
            shutdown_grace: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connections_per_client: 64,
            watch: false,
        }
    }
}

/// An API key read from an environment variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeySpec {
    pub env: String,
    pub role: ApiKeyRole,
    /// Who the key belongs to: the owner recorded on the requests it makes; by default the
    /// variable's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Request metadata fixed for this key (e.g. `user: alice`): added to every request made
    /// with it; a request that sends a different value for one of these keys is refused.
    /// `user` here binds the key to one end user (memory namespaces, session owners).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metadata: std::collections::BTreeMap<String, String>,
    /// The most the key's runs may spend per UTC day, at the models' `pricing` (`5`, USD, or
    /// `"5 EUR"`): once spent, requests made with it are refused (429) until the day ends.
    /// The spend is read from the store, so it holds across replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<CostLimit>,
}

impl ApiKeySpec {
    /// The key's principal name.
    pub fn principal(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.env)
    }
}

/// What an API key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApiKeyRole {
    Client,
    Operator,
}

/// Budgets and bounds (agents may set `maxSteps`, `maxTokens` and `runTimeout` themselves).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Limits {
    #[schemars(range(min = 1))]
    pub max_concurrent_runs: u32,
    /// Model rounds per run.
    #[schemars(range(min = 1))]
    pub max_steps: u32,
    /// Tokens (prompt and completion, as the provider reports them) a run may use; none: no
    /// budget.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Money a run may spend at its models' `pricing` (`2.50`, USD, or `"2.50 EUR"`); none:
    /// no budget.
    pub max_cost: Option<CostLimit>,
    /// Money all the runs of one session may spend together; none: no budget.
    pub max_session_cost: Option<CostLimit>,
    /// What a run that has spent its own budget (`maxTokens`, `maxCost`) does: `end`
    /// (default, `budget_exceeded` or `token_budget`) or `ask` a human, like a tool approval,
    /// whether to go on with as much again.
    pub on_budget: OnBudget,
    pub run_timeout: Duration,
    #[schemars(range(min = 1))]
    pub max_tool_output_bytes: u64,
    /// Tool calls of one model answer that may run at once.
    #[schemars(range(min = 1))]
    pub max_parallel_tools: u32,
    /// Session history sent with each request, in (estimated) tokens; older turns are
    /// dropped first, never separating a tool call from its result.
    pub history_tokens: u64,
    /// How long a call waits for a human decision before it is denied.
    pub approval_timeout: Duration,
    /// How deep subagents and nested workflows may go: a run started by a run started by
    /// the request has depth 2.
    #[schemars(range(min = 1, max = 16))]
    pub max_depth: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_runs: 64,
            max_steps: 32,
            max_tokens: None,
            max_cost: None,
            max_session_cost: None,
            on_budget: OnBudget::End,
            run_timeout: Duration::from_secs(600),
            max_tool_output_bytes: 65536,
            max_parallel_tools: 8,
            history_tokens: 8000,
            approval_timeout: Duration::from_secs(600),
            max_depth: 3,
        }
    }
}

/// Retry policies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetrySpec {
    pub model: RetryPolicy,
}

/// Jittered exponential backoff for retryable failures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    #[schemars(range(min = 1))]
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

/// Progress views for people.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProgressSpec {
    pub narration: NarrationSpec,
}

/// The narrator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NarrationSpec {
    pub enabled: bool,
    pub style: NarrationStyle,
}

impl Default for NarrationSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            style: NarrationStyle::Concise,
        }
    }
}

/// How much the narrator says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NarrationStyle {
    /// One line per model round and tool call.
    Concise,
    /// Also retries, guard decisions and usage.
    Verbose,
}

/// Defaults for the `keel` command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CliSpec {
    pub events: CliEvents,
}

/// Which events `keel run` shows on stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CliEvents {
    /// Glob patterns over event type names.
    pub include: Vec<String>,
}

impl Default for CliEvents {
    fn default() -> Self {
        Self {
            include: vec!["runtime.progress.narration".into()],
        }
    }
}

/// `kind: Tool` — a tool implemented outside Keel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpecDoc {
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments.
    #[serde(default = "empty_object_schema")]
    #[schemars(with = "BTreeMap<String, Value>")]
    pub schema: Value,
    #[serde(rename = "impl")]
    pub implementation: ToolImpl,
    /// Default decision for calls of this tool (enforced by the governance layer).
    #[serde(default)]
    pub policy: Option<PolicyDecision>,
    /// Safe to run twice with the same arguments (used when resuming runs).
    #[serde(default)]
    pub idempotent: bool,
    /// Overrides the gateway mode for calls of this tool.
    #[serde(default)]
    pub gateway: GatewayOverride,
    /// Hooks bound to this tool: names of `Hook` documents run before and after each call.
    #[serde(default)]
    pub hooks: ToolHooks,
    /// A task of this tool runs its `PreToolUse` hooks again when it runs, not only when created.
    #[serde(default)]
    pub double_check_on_run: bool,
    /// `command` tools: the OS sandbox of the process, over the agent's and the Runtime's.
    #[serde(default)]
    pub sandbox: Option<SandboxSpec>,
}

/// Hooks bound on a tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolHooks {
    /// Run before the call (as `PreToolUse`), in order.
    pub pre_call: Vec<String>,
    /// Run after the call (as `PostToolUse`), in order.
    pub post_call: Vec<String>,
}

/// `kind: Policy` — rules deciding whether tool calls run, need a human, or are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// Agents the policy applies to (empty: all).
    #[serde(default)]
    pub agents: Vec<String>,
    /// The permission mode of runs under this policy (default `default`).
    #[serde(default)]
    pub mode: Option<PermissionMode>,
    /// Rules; the strictest matching rule wins (deny > ask > allow).
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// One policy rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    /// Glob over tool names (`*` any run of characters), e.g. `shell`, `mcp__*`.
    pub tool: String,
    /// Glob patterns over argument values, by top-level argument name (a value that is not a
    /// string is matched as its JSON text), e.g. `{ command: "git status*" }`. All must match.
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    pub decision: PolicyDecision,
    /// Said to the model (deny) or to the approver (ask).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `kind: Hook` — a script or endpoint run at a point of a run (`docs/workspace.md#hook`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookSpec {
    pub event: HookEvent,
    /// Regex over tool names (tool events only); none matches every tool.
    #[serde(default)]
    pub matcher: Option<String>,
    pub handler: HookHandler,
    #[serde(default)]
    pub on_error: HookOnError,
    /// A disabled hook is kept in the workspace (validated, still bindable) but never run
    /// (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `command` hooks: the OS sandbox of the process, over the Runtime's.
    #[serde(default)]
    pub sandbox: Option<SandboxSpec>,
}

/// How a hook runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum HookHandler {
    /// A process: the hook input as JSON on stdin, the answer as JSON on stdout; exit 2
    /// blocks with stderr as the reason (the Claude Code hook protocol).
    Command {
        command: Vec<String>,
        #[serde(default)]
        timeout: Option<Duration>,
    },
    /// An HTTP endpoint: the hook input POSTed as JSON, the answer as the JSON body.
    Http {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        timeout: Option<Duration>,
    },
}

/// What a failing hook does, in the governance vocabulary (the events say it the same way).
pub use keel_types::HookOnError;

fn empty_object_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

/// How a declared tool runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ToolImpl {
    /// A process: JSON arguments on stdin, JSON or text result on stdout, non-zero exit fails.
    Command {
        /// argv; the first element is the program. Relative paths resolve from the workspace.
        command: Vec<String>,
        #[serde(default)]
        timeout: Option<Duration>,
        /// Extra environment variables for the process.
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// An HTTP API call: the URL template's `{name}` placeholders are filled from the
    /// arguments (URL-encoded); for methods with a body, the other arguments are sent as JSON.
    Http {
        #[serde(default = "default_method")]
        method: HttpMethod,
        url: String,
        /// Header values; `${VAR}` interpolation reads secrets from the environment.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        timeout: Option<Duration>,
    },
}

fn default_method() -> HttpMethod {
    HttpMethod::Get
}

/// An HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

/// `kind: McpServer` — an MCP server whose tools agents may call (`docs/workspace.md#mcpserver`).
/// Each tool becomes `mcp__<prefix>__<tool>` in the inventory, governed like any other tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerSpec {
    pub transport: McpTransport,
    /// stdio: argv of the server process; the first element is the program (a relative path
    /// with a `/` resolves from the workspace, a bare name from `PATH`).
    #[serde(default)]
    pub command: Vec<String>,
    /// stdio: environment variables set for the process (values may use `${VAR}`). The process
    /// inherits nothing else but the names in `envAllow` and a minimal base (`PATH`, `HOME`,
    /// `LANG`, `TMPDIR`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: names of Keel's environment variables passed through unchanged.
    #[serde(default)]
    pub env_allow: Vec<String>,
    /// stdio: working directory, relative to the workspace and inside it (default: the
    /// workspace root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// http: the streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    #[serde(default)]
    pub url: Option<String>,
    /// http: request headers (values may use `${VAR}`, e.g. `Bearer ${TOKEN}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long connecting and the initialize handshake may take (default 30s).
    #[serde(default)]
    pub startup_timeout: Option<Duration>,
    /// How long one tool call may take (default 60s).
    #[serde(default)]
    pub call_timeout: Option<Duration>,
    /// A disabled server is not started and offers no tools (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Which of the server's tools are offered, by the server's own tool names.
    #[serde(default)]
    pub tools: McpToolFilter,
    /// The `<prefix>` in `mcp__<prefix>__<tool>` (default: the document's name). Lowercase
    /// letters, digits, `-` and `_`, starting with a letter or digit, at most 48 characters, no
    /// `__` and no trailing `_`; unique among the servers.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Largest resource `read_mcp_resource` returns, in bytes (default 1 MiB).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_resource_bytes: Option<u64>,
    /// stdio: the OS sandbox of the server process, over the Runtime's.
    #[serde(default)]
    pub sandbox: Option<SandboxSpec>,
}

fn yes() -> bool {
    true
}

/// How Keel reaches an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// Globs (`*`, `?`) over a server's tool names: a tool is offered when it matches an
/// `include` pattern (none: every tool) and no `exclude` pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct McpToolFilter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl McpServerSpec {
    /// Default for [`Self::startup_timeout`].
    pub const DEFAULT_STARTUP_TIMEOUT: StdDuration = StdDuration::from_secs(30);
    /// Default for [`Self::call_timeout`].
    pub const DEFAULT_CALL_TIMEOUT: StdDuration = StdDuration::from_secs(60);
    /// Default for [`Self::max_resource_bytes`].
    pub const DEFAULT_MAX_RESOURCE_BYTES: u64 = 1 << 20;
}

/// `kind: Agent` — a named assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSpec {
    /// Name of a `Model` document.
    pub model: String,
    #[serde(default)]
    pub instructions: String,
    /// Tool names: built-ins (`read_file`, `list_dir`, `grep`, `write_file`, `edit_file`,
    /// `glob`, `shell`, `http_fetch`), `Tool` documents, tools the embedding program provides,
    /// and MCP tools as `mcp__<prefix>__<tool>` of a declared `McpServer`, where `<tool>` may be
    /// a glob (`*`, `?`: a server's tools are only known at run time), e.g. `mcp__files__*`.
    /// `read_mcp_resource` may be listed when the workspace declares an `McpServer`. Globs
    /// select MCP tools only.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Skills the agent may use, by name or glob (`ops-*`): offered in its prompt, injected
    /// when mentioned as `$name`.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Skills whose instructions are always in the agent's prompt (each also in `skills`).
    #[serde(default)]
    pub always_on_skills: Vec<String>,
    #[serde(default)]
    pub limits: AgentLimits,
    /// Replaces the runtime's `context` for this agent.
    #[serde(default)]
    pub context: Option<ContextSpec>,
    #[serde(default)]
    pub contract: ContractSpec,
    /// Overrides the runtime's gateway mode for this agent's calls.
    #[serde(default)]
    pub gateway: GatewayOverride,
    /// The structured output its final answer must be (`{schema, maxRetries}`).
    #[serde(default)]
    pub output: Option<OutputSpec>,
    /// Agents it may delegate to with the `task` tool (each call a child run).
    #[serde(default)]
    pub subagents: Vec<String>,
    /// What clients of the OpenAI facade may set for its runs (`allow`) and within which
    /// bounds (`clamp`).
    #[serde(default)]
    pub facade: FacadeSpec,
    /// What runs its loop: Keel's (`{kind: native}`, the default) or a program of its own
    /// (`{kind: process, command, cwd, env, envAllow, timeout, config, onDivergence}`).
    #[serde(default)]
    pub backend: BackendSpec,
    /// The OS sandbox of the processes its calls start, over the Runtime's.
    #[serde(default)]
    pub sandbox: Option<SandboxSpec>,
}

/// What a run that has spent its budget does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnBudget {
    /// It ends.
    #[default]
    End,
    /// A human decides whether it goes on with as much again (an approval of the pseudo-tool
    /// `keel.budget`).
    Ask,
}

/// Per-agent budgets; unset values come from the runtime's limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AgentLimits {
    #[schemars(range(min = 1))]
    pub max_steps: Option<u32>,
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    pub max_cost: Option<CostLimit>,
    pub run_timeout: Option<Duration>,
}

/// The execution contract: evidence a run must contain to count as completed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ContractSpec {
    /// Tools that must have been called successfully at least once: names, not globs; an MCP
    /// tool counts as listed when an `mcp__<prefix>__…` glob in `tools` selects it.
    pub required_tools: Vec<String>,
}
