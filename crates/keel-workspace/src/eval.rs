//! `Eval` documents beyond their schema: the target must exist, each grader must have the
//! fields its kind needs and no other, its pattern, schema, pointer and bounds must be usable,
//! and the cases of a `casesFile` are read here (one JSON object per line), each problem
//! reported at its file, line and column.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::documents::{Document, Documents, Kind};
use crate::suggest::closest;
use crate::yaml::{Loc, Node, Seg, Source};
use crate::{Diagnostic, EvalCase, EvalSpec, GraderKind, GraderSpec};

/// Reads the `casesFile` of each eval (with its document) into its cases and checks every
/// eval.
pub(crate) fn load_evals<'a>(
    root: &Path,
    docs: &Documents,
    evals: impl IntoIterator<Item = (&'a Document, &'a mut EvalSpec)>,
    out: &mut Vec<Diagnostic>,
) {
    for (doc, spec) in evals {
        let Some(tree) = &doc.spec else {
            continue;
        };
        let mut check = EvalCheck {
            docs,
            doc,
            out: &mut *out,
        };
        if doc.name == "results" {
            check.push(
                &doc.name_loc,
                "an eval cannot be named `results`: /api/evals/results lists eval results".into(),
                Some("choose another name".into()),
            );
        }
        check.target(spec, tree);
        let mut places: Vec<Loc> = Vec::with_capacity(spec.cases.len());
        for (i, case) in spec.cases.iter_mut().enumerate() {
            let node = tree.deepest(&[Seg::Key("cases".into()), Seg::Index(i)]);
            case.source = Some(node.loc.short());
            places.push(node.loc.clone());
        }
        for (i, grader) in spec.graders.iter().enumerate() {
            let path = [Seg::Key("graders".into()), Seg::Index(i)];
            check.grader(grader, &|field| yaml_at(tree, &path, field));
        }
        for (i, case) in spec.cases.iter().enumerate() {
            for (j, grader) in case.expect.iter().enumerate() {
                let path = [
                    Seg::Key("cases".into()),
                    Seg::Index(i),
                    Seg::Key("expect".into()),
                    Seg::Index(j),
                ];
                check.grader(grader, &|field| yaml_at(tree, &path, field));
            }
        }
        if let Some(file) = spec.cases_file.clone() {
            let at = tree.deepest(&[Seg::Key("casesFile".into())]).loc.clone();
            places.extend(check.cases_file(root, &file, &at, spec));
        }
        check.cases(spec, tree, &places);
        for (case, at) in spec.cases.iter().zip(&places) {
            if let Some(file) = &case.cassette
                && !root.join(file).is_file()
            {
                check.push(
                    at,
                    format!("the cassette `{file}` of a case of {} is not a file", doc.label()),
                    Some("a cassette is relative to the workspace folder; `keel eval capture --cassettes DIR` writes them".into()),
                );
            }
        }
    }
}

/// Where `field` of the grader at `path` is written (the grader itself without one).
fn yaml_at(tree: &Node, path: &[Seg], field: Option<&str>) -> Loc {
    let mut full = path.to_vec();
    if let Some(field) = field {
        full.push(Seg::Key(field.to_owned()));
    }
    tree.deepest(&full).loc.clone()
}

struct EvalCheck<'a> {
    docs: &'a Documents,
    doc: &'a Document,
    out: &'a mut Vec<Diagnostic>,
}

