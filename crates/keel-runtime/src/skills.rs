//! Skills in a run's prompt (`docs/workspace.md#skills`): the catalogue of the skills the
//! agent may use, and the bodies of the skills that are always on for it or that the input
//! mentions as `$name`.
//!
//! A `$mention` of a skill that does not exist, or that the agent may not use, refuses the
//! request ([`RuntimeError::Skill`]) — a mention is never dropped silently. Skills that do not
//! fit the catalogue's budget are left out of it and named in `runtime.skill.offered`.
//!
//! What depends only on the skill set and the agent — which skills it may use, its
//! catalogue, the skills' bodies — is computed once per scan ([`SkillSet::generation`]) and
//! kept, so a run's start costs a lock, a scan of its input for mentions and a few clones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use keel_types::{EventPayload, Message, SkillReason};
use keel_workspace::skills::{
    SkillLibrary, SkillSet, fit_body, mentions, skill_body, skill_matcher,
};
use keel_workspace::{AgentSpec, Workspace, closest};

use crate::RuntimeError;

/// What the skills add to a run's prompt, and the events that say so.
#[derive(Debug, Default)]
pub struct SkillPrompt {
    /// System messages after the agent's instructions: the catalogue, then the bodies.
    pub messages: Vec<Message>,
    /// `runtime.skill.offered` and one `runtime.skill.injected` per body.
    pub events: Vec<EventPayload>,
}

/// What one agent's skills come to under one scan.
#[derive(Debug)]
struct AgentSkills {
    /// The skills it may use, by name (sorted).
    usable: Vec<String>,
    /// The catalogue message, when it may use any skill.
    catalogue: Option<Message>,
    offered: Vec<String>,
    omitted: Vec<String>,
    chars: u64,
}

#[derive(Debug, Default)]
struct Cached {
    generation: u64,
    agents: HashMap<String, Arc<AgentSkills>>,
    /// Bodies cut to the budget: `(text, truncated)`, or why the body cannot be read.
    bodies: HashMap<String, Result<Arc<(String, bool)>, String>>,
}

/// Per-scan results, shared by the runs of a kernel.
#[derive(Debug, Default)]
pub struct SkillCache {
    cached: Mutex<Cached>,
}

impl SkillCache {
    /// The skills part of a run's prompt for `agent` and `input`, or why the request cannot
    /// run.
    pub fn prompt(
        &self,
        workspace: &Workspace,
        agent_name: &str,
        agent: &AgentSpec,
        input: &str,
    ) -> Result<SkillPrompt, RuntimeError> {
        let set = workspace.skills.current();
        let found = mentions(input);
        if agent.skills.is_empty() && found.iter().all(|m| set.get(&m.name).is_none()) {
            // Without skills, `$word` is only text (unless it names a skill of the workspace).
            return Ok(SkillPrompt::default());
        }
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cached.generation != set.generation {
            *cached = Cached {
                generation: set.generation,
                ..Cached::default()
            };
        }
        let budget = workspace.runtime.skills.catalogue_chars as usize;
        let skills = cached
            .agents
            .entry(agent_name.to_owned())
            .or_insert_with(|| Arc::new(agent_skills(&set, agent, budget)))
            .clone();
        // Always-on skills first, then mentions in the order they appear.
        let mut wanted: Vec<(String, SkillReason)> = agent
            .always_on_skills
            .iter()
            .map(|name| (name.clone(), SkillReason::AlwaysOn))
            .collect();
        for mention in &found {
            if skills.usable.binary_search(&mention.name).is_err() {
                return Err(RuntimeError::Skill(mention_error(
                    &set,
                    agent_name,
                    &skills.usable,
                    &mention.name,
                )));
            }
            if !wanted.iter().any(|(name, _)| *name == mention.name) {
                wanted.push((mention.name.clone(), SkillReason::Mention));
            }
        }
        let mut prompt = SkillPrompt::default();
        if let Some(catalogue) = &skills.catalogue {
            prompt.messages.push(catalogue.clone());
            prompt.events.push(EventPayload::SkillOffered {
                offered: skills.offered.clone(),
                omitted: skills.omitted.clone(),
                chars: skills.chars,
            });
        }
        let body_budget = workspace.runtime.skills.body_chars as usize;
        for (name, reason) in wanted {
            let body = cached
                .bodies
                .entry(name.clone())
                .or_insert_with(|| read_body(&set, &name, body_budget))
                .clone()
                .map_err(|why| {
                    RuntimeError::Skill(format!(
                        "skill `{name}` ({}) cannot be used: {why}",
                        match reason {
                            SkillReason::AlwaysOn => "always on for this agent",
                            _ => "mentioned in the input",
                        }
                    ))
                })?;
            let (text, truncated) = body.as_ref();
            let why = match reason {
                SkillReason::AlwaysOn => "it is always on for you".to_owned(),
                _ => format!("the request mentions ${name}"),
            };
            prompt.messages.push(Message::system(format!(
                "# Skill: {name}\n\nFollow this skill ({why}).\n\n{text}"
            )));
            prompt.events.push(EventPayload::SkillInjected {
                skill: name,
                reason,
                chars: text.chars().count() as u64,
                truncated: *truncated,
            });
        }
        Ok(prompt)
    }
}

