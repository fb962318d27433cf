//! `keel init`: writes the quickstart workspace (the same files as `examples/quickstart`), or
//! with `--template` one of `examples/adapters/` (an agent written with another framework,
//! run by Keel); each runs offline on a scripted model.

use std::path::Path;

use crate::error::CliError;
use crate::out;

/// The template's files: path relative to the new workspace, contents.
const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../../examples/quickstart/README.md"),
    ),
    (
        "config/runtime.yaml",
        include_str!("../../../examples/quickstart/config/runtime.yaml"),
    ),
    (
        "config/models.yaml",
        include_str!("../../../examples/quickstart/config/models.yaml"),
    ),
    (
        "config/agents.yaml",
        include_str!("../../../examples/quickstart/config/agents.yaml"),
    ),
    (
        "config/tools.yaml",
        include_str!("../../../examples/quickstart/config/tools.yaml"),
    ),
    (
        "config/workflows.yaml",
        include_str!("../../../examples/quickstart/config/workflows.yaml"),
    ),
    (
        "resources/scripts/offline.yaml",
        include_str!("../../../examples/quickstart/resources/scripts/offline.yaml"),
    ),
    (
        "resources/tools/word_count.py",
        include_str!("../../../examples/quickstart/resources/tools/word_count.py"),
    ),
    (
        "resources/skills/release-notes/SKILL.md",
        include_str!("../../../examples/quickstart/resources/skills/release-notes/SKILL.md"),
    ),
    (
        "resources/skills/release-notes/references/style.md",
        include_str!(
            "../../../examples/quickstart/resources/skills/release-notes/references/style.md"
        ),
    ),
    (
        "resources/skills/release-notes/scripts/count_changes.py",
        include_str!(
            "../../../examples/quickstart/resources/skills/release-notes/scripts/count_changes.py"
        ),
    ),
    (
        "notes/ideas.md",
        include_str!("../../../examples/quickstart/notes/ideas.md"),
    ),
    (".gitignore", ".keel/\n.env\n"),
];

/// What `keel init` starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Template {
    Quickstart,
    Langgraph,
    OpenaiAgents,
    Deepagents,
}

/// The files of an adapter example: `examples/adapters/<name>/…`.
macro_rules! adapter_files {
    ($name:literal) => {
        &[
            (
                "config/workspace.yaml",
                include_str!(concat!(
                    "../../../examples/adapters/",
                    $name,
                    "/config/workspace.yaml"
                )),
            ),
            (
                "resources/offline.yaml",
                include_str!(concat!(
                    "../../../examples/adapters/",
                    $name,
                    "/resources/offline.yaml"
                )),
            ),
            (
                "agent.py",
                include_str!(concat!("../../../examples/adapters/", $name, "/agent.py")),
            ),
            (
                "requirements.txt",
                include_str!(concat!(
                    "../../../examples/adapters/",
                    $name,
                    "/requirements.txt"
                )),
            ),
            (".gitignore", ".keel/\n.env\n"),
        ]
    };
}

const LANGGRAPH: &[(&str, &str)] = adapter_files!("langgraph");
const OPENAI_AGENTS: &[(&str, &str)] = adapter_files!("openai-agents");
const DEEPAGENTS: &[(&str, &str)] = adapter_files!("deepagents");

pub(crate) fn init(dir: &Path, template: Template) -> Result<(), CliError> {
    let files = match template {
        Template::Quickstart => FILES,
        Template::Langgraph => LANGGRAPH,
        Template::OpenaiAgents => OPENAI_AGENTS,
        Template::Deepagents => DEEPAGENTS,
    };
    if dir.join("config").exists() {
        return Err(CliError::usage(format!(
            "{} already has a config/ folder; refusing to overwrite a workspace",
            dir.display()
        )));
    }
    for (path, contents) in files {
        let target = dir.join(path);
        target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&target, contents))
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", target.display())))?;
    }
    out::line(&format!("Created a Keel workspace in {}.", dir.display()));
    if template != Template::Quickstart {
        out::line(&format!(
            "Its agent is agent.py (docs/adapters.md). Install what it needs first:\n  pip install -r {}",
            dir.join("requirements.txt").display()
        ));
    }
    out::line("It runs offline on a scripted model. Try:");
    out::line(&format!(
        "  keel run -w {} \"What is in this workspace?\"",
        dir.display()
    ));
    Ok(())
}
