//! The interpolation environment: `.env` in the workspace root (optional, parsed with
//! `dotenvy`, later lines win) overlaid by the variables given in
//! [`LoadOptions::env`](crate::LoadOptions::env).
//!
//! Note: `dotenvy` expands `$VAR` inside `.env` values itself, looking at the process
//! environment first and then at earlier lines; single-quoted values are taken literally.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::Diagnostic;
use crate::yaml::{Loc, Source};

/// The merged environment; problems with `.env` are added to `diagnostics`.
pub(crate) fn load_env(
    root: &Path,
    given: &BTreeMap<String, String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> BTreeMap<String, String> {
    let mut env = read_dotenv(root, diagnostics);
    env.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

fn read_dotenv(root: &Path, diagnostics: &mut Vec<Diagnostic>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let source = Arc::new(Source {
        file: ".env".into(),
        overlay: false,
    });
    let path = root.join(".env");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return env,
        Err(e) => {
            diagnostics.push(Loc::start_of(&source).error(format!("cannot read .env: {e}"), None));
            return env;
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let lines: Vec<&str> = text.lines().collect();
    let mut search_from = 0;
    // Each item consumes at least one line, so this bounds the loop whatever dotenvy does.
    for item in dotenvy::from_read_iter(text.as_bytes()).take(lines.len() + 1) {
        match item {
            Ok((key, value)) => {
                env.insert(key, value);
            }
            Err(dotenvy::Error::LineParse(line, index)) => {
                let first = line.lines().next().unwrap_or_default();
                let found = lines
                    .iter()
                    .skip(search_from)
                    .position(|l| *l == first)
                    .map(|p| p + search_from);
                if let Some(found) = found {
                    search_from = found + 1;
                }
                let loc = Loc {
                    source: Arc::clone(&source),
                    line: found.map_or(1, |f| f + 1),
                    column: index + 1,
                };
                diagnostics.push(loc.error(
                    format!("cannot parse .env line `{}`", first.trim()),
                    Some("write `NAME=value`, one per line".into()),
                ));
            }
            Err(e) => {
                diagnostics
                    .push(Loc::start_of(&source).error(format!("cannot read .env: {e}"), None));
                break;
            }
        }
    }
    env
}