impl EvalCheck<'_> {
    fn push(&mut self, loc: &Loc, message: String, hint: Option<String>) {
        self.out.push(loc.error(message, hint));
    }

    fn target(&mut self, spec: &EvalSpec, tree: &Node) {
        let target = &spec.target;
        let at = |key: &str| {
            tree.deepest(&[Seg::Key("target".into()), Seg::Key(key.into())])
                .loc
                .clone()
        };
        let (kind, name, key) = match (&target.agent, &target.workflow) {
            (Some(agent), None) => (Kind::Agent, agent, "agent"),
            (None, Some(workflow)) => (Kind::Workflow, workflow, "workflow"),
            (agent, _) => {
                let both = agent.is_some();
                self.push(
                    &at(if both { "workflow" } else { "target" }),
                    format!(
                        "the target of {} names {}",
                        self.doc.label(),
                        if both { "both an agent and a workflow" } else { "neither an agent nor a workflow" }
                    ),
                    Some("write exactly one of `target: {agent: NAME}` and `target: {workflow: NAME}`".into()),
                );
                return;
            }
        };
        if !self.docs.contains(kind, name) {
            let hint = closest(name, self.docs.names(kind), 2)
                .map(|near| format!("did you mean `{near}`?"))
                .unwrap_or_else(|| format!("add a `kind: {kind}` document named `{name}`"));
            self.push(
                &at(key),
                format!(
                    "{} evaluates {key} `{name}`, which is not defined",
                    self.doc.label()
                ),
                Some(hint),
            );
        }
    }

    /// The problems of one grader, each at the field it concerns (`at(None)`: the grader).
    fn grader(&mut self, grader: &GraderSpec, at: &dyn Fn(Option<&str>) -> Loc) {
        let kind = grader.kind.as_str();
        let (required, optional) = grader.kind.fields();
        let set = grader.fields_set();
        for field in required {
            if !set.contains(field) {
                self.push(
                    &at(None),
                    format!("a `{kind}` grader needs `{field}`"),
                    Some(grader_hint(grader.kind).into()),
                );
            }
        }
        for field in &set {
            if !required.contains(field) && !optional.contains(field) {
                self.push(
                    &at(Some(field)),
                    format!("`{field}` does not apply to a `{kind}` grader"),
                    Some(grader_hint(grader.kind).into()),
                );
            }
        }
        if !grader.weight.is_finite() || grader.weight < 0.0 {
            self.push(
                &at(Some("weight")),
                "a grader's weight must be 0 or more".into(),
                None,
            );
        }
        for problem in value_problems(grader) {
            self.push(&at(Some(problem.0)), problem.1, problem.2);
        }
        if let Some(model) = &grader.model
            && grader.kind == GraderKind::Judge
            && !self.docs.contains(Kind::Model, model)
        {
            let hint = closest(model, self.docs.names(Kind::Model), 2)
                .map(|near| format!("did you mean `{near}`?"))
                .unwrap_or_else(|| format!("add a `kind: Model` document named `{model}`"));
            self.push(
                &at(Some("model")),
                format!("the judge model `{model}` is not defined"),
                Some(hint),
            );
        }
    }

    /// Reads the JSONL cases of `file` (relative to the workspace folder) after the inline
    /// ones; answers where each case read is written.
    fn cases_file(&mut self, root: &Path, file: &str, at: &Loc, spec: &mut EvalSpec) -> Vec<Loc> {
        let mut places = Vec::new();
        let path = root.join(file);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                self.push(
                    at,
                    format!(
                        "cannot read the cases file `{file}` of {}: {e}",
                        self.doc.label()
                    ),
                    Some("casesFile is relative to the workspace folder".into()),
                );
                return places;
            }
        };
        let source = Arc::new(Source {
            file: PathBuf::from(file),
            overlay: false,
        });
        let loc = |line: usize, column: usize| Loc {
            source: Arc::clone(&source),
            line,
            column,
        };
        for (i, line) in text.lines().enumerate() {
            let number = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let mut case: EvalCase = match serde_json::from_str(line) {
                Ok(case) => case,
                Err(e) => {
                    self.push(
                        &loc(number, e.column().max(1)),
                        format!("case on line {number} of `{file}`: {e}"),
                        Some(
                            "each line is one JSON object: {\"input\": …, \"expect\": [graders]}"
                                .into(),
                        ),
                    );
                    continue;
                }
            };
            for grader in &case.expect {
                let at = |field: Option<&str>| {
                    let column = field
                        .and_then(|f| line.find(&format!("\"{f}\"")))
                        .or_else(|| line.find("\"expect\""))
                        .map_or(1, |c| line[..c].chars().count() + 1);
                    loc(number, column)
                };
                self.grader(grader, &at);
            }
            case.source = Some(format!("{file}:{number}"));
            spec.cases.push(case);
            places.push(loc(number, 1));
        }
        places
    }

    /// Every eval has cases, each named once and graded by something.
    fn cases(&mut self, spec: &EvalSpec, tree: &Node, places: &[Loc]) {
        let label = self.doc.label();
        if spec.cases.is_empty() {
            self.push(
                &tree.loc,
                format!("{label} has no cases"),
                Some("add `cases:` or `casesFile:` (one JSON case per line)".into()),
            );
            return;
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, case) in spec.cases.iter().enumerate() {
            let at = places.get(i).unwrap_or(&tree.loc).clone();
            if let Some(name) = &case.name {
                if seen.contains(&name.as_str()) {
                    self.push(
                        &at,
                        format!("{label} has two cases named `{name}`"),
                        Some("give each case its own name; comparisons match cases by name".into()),
                    );
                }
                seen.push(name);
            }
            if spec.graders.is_empty() && case.expect.is_empty() {
                self.push(
                    &at,
                    format!(
                        "case {} of {label} has no graders",
                        case.name.as_deref().unwrap_or(&(i + 1).to_string())
                    ),
                    Some("add `graders:` to the eval or `expect:` to the case".into()),
                );
            }
            if spec.target.agent.is_some() && !case.input.is_string() {
                self.push(
                    &at,
                    format!(
                        "the input of case {} is not text, and an agent takes text",
                        i + 1
                    ),
                    None,
                );
            }
        }
    }
}

