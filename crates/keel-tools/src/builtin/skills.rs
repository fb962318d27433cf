//! The tools of agents with skills (`docs/workspace.md#skills`):
//!
//! - `load_skill {name}` — a skill's instructions, within `skills.bodyChars` (progressive
//!   disclosure: the prompt carries only the catalogue); records `runtime.skill.injected`;
//! - `read_skill_resource {skill, path}` — a text file of the skill's folder, contained to it
//!   (no absolute path, no `..`, no symbolic link out of it) and at most
//!   `skills.maxResourceBytes`;
//! - `run_skill_script {skill, script, args}` — a file under the skill's `scripts/`, run in
//!   the skill's folder on the same process machinery as `shell` (own process group, cleaned
//!   environment, timeout, bounded output). It is not read-only, so policy asks a person by
//!   default.
//!
//! Each checks, before policy and before it runs, that the skill exists and that the calling
//! agent may use it (its `skills` names or globs), so the gateway blocks a wrong call with the
//! issue.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{
    EventPayload, Issue, SandboxRecord, SkillReason, Tool, ToolContext, ToolError, ToolOutput,
    ToolSpec,
};
use keel_workspace::Workspace;
use keel_workspace::skills::{
    Skill, SkillFileError, fit_body, read_skill_file, resolve_in_skill, skill_allowed, skill_body,
    skill_script,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{arg_issue, content_budget};
use crate::input;
use crate::process::{self, Caps, RunError};
use crate::sandbox::Sandboxes;

/// The three tools, for a workspace whose agents have skills.
pub fn skill_tools(workspace: &Arc<Workspace>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(LoadSkill::new(workspace.clone())),
        Arc::new(ReadSkillResource::new(workspace.clone())),
        Arc::new(RunSkillScript::new(workspace.clone())),
    ]
}

/// The skill a call names, if the calling agent may use it.
fn usable_skill(workspace: &Workspace, ctx: &ToolContext, name: &str) -> Result<Skill, String> {
    let set = workspace.skills.current();
    let allowed = workspace
        .agents
        .get(&ctx.agent)
        .map(|agent| agent.skills.as_slice())
        .unwrap_or_default();
    match set.get(name) {
        Some(skill) if skill_allowed(allowed, name) => Ok(skill.clone()),
        Some(_) => Err(format!(
            "agent `{}` may not use skill `{name}` (it is not in the agent's skills)",
            ctx.agent
        )),
        None => {
            let usable: Vec<&str> = set
                .skills
                .keys()
                .map(String::as_str)
                .filter(|n| skill_allowed(allowed, n))
                .collect();
            Err(format!(
                "there is no skill `{name}`; the skills you may use are: {}",
                match usable.is_empty() {
                    true => "none".to_owned(),
                    false => usable.join(", "),
                }
            ))
        }
    }
}

/// The issue of a call naming a skill it may not use.
fn skill_issue(workspace: &Workspace, ctx: &ToolContext, args: &Value, key: &str) -> Vec<Issue> {
    let Some(name) = args.get(key).and_then(Value::as_str) else {
        return Vec::new();
    };
    match usable_skill(workspace, ctx, name) {
        Ok(_) => Vec::new(),
        Err(message) => vec![arg_issue(
            key,
            crate::gateway::headline::EXPECTED_SKILL,
            name,
            message,
        )],
    }
}

fn file_error(error: SkillFileError) -> ToolError {
    match error {
        SkillFileError::Io { .. } => ToolError::Io(error.to_string()),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

/// `load_skill`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadSkillInput {
    /// The skill's name.
    #[schemars(length(min = 1))]
    name: String,
}

/// `read_skill_resource`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadSkillResourceInput {
    /// The skill's name.
    #[schemars(length(min = 1))]
    skill: String,
    /// A path inside the skill's folder, e.g. references/guide.md.
    #[schemars(length(min = 1))]
    path: String,
}

/// `run_skill_script`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunSkillScriptInput {
    /// The skill's name.
    #[schemars(length(min = 1))]
    skill: String,
    /// The script's path in the skill's folder, e.g. scripts/check.py.
    #[schemars(length(min = 1))]
    script: String,
    /// Arguments passed to the script.
    #[serde(default)]
    args: Vec<String>,
}

/// `load_skill`: a skill's instructions.
#[derive(Debug)]
pub struct LoadSkill {
    spec: ToolSpec,
    workspace: Arc<Workspace>,
}

