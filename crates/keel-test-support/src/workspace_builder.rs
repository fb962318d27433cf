//! [`WorkspaceBuilder`]: the common workspace documents — a scripted agent, an `openai` model
//! at a mock's URL, tools, policies, hooks — written once, so a test says what its workspace
//! holds instead of spelling out YAML.
//!
//! Every document goes into `config/keel.yaml` (in the order added, separated by `---`); other
//! files land where [`WorkspaceBuilder::file`] says. Tests of the YAML format itself (error
//! positions, overlays, explain) write their documents by hand on purpose.

use std::path::PathBuf;

use serde_json::Value;

use crate::TempWorkspace;

/// The file every document of a built workspace is written to.
pub const CONFIG_FILE: &str = "config/keel.yaml";

/// The upstream model name an [`WorkspaceBuilder::openai_model_at`] model asks for.
pub const OPENAI_MOCK_MODEL: &str = "mock-model";

/// Lays out a workspace, then [`build`](WorkspaceBuilder::build)s it in a fresh temp folder.
#[derive(Debug, Default)]
#[must_use]
pub struct WorkspaceBuilder {
    documents: Vec<String>,
    files: Vec<(PathBuf, Vec<u8>, bool)>,
}

impl WorkspaceBuilder {
    /// An empty workspace (it still gets a `config/` folder).
    pub fn new() -> Self {
        Self::default()
    }

    /// A document of `kind` named `name`. `spec` is YAML: a one-line flow mapping
    /// (`{ provider: openai }`) or block lines (`limits: { maxSteps: 3 }`), which are dedented
    /// and indented under `spec:`.
    pub fn document(mut self, kind: &str, name: &str, spec: &str) -> Self {
        self.documents.push(format!(
            "apiVersion: keel/v1\nkind: {kind}\nmetadata: {{ name: {name} }}\n{}",
            spec_yaml(spec)
        ));
        self
    }

    /// The `Runtime` document (named `default`).
    pub fn runtime(self, spec: &str) -> Self {
        self.document("Runtime", "default", spec)
    }

    /// A `Model` document.
    pub fn model(self, name: &str, spec: &str) -> Self {
        self.document("Model", name, spec)
    }

    /// A model `name` served by the `openai` provider at `base_url` (a [`crate::MockLlm`]'s
    /// [`base_url`](crate::MockLlm::base_url)), asking for [`OPENAI_MOCK_MODEL`].
    pub fn openai_model_at(self, name: &str, base_url: &str) -> Self {
        self.model(
            name,
            &format!("{{ provider: openai, baseUrl: \"{base_url}\", model: {OPENAI_MOCK_MODEL} }}"),
        )
    }

    /// A `scripted` model `name` playing `script` (written to `scripts/{name}.json`).
    pub fn scripted_model(self, name: &str, script: &Value) -> Self {
        let path = format!("scripts/{name}.json");
        self.file(&path, script.to_string())
            .model(name, &format!("{{ provider: scripted, script: {path} }}"))
    }

    /// A `scripted` model `name` that answers `Hi.` to anything, reporting `prompt` and
    /// `completion` tokens a round, at `pricing` (the `pricing` mapping, e.g.
    /// `{ inputPerMTok: 1000, outputPerMTok: 10000 }`).
    pub fn priced_scripted_model(
        self,
        name: &str,
        (prompt, completion): (u64, u64),
        pricing: &str,
    ) -> Self {
        let path = format!("scripts/{name}.json");
        let script = serde_json::json!({"conversations": [{"steps": [{"text": "Hi.",
            "usage": {"promptTokens": prompt, "completionTokens": completion}}]}]});
        self.file(&path, script.to_string()).model(
            name,
            &format!("{{ provider: scripted, script: {path}, pricing: {pricing} }}"),
        )
    }

    /// An `Agent` document.
    pub fn agent(self, name: &str, spec: &str) -> Self {
        self.document("Agent", name, spec)
    }

