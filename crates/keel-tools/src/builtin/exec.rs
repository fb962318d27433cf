//! The exec session tools: `exec_start {command, cwd?, env?, rows?, cols?, waitMs?}` starts a
//! program on a pseudo-terminal (in the calling agent's sandbox, like `shell`) and returns its
//! session id with its first output; `exec_write {id, input, waitMs?}` types into it and
//! returns what it answered; `exec_read {id, waitMs?}` returns what it wrote since;
//! `exec_resize {id, rows, cols}`; `exec_stop {id}` kills it and everything on its terminal.
//! Each result is `{id, output, ended, exit_code?}`. The sessions themselves: [`crate::exec`].

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{Issue, SandboxRecord, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path_issues;
use super::shell::{CommandArg, argv, call_env};
use crate::exec::{self, Collected, MAX_PER_RUN, Session, pty};
use crate::input;
use crate::paths::{self, Access};
use crate::process;
use crate::sandbox::Sandboxes;

/// How long a call waits for output by default, and at most.
const DEFAULT_WAIT: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The quiet that ends a read once output has begun.
const QUIET: Duration = Duration::from_millis(150);

/// `exec_start`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StartInput {
    /// A command line (run with `sh -c`), or argv as an array of strings.
    command: CommandArg,
    /// Working directory relative to the workspace root (default: the root).
    #[serde(default)]
    cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    /// Terminal rows (default 24).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    rows: Option<u16>,
    /// Terminal columns (default 80).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    cols: Option<u16>,
    /// Milliseconds to wait for the first output (default 500, at most 30000).
    #[serde(default)]
    wait_ms: Option<u64>,
}

/// `exec_write`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WriteInput {
    /// The session id `exec_start` returned.
    id: String,
    /// What to type; end a line with `\n`.
    input: String,
    /// Milliseconds to wait for the answer (default 500, at most 30000).
    #[serde(default)]
    wait_ms: Option<u64>,
}

/// `exec_read`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReadInput {
    /// The session id `exec_start` returned.
    id: String,
    /// Milliseconds to wait for output (default 500, at most 30000).
    #[serde(default)]
    wait_ms: Option<u64>,
}

/// `exec_resize`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResizeInput {
    /// The session id `exec_start` returned.
    id: String,
    #[schemars(range(min = 1, max = 1000))]
    rows: u16,
    #[schemars(range(min = 1, max = 1000))]
    cols: u16,
}

/// `exec_stop`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StopInput {
    /// The session id `exec_start` returned.
    id: String,
}

/// Which exec tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecKind {
    Start,
    Write,
    Read,
    Resize,
    Stop,
}

/// One of the exec session tools.
#[derive(Debug)]
pub struct Exec {
    kind: ExecKind,
    spec: ToolSpec,
    sandboxes: Sandboxes,
}

impl Exec {
    pub fn new(kind: ExecKind) -> Self {
        let (name, description, parameters) = match kind {
            ExecKind::Start => (
                "exec_start",
                "Start an interactive program (a REPL, a program that asks questions) on a \
                 terminal in the workspace. A string runs with `sh -c`, an array as argv. \
                 Returns JSON `{id, output, ended, exit_code}` with its first output; talk to it \
                 with exec_write and exec_read, end it with exec_stop. At most 4 sessions at \
                 once; idle sessions end after 10 minutes, all end with the run.",
                input::schema_of::<StartInput>(),
            ),
            ExecKind::Write => (
                "exec_write",
                "Type `input` into an exec session (end a line with \\n) and return what the \
                 program answered: JSON `{id, output, ended, exit_code}`.",
                input::schema_of::<WriteInput>(),
            ),
            ExecKind::Read => (
                "exec_read",
                "Return what an exec session's program wrote since the last read, waiting up \
                 to `waitMs` for something: JSON `{id, output, ended, exit_code}`.",
                input::schema_of::<ReadInput>(),
            ),
            ExecKind::Resize => (
                "exec_resize",
                "Resize an exec session's terminal.",
                input::schema_of::<ResizeInput>(),
            ),
            ExecKind::Stop => (
                "exec_stop",
                "End an exec session: its program and everything it started are killed. \
                 Returns its last output and exit code.",
                input::schema_of::<StopInput>(),
            ),
        };
        Self {
            kind,
            spec: ToolSpec {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters,
            },
            sandboxes: Sandboxes::default(),
        }
    }

    /// The tool, its programs started in the workspace's sandbox profiles.
    pub fn with_sandboxes(self, sandboxes: Sandboxes) -> Self {
        Self { sandboxes, ..self }
    }