impl LoadSkill {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Self {
            spec: ToolSpec {
                name: "load_skill".to_owned(),
                description: "Load the instructions of one of your skills (listed in the \
                              Skills part of your instructions) before doing a task it covers, \
                              then follow them."
                    .to_owned(),
                parameters: input::schema_of::<LoadSkillInput>(),
            },
            workspace,
        }
    }
}

#[async_trait]
impl Tool for LoadSkill {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        skill_issue(&self.workspace, ctx, args, "name")
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: LoadSkillInput = input::parse(args)?;
        let name = input.name.as_str();
        let skill = usable_skill(&self.workspace, ctx, name).map_err(ToolError::Failed)?;
        let budget = self.workspace.runtime.skills.body_chars as usize;
        let body = tokio::task::spawn_blocking(move || skill_body(&skill))
            .await
            .map_err(|e| ToolError::Failed(format!("reading the skill failed: {e}")))?
            .map_err(file_error)?;
        let (text, truncated) = fit_body(name, &body, budget);
        let mut output = ToolOutput::text(format!("# Skill: {name}\n\n{text}"));
        output.events.push(EventPayload::SkillInjected {
            skill: name.to_owned(),
            reason: SkillReason::Tool,
            chars: text.chars().count() as u64,
            truncated,
        });
        Ok(output)
    }
}

/// `read_skill_resource`: a text file under a skill's folder.
#[derive(Debug)]
pub struct ReadSkillResource {
    spec: ToolSpec,
    workspace: Arc<Workspace>,
}

impl ReadSkillResource {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        let cap = workspace.runtime.skills.max_resource_bytes;
        Self {
            spec: ToolSpec {
                name: "read_skill_resource".to_owned(),
                description: format!(
                    "Read a text file of one of your skills, e.g. a file its instructions point \
                     to under references/. `path` is relative to the skill's folder; files \
                     over {cap} bytes are refused."
                ),
                parameters: input::schema_of::<ReadSkillResourceInput>(),
            },
            workspace,
        }
    }
}

#[async_trait]
impl Tool for ReadSkillResource {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = skill_issue(&self.workspace, ctx, args, "skill");
        let skill = args.get("skill").and_then(Value::as_str);
        let path = args.get("path").and_then(Value::as_str);
        if let (true, Some(skill), Some(path)) = (issues.is_empty(), skill, path)
            && let Ok(skill) = usable_skill(&self.workspace, ctx, skill)
            && let Err(error) = resolve_in_skill(&skill, path)
            && !matches!(
                error,
                SkillFileError::NotFound(_) | SkillFileError::Io { .. }
            )
        {
            issues.push(arg_issue(
                "path",
                crate::gateway::headline::EXPECTED_SKILL_PATH,
                path,
                error.to_string(),
            ));
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: ReadSkillResourceInput = input::parse(args)?;
        let name = input.skill.as_str();
        let path = input.path;
        let skill = usable_skill(&self.workspace, ctx, name).map_err(ToolError::Failed)?;
        let cap = self.workspace.runtime.skills.max_resource_bytes;
        let text = tokio::task::spawn_blocking(move || read_skill_file(&skill, &path, cap))
            .await
            .map_err(|e| ToolError::Failed(format!("reading the file failed: {e}")))?
            .map_err(file_error)?;
        Ok(ToolOutput::text(text))
    }
}

/// `run_skill_script`: a script under a skill's `scripts/`, run in the skill's folder.
#[derive(Debug)]
pub struct RunSkillScript {
    spec: ToolSpec,
    workspace: Arc<Workspace>,
    timeout: Duration,
    sandboxes: Sandboxes,
}

impl RunSkillScript {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        let timeout = workspace.runtime.tools.shell.timeout.0;
        Self {
            spec: ToolSpec {
                name: "run_skill_script".to_owned(),
                description: format!(
                    "Run a script of one of your skills (a file under its scripts/ folder) \
                     with the skill's folder as working directory. Returns JSON `{{exit_code, \
                     stdout, stderr, truncated}}`. Killed after {}. A person may have to \
                     approve the call.",
                    humantime::format_duration(timeout)
                ),
                parameters: input::schema_of::<RunSkillScriptInput>(),
            },
            sandboxes: Sandboxes::of(&workspace),
            workspace,
            timeout,
        }
    }
}

