//! `keel workflows list|show|graph|run`: the workspace's `Workflow` documents, a workflow's
//! nodes and edges (or its Mermaid flowchart), and running one — followed like `keel run`,
//! its events on stderr (or `--json` lines on stdout), its output on stdout.

use std::path::Path;

use clap::Subcommand;
use keel::Workspace;
use keel_workspace::{WorkflowSpec, describe_condition, mermaid};
use serde_json::json;

use crate::error::CliError;
use crate::follow::{self, OutputArgs};
use crate::out;
use crate::workspace;

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowsCommand {
    /// The workspace's workflows: name, nodes, description.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A workflow's nodes, edges and phases.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// A workflow as a Mermaid flowchart.
    Graph { name: String },
    /// Run a workflow: its input is text, or JSON when its input schema asks for it.
    Run {
        name: String,
        /// The workflow's input.
        #[arg(long, default_value = "")]
        input: String,
        #[command(flatten)]
        output: OutputArgs,
        /// Answer approvals here, on the terminal (the default when stdin is a terminal);
        /// with `--no-approve-here` they wait for `keel approvals` from anywhere.
        #[arg(long, overrides_with = "no_approve_here")]
        approve_here: bool,
        #[arg(long, hide = true)]
        no_approve_here: bool,
    },
}

pub(crate) async fn workflows(root: &Path, command: WorkflowsCommand) -> Result<(), CliError> {
    match command {
        WorkflowsCommand::List { json } => list(&Workspace::load(root)?, json),
        WorkflowsCommand::Show { name, json } => {
            let workspace = Workspace::load(root)?;
            show(&name, find(&workspace, &name)?, json)
        }
        WorkflowsCommand::Graph { name } => {
            let workspace = Workspace::load(root)?;
            out::line(mermaid(find(&workspace, &name)?).trim_end());
            Ok(())
        }
        WorkflowsCommand::Run {
            name,
            input,
            output,
            approve_here,
            no_approve_here,
        } => {
            let (runtime, printer) = workspace::start(root, &output).await?;
            find(&runtime.workspace(), &name)?;
            let handle = runtime
                .run_workflow(&name, input, None)
                .await
                .map_err(CliError::usage)?;
            let interactive = !no_approve_here
                && (approve_here || std::io::IsTerminal::is_terminal(&std::io::stdin()));
            let printer = match interactive {
                true => printer.with_approver(runtime.clone()),
                false => printer,
            };
            let result = follow::to_end(handle, printer).await;
            runtime.stop_mcp().await;
            result
        }
    }
}

fn find<'a>(workspace: &'a Workspace, name: &str) -> Result<&'a WorkflowSpec, CliError> {
    workspace.workflows.get(name).ok_or_else(|| {
        let known: Vec<&str> = workspace.workflows.keys().map(String::as_str).collect();
        CliError::usage(match known.is_empty() {
            true => format!("no workflow `{name}`: the workspace has none"),
            false => format!("no workflow `{name}`; workflows: {}", known.join(", ")),
        })
    })
}

fn list(workspace: &Workspace, json: bool) -> Result<(), CliError> {
    if json {
        let rows: Vec<_> = workspace
            .workflows
            .iter()
            .map(|(name, spec)| {
                json!({"name": name, "description": spec.description, "nodes": spec.nodes.len(), "phases": spec.phases.len()})
            })
            .collect();
        out::line(&serde_json::to_string(&rows)?);
        return Ok(());
    }
    if workspace.workflows.is_empty() {
        out::status("No workflows: add a `kind: Workflow` document (see docs/workflows.md).");
        return Ok(());
    }
    for (name, spec) in &workspace.workflows {
        out::line(&format!(
            "{name:<24} {:>3} nodes  {}",
            spec.nodes.len(),
            spec.description
        ));
    }
    Ok(())
}

fn show(name: &str, spec: &WorkflowSpec, json: bool) -> Result<(), CliError> {
    if json {
        out::line(&serde_json::to_string_pretty(spec)?);
        return Ok(());
    }
    out::line(&format!("workflow {name}"));
    if !spec.description.is_empty() {
        out::line(&format!("  {}", spec.description));
    }
    out::line("nodes:");
    for node in &spec.nodes {
        let what = node
            .agent
            .as_deref()
            .or(node.tool.as_deref())
            .or(node.workflow.as_deref())
            .or(node.items.as_deref())
            .unwrap_or_default();
        out::line(&format!(
            "  {:<20} {:<9} {what}",
            node.id,
            node.kind.as_str()
        ));
    }
    if !spec.edges.is_empty() {
        out::line("edges:");
    }
    for edge in &spec.edges {
        let when = edge
            .when
            .as_ref()
            .map(|c| format!(" when {}", describe_condition(c)))
            .unwrap_or_default();
        let bound = edge
            .max_iterations
            .map(|m| format!(" (loop, at most {m}×)"))
            .unwrap_or_default();
        out::line(&format!("  {} → {}{when}{bound}", edge.from, edge.to));
    }
    for phase in &spec.phases {
        let gate = phase
            .gate
            .as_ref()
            .map_or("none".to_owned(), |g| g.kind.as_str().to_owned());
        out::line(&format!(
            "phase {}: {} (gate: {gate})",
            phase.name,
            phase.nodes.join(", ")
        ));
    }
    Ok(())
}
