//! `keel run`: one request, the answer streamed to stdout, narration (or the selected events)
//! to stderr; `--json` prints events as JSON lines on stdout instead. Ctrl-C cancels the run
//! (exit 130); a second Ctrl-C exits at once.

use std::path::PathBuf;

use globset::{Glob, GlobSet, GlobSetBuilder};
use keel::types::AdapterEvent;
use keel::{Event, EventPayload, RequestOptions, RunStatus, Runtime};

use crate::{EXIT_CANCELLED, EXIT_FAILED, EXIT_USAGE, config, out};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workspace folder.
    #[arg(short = 'w', long = "workspace", default_value = ".")]
    workspace: PathBuf,
    /// The agent to run (default: the workspace's default agent).
    #[arg(long)]
    agent: Option<String>,
    /// Print every event as one JSON line on stdout instead of the answer.
    #[arg(long)]
    json: bool,
    /// Show events whose type matches this glob (repeatable), e.g. `runtime.tool.*`.
    /// Default: the workspace's `cli.events.include` (narration).
    #[arg(long = "events", value_name = "GLOB")]
    events: Vec<String>,
    /// The prompt.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    prompt: Vec<String>,
}

pub async fn run(args: RunArgs) -> u8 {
    let workspace = match config::load(&args.workspace) {
        Ok(ws) => ws,
        Err(code) => return code,
    };
    let patterns = match args.events.is_empty() {
        true if args.json => vec!["*".to_owned()],
        true => workspace.runtime.cli.events.include.clone(),
        false => args.events.clone(),
    };
    let filter = match build_filter(&patterns) {
        Ok(filter) => filter,
        Err(message) => {
            out::error(&message);
            return EXIT_USAGE;
        }
    };
    let runtime = match Runtime::builder().loaded_workspace(workspace).build() {
        Ok(runtime) => runtime,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_USAGE;
        }
    };
    let options = RequestOptions {
        input: args.prompt.join(" "),
        agent: args.agent.clone(),
        session_id: None,
    };
    let mut handle = match runtime.request(options).await {
        Ok(handle) => handle,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_USAGE;
        }
    };

    let cancel = handle.cancel_token();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(EXIT_CANCELLED));
            }
        }
    });

    let mut printer = Printer {
        json: args.json,
        filter,
        printed_text: false,
        at_line_start: true,
    };
    while let Some(event) = handle.next_event().await {
        printer.show(&event);
    }
    let response = match handle.wait().await {
        Ok(response) => response,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_FAILED;
        }
    };
    if !args.json {
        match (&response.output, printer.printed_text) {
            (Some(output), false) => out::line(output),
            _ if !printer.at_line_start => out::line(""),
            _ => {}
        }
    }
    match response.status {
        RunStatus::Completed => 0,
        RunStatus::Cancelled => EXIT_CANCELLED,
        _ => {
            if let Some(error) = &response.error {
                out::error(&format!(
                    "run {} failed: {}",
                    response.request_id, error.message
                ));
            }
            EXIT_FAILED
        }
    }
}

fn build_filter(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob =
            Glob::new(pattern).map_err(|e| format!("invalid --events glob `{pattern}`: {e}"))?;
        builder.add(glob);
    }
    builder.build().map_err(|e| e.to_string())
}

struct Printer {
    json: bool,
    filter: GlobSet,
    printed_text: bool,
    at_line_start: bool,
}

impl Printer {
    fn show(&mut self, event: &Event) {
        let selected = self.filter.is_match(event.type_name());
        if self.json {
            if selected {
                out::line(&serde_json::to_string(event).unwrap_or_default());
            }
            return;
        }
        match &event.payload {
            EventPayload::Adapter {
                event: AdapterEvent::OutputDelta { text, .. },
            } => {
                out::stdout_raw(text);
                self.printed_text = true;
                self.at_line_start = text.ends_with('\n');
            }
            // Text from a failed attempt is void: start the retried answer on a fresh line.
            EventPayload::ModelRetry { .. } if !self.at_line_start => {
                out::line("");
                self.at_line_start = true;
            }
            _ => {}
        }
        if !selected {
            return;
        }
        match &event.payload {
            EventPayload::Narration { text, .. } => out::status(&format!("» {text}")),
            _ => out::status(&serde_json::to_string(event).unwrap_or_default()),
        }
    }
}