/// How a script runs: directly when it is executable, otherwise with the interpreter its
/// extension names.
fn script_program(script: &Path) -> Result<(PathBuf, Vec<String>), String> {
    let executable = std::fs::metadata(script).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if executable {
        return Ok((script.to_path_buf(), Vec::new()));
    }
    let interpreter = match script.extension().and_then(|e| e.to_str()) {
        Some("py") => "python3",
        Some("sh") => "sh",
        Some("bash") => "bash",
        Some("js" | "mjs" | "cjs") => "node",
        _ => {
            return Err(format!(
                "`{}` is not executable and its extension names no interpreter (.py, .sh, \
                 .bash, .js)",
                script.display()
            ));
        }
    };
    Ok((
        PathBuf::from(interpreter),
        vec![script.display().to_string()],
    ))
}

#[async_trait]
impl Tool for RunSkillScript {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn sandbox(&self, ctx: &ToolContext) -> Option<SandboxRecord> {
        Some(self.sandboxes.profile(&ctx.agent, None)?.record())
    }

    fn check(&self, ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = skill_issue(&self.workspace, ctx, args, "skill");
        let skill = args.get("skill").and_then(Value::as_str);
        let script = args.get("script").and_then(Value::as_str);
        if let (true, Some(skill), Some(script)) = (issues.is_empty(), skill, script)
            && let Ok(skill) = usable_skill(&self.workspace, ctx, skill)
        {
            let problem = skill_script(&skill, script)
                .map_err(|e| e.to_string())
                .and_then(|path| script_program(&path).map(drop));
            if let Err(message) = problem {
                issues.push(arg_issue(
                    "script",
                    crate::gateway::headline::EXPECTED_SKILL_SCRIPT,
                    script,
                    message,
                ));
            }
        }
        issues
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: RunSkillScriptInput = input::parse(args)?;
        let name = input.skill.as_str();
        let skill = usable_skill(&self.workspace, ctx, name).map_err(ToolError::Failed)?;
        let path = skill_script(&skill, &input.script).map_err(file_error)?;
        let (program, mut argv) = script_program(&path).map_err(ToolError::InvalidArguments)?;
        argv.extend(input.args);
        let dir = skill
            .dir
            .canonicalize()
            .map_err(|e| ToolError::Io(format!("the skill's folder: {e}")))?;
        let keel_vars = [
            (
                "KEEL_WORKSPACE".to_owned(),
                ctx.workspace_root.display().to_string(),
            ),
            ("KEEL_REQUEST_ID".to_owned(), ctx.request_id.to_string()),
            ("KEEL_TOOL_NAME".to_owned(), self.spec.name.clone()),
            ("KEEL_SKILL".to_owned(), name.to_owned()),
            ("KEEL_SKILL_DIR".to_owned(), dir.display().to_string()),
        ];
        let env = process::child_env(std::env::vars_os(), &Default::default(), &keel_vars);
        let shown = program.display().to_string();
        let profile = self.sandboxes.profile(&ctx.agent, None);
        let prepared = process::prepare(
            profile.as_ref(),
            &program,
            &ctx.workspace_root,
            &ctx.request_id.to_string(),
            std::slice::from_ref(&dir),
        )?;
        let (started, args) = process::argv(prepared.as_ref(), &program, &argv);
        let mut command = process::command(&started, &args, &dir, env, false);
        let guard = prepared.map(|p| p.apply(&mut command));
        let child = command
            .spawn()
            .map_err(|e| process::spawn_error(&shown, &e))?;
        let budget = content_budget(ctx.max_output_bytes);
        let caps = Caps {
            stdout: budget,
            stderr: budget,
        };
        let ended = process::run_to_end(child, Vec::new(), caps, self.timeout).await;
        drop(guard);
        match ended {
            Ok(finished) => Ok(ToolOutput::json(&super::shell::process_result(
                finished,
                budget,
                "script",
                profile.as_ref(),
            ))),
            Err(RunError::Wait(e)) => Err(ToolError::Failed(format!(
                "waiting for the script failed: {e}"
            ))),
            Err(RunError::TimedOut) => Err(ToolError::Timeout(self.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model-facing contract of the skill tools, reviewed when it changes.
    #[test]
    fn skill_tool_input_schemas() {
        insta::assert_json_snapshot!("load_skill_input", input::schema_of::<LoadSkillInput>());
        insta::assert_json_snapshot!(
            "read_skill_resource_input",
            input::schema_of::<ReadSkillResourceInput>()
        );
        insta::assert_json_snapshot!(
            "run_skill_script_input",
            input::schema_of::<RunSkillScriptInput>()
        );
    }
}