    async fn start(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: StartInput = input::parse(args)?;
        let run = ctx.request_id.to_string();
        if exec::open_in(&run) >= MAX_PER_RUN {
            return Err(ToolError::Failed(format!(
                "this run already has {MAX_PER_RUN} exec sessions open: stop one first"
            )));
        }
        let (program, rest) = argv(&input.command).map_err(ToolError::InvalidArguments)?;
        let env = call_env(input.env.unwrap_or_default())?;
        let root = paths::canonical_root(&ctx.workspace_root)?;
        let requested = input.cwd.as_deref().unwrap_or(".");
        let cwd = paths::resolve(&root, requested, Access::Read)?;
        if !cwd.is_dir() {
            return Err(ToolError::Io(format!(
                "`cwd` `{requested}` is not a directory"
            )));
        }
        let keel_vars = [
            ("KEEL_WORKSPACE".to_owned(), root.display().to_string()),
            ("KEEL_REQUEST_ID".to_owned(), run.clone()),
            ("TERM".to_owned(), "xterm-256color".to_owned()),
        ];
        let child_env = process::child_env(std::env::vars_os(), &env, &keel_vars);
        let terminal = pty::open(input.rows.unwrap_or(24), input.cols.unwrap_or(80))
            .map_err(|e| ToolError::Failed(format!("cannot open a terminal: {e}")))?;
        let stdio = || {
            terminal
                .terminal
                .try_clone()
                .map(Stdio::from)
                .map_err(|e| ToolError::Failed(format!("cannot open a terminal: {e}")))
        };
        let profile = self.sandboxes.profile(&ctx.agent, None);
        let prepared = process::prepare(profile.as_ref(), Path::new(&program), &root, &run, &[])?;
        let (started, args) = process::argv(prepared.as_ref(), &program, &rest);
        let mut command = tokio::process::Command::new(&started);
        command
            .args(&args)
            .current_dir(&cwd)
            .env_clear()
            .envs(child_env)
            .stdin(stdio()?)
            .stdout(stdio()?)
            .stderr(stdio()?)
            .kill_on_drop(true);
        pty::lead_session(&mut command);
        let guard = prepared.map(|p| p.apply(&mut command));
        let child = command
            .spawn()
            .map_err(|e| process::spawn_error(&program, &e))?;
        drop(command);
        drop(terminal.terminal);
        let shown = match &input.command {
            CommandArg::Line(line) => line.clone(),
            CommandArg::Argv(words) => words.join(" "),
        };
        let session = Session::register(&run, shown, child, terminal.master, guard)
            .map_err(|e| ToolError::Failed(format!("cannot read the terminal: {e}")))?;
        tracing::debug!(session = %session.id, command = %session.command, "Exec session started.");
        let collected = session.collect(wait(input.wait_ms), QUIET).await;
        Ok(result(&session.id, collected))
    }
}

fn wait(ms: Option<u64>) -> Duration {
    ms.map_or(DEFAULT_WAIT, Duration::from_millis).min(MAX_WAIT)
}

fn result(id: &str, collected: Collected) -> ToolOutput {
    let mut value = json!({
        "id": id,
        "output": collected.text,
        "ended": collected.ended,
    });
    if let Some(code) = collected.exit_code {
        value["exit_code"] = json!(code);
    }
    ToolOutput::json(&value)
}

fn failed(e: std::io::Error) -> ToolError {
    ToolError::Failed(format!("the exec session's terminal: {e}"))
}

#[async_trait]
impl Tool for Exec {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        self.kind == ExecKind::Read
    }

    fn sandbox(&self, ctx: &ToolContext) -> Option<SandboxRecord> {
        match self.kind {
            ExecKind::Start => Some(self.sandboxes.profile(&ctx.agent, None)?.record()),
            _ => None,
        }
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        match self.kind {
            ExecKind::Start => path_issues(ctx, args, "cwd", Some("."), Access::Read),
            _ => Vec::new(),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let run = ctx.request_id.to_string();
        match self.kind {
            ExecKind::Start => self.start(ctx, args).await,
            ExecKind::Write => {
                let input: WriteInput = input::parse(args)?;
                let session = exec::find(&run, &input.id).map_err(ToolError::Failed)?;
                session.write(input.input.as_bytes()).map_err(failed)?;
                let collected = session.collect(wait(input.wait_ms), QUIET).await;
                Ok(result(&session.id, collected))
            }
            ExecKind::Read => {
                let input: ReadInput = input::parse(args)?;
                let session = exec::find(&run, &input.id).map_err(ToolError::Failed)?;
                let collected = session.collect(wait(input.wait_ms), QUIET).await;
                Ok(result(&session.id, collected))
            }
            ExecKind::Resize => {
                let input: ResizeInput = input::parse(args)?;
                let session = exec::find(&run, &input.id).map_err(ToolError::Failed)?;
                session.resize(input.rows, input.cols).map_err(failed)?;
                Ok(ToolOutput::json(
                    &json!({"id": session.id, "rows": input.rows, "cols": input.cols}),
                ))
            }
            ExecKind::Stop => {
                let input: StopInput = input::parse(args)?;
                let session = exec::find(&run, &input.id).map_err(ToolError::Failed)?;
                let last = session.collect(Duration::ZERO, Duration::ZERO).await;
                let exit_code = session.stop().await;
                Ok(result(
                    &session.id,
                    Collected {
                        text: last.text,
                        ended: true,
                        exit_code,
                    },
                ))
            }
        }
    }
}
