//! `propose_skill {name, description, instructions}`: an agent proposes a new skill from what
//! it learned. The candidate is stored, pending; only a person's approval (`keel skills
//! approve`) writes it under `resources/skills/`. The call records
//! `runtime.skill.candidate.created`. Only agents that list the tool have it.

use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{
    CandidateStatus, EventPayload, Issue, RunStore, SkillCandidate, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};
use keel_workspace::Workspace;
use keel_workspace::skills::{
    MAX_SKILL_DESCRIPTION, MAX_SKILL_NAME, PROPOSE_SKILL_TOOL, name_problem,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::arg_issue;
use crate::input;

/// The most characters of a proposed skill's instructions.
pub(super) const MAX_INSTRUCTIONS: usize = 20_000;

/// `propose_skill`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ProposeSkillInput {
    /// Lowercase letters, digits and hyphens, e.g. triage-flaky-tests.
    #[schemars(regex(pattern = r"^[a-z0-9-]+$"), length(min = 1, max = MAX_SKILL_NAME))]
    name: String,
    /// What the skill does and when to use it, in one or two sentences.
    #[schemars(length(min = 1, max = MAX_SKILL_DESCRIPTION))]
    description: String,
    /// The skill's instructions, in Markdown.
    #[schemars(length(min = 1, max = MAX_INSTRUCTIONS))]
    instructions: String,
}

/// The tool.
pub struct ProposeSkill {
    spec: ToolSpec,
    workspace: Arc<Workspace>,
    store: Arc<dyn RunStore>,
}

impl std::fmt::Debug for ProposeSkill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProposeSkill").finish_non_exhaustive()
    }
}

impl ProposeSkill {
    pub fn new(workspace: Arc<Workspace>, store: Arc<dyn RunStore>) -> Self {
        Self {
            spec: ToolSpec {
                name: PROPOSE_SKILL_TOOL.to_owned(),
                description: "Propose a new skill — reusable instructions for a kind of task, \
                              written from what you learned — for a person to review. It is \
                              not used until they approve it."
                    .to_owned(),
                parameters: input::schema_of::<ProposeSkillInput>(),
            },
            workspace,
            store,
        }
    }
}

#[async_trait]
impl Tool for ProposeSkill {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// It changes nothing an agent can act on: the candidate waits for a person.
    fn read_only(&self) -> bool {
        true
    }

    fn check(&self, _ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let Some(name) = args.get("name").and_then(Value::as_str) else {
            return Vec::new();
        };
        let problem =
            name_problem(name).or_else(|| {
                self.workspace.skills.current().get(name).map(|skill| {
                    format!("a skill `{name}` exists already ({})", skill.file.display())
                })
            });
        match problem {
            Some(message) => vec![arg_issue("name", "a new skill name", name, message)],
            None => Vec::new(),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let input: ProposeSkillInput = input::parse(args)?;
        let name = input.name.as_str();
        let description = input.description.trim();
        let instructions = input.instructions.trim();
        let store_error = |e: keel_types::StoreError| ToolError::Failed(e.to_string());
        let pending = self
            .store
            .list_skill_candidates(Some(CandidateStatus::Pending))
            .await
            .map_err(store_error)?;
        if let Some(other) = pending.iter().find(|c| c.name == name) {
            return Err(ToolError::Failed(format!(
                "a skill `{name}` is already proposed ({}) and waits for a person's decision",
                other.candidate_id
            )));
        }
        let candidate = SkillCandidate {
            candidate_id: keel_types::new_id("cand"),
            name: name.to_owned(),
            description: description.to_owned(),
            instructions: instructions.to_owned(),
            status: CandidateStatus::Pending,
            request_id: Some(ctx.request_id.clone()),
            agent: Some(ctx.agent.clone()),
            created_at: keel_types::now_rfc3339(),
            decided_at: None,
            decided_by: None,
            reason: None,
            path: None,
        };
        self.store
            .create_skill_candidate(&candidate)
            .await
            .map_err(store_error)?;
        let mut output = ToolOutput::text(format!(
            "Skill `{name}` is proposed as candidate {}. A person reviews it; it is not \
             available until they approve it.",
            candidate.candidate_id
        ));
        output.events.push(EventPayload::SkillCandidateCreated {
            candidate_id: candidate.candidate_id,
            skill: candidate.name,
            call_id: None,
        });
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model-facing contract of `propose_skill`, reviewed when it changes.
    #[test]
    fn propose_skill_input_schema() {
        insta::assert_json_snapshot!(
            "propose_skill_input",
            input::schema_of::<ProposeSkillInput>()
        );
    }
}
