//! `keel init`: writes the quickstart workspace (the same files as `examples/quickstart`), which
//! runs offline on a scripted model.

use std::path::Path;

use crate::{EXIT_FAILED, EXIT_USAGE, out};

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
        "resources/scripts/offline.yaml",
        include_str!("../../../examples/quickstart/resources/scripts/offline.yaml"),
    ),
    (
        "resources/tools/word_count.py",
        include_str!("../../../examples/quickstart/resources/tools/word_count.py"),
    ),
    (
        "notes/ideas.md",
        include_str!("../../../examples/quickstart/notes/ideas.md"),
    ),
    (".gitignore", ".keel/\n.env\n"),
];

pub fn init(dir: &Path) -> u8 {
    if dir.join("config").exists() {
        out::error(&format!(
            "{} already has a config/ folder; refusing to overwrite a workspace",
            dir.display()
        ));
        return EXIT_USAGE;
    }
    for (path, contents) in FILES {
        let target = dir.join(path);
        let written = target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&target, contents));
        if let Err(error) = written {
            out::error(&format!("cannot write {}: {error}", target.display()));
            return EXIT_FAILED;
        }
    }
    out::line(&format!("Created a Keel workspace in {}.", dir.display()));
    out::line("It runs offline on a scripted model. Try:");
    out::line(&format!(
        "  keel run -w {} \"What is in this workspace?\"",
        dir.display()
    ));
    0
}