    /// Agent `name` on its own `scripted` model (also called `name`) playing `script`.
    pub fn scripted_agent(self, name: &str, script: &Value) -> Self {
        self.scripted_model(name, script)
            .agent(name, &format!("{{ model: {name} }}"))
    }

    /// A `Tool` document.
    pub fn tool(self, name: &str, spec: &str) -> Self {
        self.document("Tool", name, spec)
    }

    /// A `Policy` document.
    pub fn policy(self, name: &str, spec: &str) -> Self {
        self.document("Policy", name, spec)
    }

    /// A `Hook` document.
    pub fn hook(self, name: &str, spec: &str) -> Self {
        self.document("Hook", name, spec)
    }

    /// Documents written by hand (one or more, `---`-separated), appended as they are.
    pub fn yaml(mut self, documents: &str) -> Self {
        let documents = documents.trim_start_matches("---\n").trim();
        if !documents.is_empty() {
            self.documents.push(format!("{documents}\n"));
        }
        self
    }

    /// Any other file, relative to the workspace root.
    pub fn file(mut self, rel_path: &str, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((rel_path.into(), contents.into(), false));
        self
    }

    /// A file with the executable bit set (a hook or tool script).
    pub fn executable(mut self, rel_path: &str, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((rel_path.into(), contents.into(), true));
        self
    }

    /// The YAML the documents make, as [`build`](Self::build) writes it to [`CONFIG_FILE`].
    pub fn config_yaml(&self) -> String {
        self.documents.join("---\n")
    }

    /// Writes everything into a fresh [`TempWorkspace`].
    ///
    /// # Panics
    /// When a file cannot be written.
    #[track_caller]
    pub fn build(self) -> TempWorkspace {
        self.write_into(TempWorkspace::new())
    }

    /// Like [`build`](Self::build), with the temp folder inside `parent`.
    #[track_caller]
    pub fn build_in(self, parent: impl AsRef<std::path::Path>) -> TempWorkspace {
        self.write_into(TempWorkspace::new_in(parent))
    }

    #[track_caller]
    fn write_into(self, ws: TempWorkspace) -> TempWorkspace {
        ws.mkdir("config");
        if !self.documents.is_empty() {
            ws.write(CONFIG_FILE, self.config_yaml());
        }
        for (path, contents, executable) in &self.files {
            if *executable {
                ws.write_executable(path, contents);
            } else {
                ws.write(path, contents);
            }
        }
        ws
    }
}

/// `spec: …` for a flow mapping, or `spec:` and the block lines indented by two.
fn spec_yaml(spec: &str) -> String {
    // Blank lines around the spec (a raw string's opening and closing lines) are dropped.
    let spec = spec.trim_end();
    let first_text = spec.len() - spec.trim_start().len();
    let first_line = spec[..first_text].rfind('\n').map_or(0, |i| i + 1);
    let spec = &spec[first_line..];
    if !spec.contains('\n') && spec.trim_start().starts_with('{') {
        return format!("spec: {}\n", spec.trim());
    }
    let indent = spec
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::from("spec:\n");
    for line in spec.lines() {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str("  ");
            out.push_str(line.get(indent..).unwrap_or(line.trim_start()));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_specs_are_dedented_under_spec() {
        let built = WorkspaceBuilder::new()
            .policy(
                "p",
                "
                rules:
                  - { tool: deploy, decision: allow }
                ",
            )
            .openai_model_at("mock", "http://127.0.0.1:1/v1")
            .config_yaml();
        assert_eq!(
            built,
            "apiVersion: keel/v1\nkind: Policy\nmetadata: { name: p }\nspec:\n  rules:\n    - { tool: deploy, decision: allow }\n---\napiVersion: keel/v1\nkind: Model\nmetadata: { name: mock }\nspec: { provider: openai, baseUrl: \"http://127.0.0.1:1/v1\", model: mock-model }\n"
        );
    }
}