/// Checks the skill folders every `interval` (on the blocking pool) and scans them again when
/// they changed; ends when the library is dropped.
pub(crate) async fn watch(library: Weak<SkillLibrary>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(library) = library.upgrade() else {
            return;
        };
        let Ok(Some(set)) = tokio::task::spawn_blocking(move || library.refresh()).await else {
            continue;
        };
        tracing::info!(
            skills = set.skills.len(),
            problems = set.problems.len(),
            generation = set.generation,
            "The skills changed; scanned them again."
        );
        for problem in &set.problems {
            tracing::warn!(%problem, "A skill is left out.");
        }
    }
}

/// Which skills `agent` may use, and its catalogue within `budget` characters of entries.
fn agent_skills(set: &SkillSet, agent: &AgentSpec, budget: usize) -> AgentSkills {
    let allowed = skill_matcher(&agent.skills);
    let usable: Vec<String> = set
        .skills
        .keys()
        .filter(|name| allowed(name))
        .cloned()
        .collect();
    let mut entries = String::new();
    let mut offered = Vec::new();
    let mut omitted = Vec::new();
    let mut used = 0;
    for name in &usable {
        let description = set.skills[name].description.split_whitespace();
        let line = format!("- {name}: {}\n", description.collect::<Vec<_>>().join(" "));
        let size = line.chars().count();
        if omitted.is_empty() && used + size <= budget {
            used += size;
            entries.push_str(&line);
            offered.push(name.clone());
        } else {
            omitted.push(name.clone());
        }
    }
    let catalogue = (!usable.is_empty()).then(|| {
        let mut text = String::from(
            "## Skills\n\nSkills hold instructions for particular tasks. When a task matches a \
             skill's description, call `load_skill` with its name and follow the instructions \
             it returns. Read the files a skill points to with `read_skill_resource` and run its \
             scripts with `run_skill_script`.\n\n",
        );
        text.push_str(&entries);
        if !omitted.is_empty() {
            text.push_str(&format!(
                "({} more skills are not listed here for lack of space.)\n",
                omitted.len()
            ));
        }
        Message::system(text.trim_end().to_owned())
    });
    AgentSkills {
        usable,
        catalogue,
        offered,
        omitted,
        chars: entries.chars().count() as u64,
    }
}

fn read_body(set: &SkillSet, name: &str, budget: usize) -> Result<Arc<(String, bool)>, String> {
    let skill = set
        .get(name)
        .ok_or_else(|| match set.broken.contains(name) {
            true => "it is left out of the workspace's skills for a problem in its SKILL.md (see \
                 `keel skills validate`)"
                .to_owned(),
            false => "it is no longer in the workspace's skills".to_owned(),
        })?;
    let body = skill_body(skill).map_err(|e| e.to_string())?;
    Ok(Arc::new(fit_body(name, &body, budget)))
}

/// Why a mention of `name` cannot be served.
fn mention_error(set: &SkillSet, agent: &str, usable: &[String], name: &str) -> String {
    let usable_list = match usable.is_empty() {
        true => "none".to_owned(),
        false => usable.join(", "),
    };
    let escape = "(write `\\$name` or put it in `code` for a literal `$name`)";
    if set.get(name).is_some() {
        return format!(
            "the input mentions skill `${name}`, which agent `{agent}` may not use; its skills \
             are: {usable_list} {escape}"
        );
    }
    let near = closest(name, set.skills.keys().map(String::as_str), 2)
        .map(|near| format!("did you mean `${near}`? "))
        .unwrap_or_default();
    format!(
        "the input mentions `${name}`, but there is no skill `{name}`; {near}agent `{agent}` \
         may use: {usable_list} {escape}"
    )
}