fn grader_hint(kind: GraderKind) -> &'static str {
    match kind {
        GraderKind::Equals => "e.g. `{kind: equals, value: \"Paris\"}` or with `pointer: /city`",
        GraderKind::Contains => "e.g. `{kind: contains, value: \"refund\", ignoreCase: true}`",
        GraderKind::Regex => "e.g. `{kind: regex, pattern: \"^Order #[0-9]+\"}`",
        GraderKind::JsonSchema => {
            "e.g. `{kind: jsonSchema, schema: {type: object, required: [city]}}`"
        }
        GraderKind::JsonPointer => "e.g. `{kind: jsonPointer, pointer: /city, value: Paris}`",
        GraderKind::ToolCalled => {
            "e.g. `{kind: toolCalled, tool: read_file, args: {path: notes.txt}}`"
        }
        GraderKind::NoToolCalled => "e.g. `{kind: noToolCalled, tool: write_file}`",
        GraderKind::FinishReason => "e.g. `{kind: finishReason, value: stop}`",
        GraderKind::MaxSteps => "e.g. `{kind: maxSteps, value: 4}`",
        GraderKind::MaxCost => "e.g. `{kind: maxCost, value: 0.02}`",
        GraderKind::MaxLatency => "e.g. `{kind: maxLatency, value: 5s}`",
        GraderKind::Judge => {
            "e.g. `{kind: judge, model: judge, rubric: \"Is the answer polite?\", scale: 5}`"
        }
        GraderKind::Command => "e.g. `{kind: command, command: [python3, grade.py], timeout: 10s}`",
    }
}

/// The field, message and hint of each problem with a grader's values.
fn value_problems(grader: &GraderSpec) -> Vec<(&'static str, String, Option<String>)> {
    let mut problems = Vec::new();
    let kind = grader.kind.as_str();
    let value = grader.value.as_ref();
    match grader.kind {
        GraderKind::Contains if value.is_some_and(|v| !v.is_string()) => {
            problems.push(("value", "a `contains` grader's value is text".into(), None));
        }
        GraderKind::Regex => {
            if let Some(pattern) = &grader.pattern
                && let Err(e) = regex::Regex::new(pattern)
            {
                problems.push(("pattern", format!("invalid regular expression: {e}"), None));
            }
        }
        GraderKind::JsonSchema => {
            if let Some(schema) = &grader.schema
                && let Err(e) = jsonschema::validator_for(schema)
            {
                problems.push(("schema", format!("not a usable JSON Schema: {e}"), None));
            }
        }
        GraderKind::FinishReason => match value.map(Value::as_str) {
            Some(Some(reason)) if keel_types::FinishReason::NAMES.contains(&reason) => {}
            Some(Some(reason)) => problems.push((
                "value",
                format!("`{reason}` is not a finish reason"),
                Some(format!(
                    "one of: {}",
                    keel_types::FinishReason::NAMES.join(", ")
                )),
            )),
            Some(None) => problems.push(("value", "a finish reason is text".into(), None)),
            None => {}
        },
        GraderKind::MaxSteps if value.is_some_and(|v| v.as_u64().is_none_or(|n| n == 0)) => {
            problems.push((
                "value",
                "`maxSteps` is a whole number of steps, 1 or more".into(),
                None,
            ));
        }
        GraderKind::MaxCost if value.is_some_and(|v| v.as_f64().is_none_or(|n| n < 0.0)) => {
            problems.push(("value", "`maxCost` is an amount, 0 or more".into(), None));
        }
        GraderKind::MaxLatency if value.is_some_and(|v| latency_ms(v).is_none()) => {
            problems.push((
                "value",
                "`maxLatency` is a duration like `2s` or `500ms`".into(),
                None,
            ));
        }
        GraderKind::ToolCalled if grader.args.as_ref().is_some_and(|a| !a.is_object()) => {
            problems.push((
                "args",
                "`args` is an object: the arguments the call must include".into(),
                None,
            ));
        }
        GraderKind::Judge
            if grader
                .rubric
                .as_deref()
                .is_some_and(|r| r.trim().is_empty()) =>
        {
            problems.push(("rubric", "the rubric is empty".into(), None));
        }
        _ => {}
    }
    if let Some(pointer) = &grader.pointer
        && !pointer.is_empty()
        && !pointer.starts_with('/')
    {
        problems.push((
            "pointer",
            format!("`{pointer}` is not a JSON Pointer"),
            Some(format!("a pointer starts with `/`, e.g. `/{pointer}`; `{kind}` reads the answer's JSON value")),
        ));
    }
    problems
}

/// A `maxLatency` value in milliseconds: a duration (`2s`, `1m 30s`) or a number of ms.
pub fn latency_ms(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => humantime::parse_duration(s)
            .ok()
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        _ => None,
    }
}
