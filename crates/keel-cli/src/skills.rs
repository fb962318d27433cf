//! `keel skills list|show|validate`: the workspace's skills as Keel scans them, and a check of
//! skill folders (the workspace's, or any given) that reports every problem at its
//! file:line:column.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use keel::{Runtime, Workspace};
use keel_types::CandidateStatus;
use keel_workspace::skills::{
    SkillRoot, name_problem, scan_skills, skill_body, skill_files, skill_matcher,
};
use keel_workspace::{Diagnostic, LoadError};
use serde_json::json;

use crate::error::CliError;
use crate::out;

#[derive(Debug, Subcommand)]
pub(crate) enum SkillsCommand {
    /// The workspace's skills: name, description, file.
    List {
        /// Only the skills this agent may use (its always-on ones marked).
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// A skill's front matter, the files of its folder and its instructions.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Check skill folders and report every problem (exit 2 when there is one). Without
    /// paths: the workspace's skills and the agents' use of them. A path is a skill folder
    /// (with a SKILL.md) or a folder of skill folders.
    Validate { paths: Vec<PathBuf> },
    /// Skills agents proposed (`propose_skill`), newest first.
    Candidates {
        /// pending (default), approved, rejected or all.
        #[arg(long, default_value = "pending")]
        status: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve a candidate: write it under resources/skills/ (offered from the next run).
    Approve {
        id: String,
        /// Who decides (default `$USER@cli`).
        #[arg(long)]
        by: Option<String>,
    },
    /// Reject a candidate; nothing is written.
    Reject {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        /// Who decides (default `$USER@cli`).
        #[arg(long)]
        by: Option<String>,
    },
}

pub(crate) async fn skills(root: &Path, command: SkillsCommand) -> Result<(), CliError> {
    match command {
        SkillsCommand::List { agent, json } => list(&Workspace::load(root)?, agent, json),
        SkillsCommand::Show { name, json } => show(&Workspace::load(root)?, &name, json),
        SkillsCommand::Validate { paths } if paths.is_empty() => validate_workspace(root),
        SkillsCommand::Validate { paths } => validate_paths(&paths),
        command => candidates(root, command).await,
    }
}

async fn candidates(root: &Path, command: SkillsCommand) -> Result<(), CliError> {
    let runtime = Runtime::builder()
        .workspace(root)
        .build()
        .map_err(CliError::usage)?;
    let decided = match command {
        SkillsCommand::Candidates { status, json } => {
            let status = match status.as_str() {
                "all" => None,
                name => Some(name.parse::<CandidateStatus>().map_err(CliError::usage)?),
            };
            for c in runtime
                .skills()
                .candidates(status)
                .await
                .map_err(CliError::failed)?
            {
                match json {
                    true => out::line(&serde_json::to_string(&c)?),
                    false => out::line(&format!(
                        "{}  {:<8}  {:<24}  {}  (by {} in {})",
                        c.candidate_id,
                        c.status.as_str(),
                        c.name,
                        c.description,
                        c.agent.as_deref().unwrap_or("?"),
                        c.request_id.as_ref().map_or("?", |r| r.as_str()),
                    )),
                }
            }
            return Ok(());
        }
        SkillsCommand::Approve { id, by } => {
            runtime
                .skills()
                .approve(&id, &by.unwrap_or_else(crate::approvals::decider))
                .await
        }
        SkillsCommand::Reject { id, reason, by } => {
            runtime
                .skills()
                .reject(
                    &id,
                    &by.unwrap_or_else(crate::approvals::decider),
                    reason.as_deref(),
                )
                .await
        }
        _ => return Ok(()),
    };
    let candidate = decided.map_err(CliError::usage)?;
    out::line(&match &candidate.path {
        Some(path) => format!(
            "{} approved: skill `{}` written to {path}",
            candidate.candidate_id, candidate.name
        ),
        None => format!(
            "{} {}: skill `{}`",
            candidate.candidate_id,
            candidate.status.as_str(),
            candidate.name
        ),
    });
    Ok(())
}

fn list(workspace: &Workspace, agent: Option<String>, json: bool) -> Result<(), CliError> {
    let agent = match &agent {
        Some(name) => Some(
            workspace
                .agents
                .get(name)
                .ok_or_else(|| CliError::usage(format!("unknown agent `{name}`")))?,
        ),
        None => None,
    };
    let allowed = agent.map(|a| skill_matcher(&a.skills));
    let set = workspace.skills.current();
    for skill in set.skills.values() {
        if allowed
            .as_ref()
            .is_some_and(|allowed| !allowed(&skill.name))
        {
            continue;
        }
        let always_on = agent.is_some_and(|a| a.always_on_skills.contains(&skill.name));
        match json {
            true => out::line(&serde_json::to_string(&json!({
                "name": skill.name,
                "description": skill.description,
                "file": skill.file,
                "alwaysOn": agent.map(|_| always_on),
            }))?),
            false => out::line(&format!(
                "{:<24}  {}{}\n{:<24}  {}",
                skill.name,
                match always_on {
                    true => "[always on] ",
                    false => "",
                },
                skill.description,
                "",
                skill.file.display()
            )),
        }
    }
    for (winner, hidden) in &set.overridden {
        out::status(&format!(
            "» {} overrides {}",
            winner.display(),
            hidden.display()
        ));
    }
    Ok(())
}

fn show(workspace: &Workspace, name: &str, json: bool) -> Result<(), CliError> {
    let set = workspace.skills.current();
    let skill = set.get(name).ok_or_else(|| {
        let known: Vec<&str> = set.skills.keys().map(String::as_str).collect();
        let hint = match keel_workspace::closest(name, known.iter().copied(), 2) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("the skills are: {}", known.join(", ")),
        };
        CliError::usage(format!("no skill `{name}` ({hint})"))
    })?;
    let body = skill_body(skill).map_err(CliError::failed)?;
    let files = skill_files(skill);
    if json {
        out::line(&serde_json::to_string_pretty(&json!({
            "name": skill.name,
            "description": skill.description,
            "file": skill.file,
            "extra": skill.extra,
            "files": files.iter().map(|(path, bytes)| json!({"path": path, "bytes": bytes})).collect::<Vec<_>>(),
            "body": body,
        }))?);
        return Ok(());
    }
    out::line(&format!("name:        {}", skill.name));
    out::line(&format!("description: {}", skill.description));
    out::line(&format!("file:        {}", skill.file.display()));
    for (key, value) in &skill.extra {
        out::line(&format!("{key}: {value}"));
    }
    if !files.is_empty() {
        out::line("files:");
        for (path, bytes) in &files {
            out::line(&format!("  {path} ({bytes} bytes)"));
        }
    }
    out::line("");
    out::line(&body);
    Ok(())
}

/// The workspace's skills: every problem of theirs that loading finds (front matter,
/// collisions, agents naming skills; a broken skill alone leaves the load whole), or a count.
fn validate_workspace(root: &Path) -> Result<(), CliError> {
    match Workspace::load(root) {
        Ok(workspace) => {
            let set = workspace.skills.current();
            if !set.problems.is_empty() {
                return report(&set.problems.iter().collect::<Vec<_>>());
            }
            out::line(&format!(
                "ok: {} skill(s) in {}",
                set.skills.len(),
                workspace
                    .skills
                    .roots()
                    .iter()
                    .map(|r| r.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            Ok(())
        }
        Err(LoadError::Invalid(diagnostics)) => {
            let skills: Vec<&Diagnostic> = diagnostics
                .iter()
                .filter(|d| d.file.ends_with("SKILL.md") || d.message.contains("skill"))
                .collect();
            if skills.is_empty() {
                return Err(CliError::usage(format!(
                    "the workspace has {} problem(s) outside its skills; see keel validate",
                    diagnostics.len()
                )));
            }
            report(&skills)
        }
        Err(error) => Err(error.into()),
    }
}

/// Folders given on the command line, checked on their own.
fn validate_paths(paths: &[PathBuf]) -> Result<(), CliError> {
    let cwd = std::env::current_dir().map_err(CliError::failed)?;
    let mut problems = Vec::new();
    let mut found = 0;
    for path in paths {
        if !path.is_dir() {
            return Err(CliError::usage(format!(
                "{} is not a folder",
                path.display()
            )));
        }
        let single = path.join("SKILL.md").is_file();
        let root = match single {
            true => path
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            false => path.clone(),
        };
        let scan = scan_skills(
            &cwd,
            &[SkillRoot {
                path: root,
                overrides: false,
            }],
        );
        let folder = path.file_name().map(|n| n.to_string_lossy().into_owned());
        // A skill folder is checked by scanning its parent: keep only its own problems.
        let keep =
            |file: &Path| !single || file.parent().and_then(Path::file_name) == path.file_name();
        found += scan
            .skills
            .values()
            .filter(|s| !single || Some(&s.name) == folder.as_ref())
            .count();
        problems.extend(scan.diagnostics.into_iter().filter(|d| keep(&d.file)));
        if single
            && let Some(folder) = &folder
            && let Some(problem) = name_problem(folder)
        {
            problems.push(Diagnostic {
                file: path.join("SKILL.md"),
                line: 1,
                column: 1,
                message: format!(
                    "the folder's name `{folder}` cannot be a skill's name: {problem}"
                ),
                hint: Some("rename the folder to the skill's name".into()),
            });
        }
    }
    if problems.is_empty() {
        out::line(&format!("ok: {found} skill(s)"));
        return Ok(());
    }
    report(&problems.iter().collect::<Vec<_>>())
}

fn report(problems: &[&Diagnostic]) -> Result<(), CliError> {
    for problem in problems {
        out::status(&problem.to_string());
    }
    Err(CliError::usage(format!(
        "{} problem(s) in skills",
        problems.len()
    )))
}
