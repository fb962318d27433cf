//! The gates of spec-driven phases: once every node of a phase is resolved, its gate decides
//! whether the workflow may go on — a command that must exit 0, an agent whose structured
//! verdict must satisfy `pass`, or a person's approval. A phase is `completed` when its
//! nodes are done and `verified` when its gate passed; a gate that refuses `blocks` it, and
//! the workflow fails.

use std::process::Stdio;

use keel_types::ApprovalStatus;
use keel_workspace::{GateKind, GateSpec, template};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::engine::{Engine, Failure, State};
use crate::subagents::{CancelChild, Child, ChildRequest};

const BLOCKED: &str = "runtime.specDriven.phase.blocked";

impl Engine {
    /// Phase `k`'s gate, once its nodes are resolved; an error when it refuses.
    pub(super) async fn gate(
        &self,
        k: usize,
        state: &[State],
        latest: &[Option<serde_json::Value>],
        phase_of: &[Option<usize>],
    ) -> Result<(), Failure> {
        let phase = &self.spec.phases[k];
        if self
            .recorded
            .phases
            .contains(&(phase.name.clone(), "runtime.specDriven.phase.verified"))
        {
            return Ok(());
        }
        let unresolved = phase_of
            .iter()
            .zip(state)
            .any(|(p, s)| *p == Some(k) && !s.resolved());
        if unresolved {
            return Err(Failure::failed(format!(
                "phase `{}` has nodes that never became ready",
                phase.name
            )));
        }
        self.phase_event(k, "runtime.specDriven.phase.started", None)?;
        self.phase_event(k, "runtime.specDriven.phase.completed", None)?;
        if let Some(gate) = &phase.gate {
            let context = self.context(latest);
            if let Err(reason) = self.decide(&phase.name, gate, &context).await? {
                self.phase_event(k, BLOCKED, Some(reason.clone()))?;
                return Err(Failure::failed(format!(
                    "phase `{}` is blocked by its {} gate: {reason}",
                    phase.name,
                    gate.kind.as_str()
                )));
            }
        }
        self.phase_event(k, "runtime.specDriven.phase.verified", None)?;
        Ok(())
    }

    /// `Ok(Ok(()))` when the gate passes, `Ok(Err(reason))` when it refuses.
    async fn decide(
        &self,
        phase: &str,
        gate: &GateSpec,
        context: &Value,
    ) -> Result<Result<(), String>, Failure> {
        let render = |text: &str| {
            template::render(&Value::String(text.to_owned()), context)
                .map(|v| match v {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
                .map_err(|e| Failure::failed(format!("the gate's template: {e}")))
        };
        match gate.kind {
            GateKind::Command => Ok(self.command_gate(gate).await),
            GateKind::Approval => {
                let message = render(gate.message.as_deref().unwrap_or_default())?;
                let key = format!("gate:{phase}");
                let asked_by = format!("Workflow/{} phase {phase}", self.name);
                let decided = self.approval(&key, phase, &message, &asked_by).await?;
                Ok(match decided.status {
                    ApprovalStatus::Approved => Ok(()),
                    status => Err(format!(
                        "{} by {}{}",
                        status.as_str(),
                        decided.decided_by.as_deref().unwrap_or("nobody"),
                        decided
                            .decision_reason
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    )),
                })
            }
            GateKind::Agent => {
                let prompt = render(gate.input.as_deref().unwrap_or("Verify the work so far."))?;
                let agent = gate.agent.clone().unwrap_or_default();
                let child = self
                    .kernel
                    .start_child(ChildRequest {
                        parent: self.record(),
                        call: format!("gate:{phase}"),
                        agent: agent.clone(),
                        prompt,
                        narrowing: Vec::new(),
                        depth: self.depth + 1,
                        metadata: self.metadata.clone(),
                        resumed: self.recorded.last_seq > 0,
                    })
                    .await
                    .map_err(|e| Failure::failed(e.to_string()))?;
                let record = match child {
                    Child::Ended(record) => *record,
                    Child::Live(handle) => {
                        let id = handle.request_id().clone();
                        let guard = CancelChild::new(&handle, &self.shutdown);
                        let _ = handle.wait().await;
                        guard.disarm();
                        self.kernel.store().get_run(&id).await?.ok_or_else(|| {
                            Failure::failed(format!("the gate's run {id} left no record"))
                        })?
                    }
                };
                let Some(verdict) = record.value else {
                    return Ok(Err(format!(
                        "agent `{agent}` gave no verdict (run {} {})",
                        record.request_id,
                        record.status.as_str()
                    )));
                };
                let passes = gate.pass.as_ref().is_some_and(|c| c.holds(&verdict));
                Ok(match passes {
                    true => Ok(()),
                    false => Err(format!(
                        "agent `{agent}`'s verdict does not pass: {verdict}"
                    )),
                })
            }
        }
    }

    /// Runs the gate's command in the workspace (its own process group, killed if the run
    /// stops); exit 0 passes, anything else refuses with the end of its output.
    async fn command_gate(&self, gate: &GateSpec) -> Result<(), String> {
        let Some((program, args)) = gate.command.split_first() else {
            return Err("the gate has no command".into());
        };
        let env = keel_tools::process::child_env(std::env::vars_os(), &Default::default(), &[]);
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .current_dir(&self.kernel.workspace().root)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run `{program}`: {e}"))?;
        let timeout = gate
            .timeout
            .map_or(std::time::Duration::from_secs(600), |t| t.0);
        let mut output = String::new();
        let mut stderr = String::new();
        let waited = tokio::time::timeout(timeout, async {
            if let Some(out) = child.stdout.as_mut() {
                let _ = out.read_to_string(&mut output).await;
            }
            if let Some(err) = child.stderr.as_mut() {
                let _ = err.read_to_string(&mut stderr).await;
            }
            child.wait().await
        })
        .await;
        let status = match waited {
            Ok(Ok(status)) => status,
            Ok(Err(error)) => return Err(format!("`{program}` failed: {error}")),
            Err(_) => {
                return Err(format!(
                    "`{program}` did not finish within {}",
                    humantime::format_duration(timeout)
                ));
            }
        };
        if status.success() {
            return Ok(());
        }
        output.push_str(&stderr);
        let tail: String = output
            .chars()
            .rev()
            .take(400)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let code = status
            .code()
            .map_or("a signal".to_owned(), |c| c.to_string());
        Err(format!(
            "`{}` exited with {code}: {}",
            gate.command.join(" "),
            tail.trim()
        ))
    }
}
