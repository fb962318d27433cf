//! An eval result as a JUnit XML report, for CI: one test suite per eval run, one test case
//! per case run, a failing case as `<failure>`, a case that could not be graded as `<error>`.

use std::fmt::Write;

use keel_types::eval::EvalResult;

/// The JUnit XML of `result`.
pub fn junit(result: &EvalResult) -> String {
    let runs = result.cases.len();
    let errors = result.cases.iter().filter(|c| c.error.is_some()).count();
    let failures = result
        .cases
        .iter()
        .filter(|c| !c.passed && c.error.is_none())
        .count();
    let seconds = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    let total: u64 = result.cases.iter().map(|c| c.latency_ms).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"keel eval\" tests=\"{runs}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{}\">",
        seconds(total)
    );
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{}\" id=\"{}\" tests=\"{runs}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{}\" timestamp=\"{}\">",
        escape(&result.eval),
        escape(&result.id),
        seconds(total),
        escape(&result.started_at)
    );
    let _ = writeln!(xml, "    <properties>");
    for (name, value) in [
        ("version", result.version.as_str()),
        ("workspaceDigest", result.workspace_digest.as_str()),
        ("target", result.target.as_str()),
    ] {
        let _ = writeln!(
            xml,
            "      <property name=\"{name}\" value=\"{}\"/>",
            escape(value)
        );
    }
    let _ = writeln!(xml, "    </properties>");
    for case in &result.cases {
        let name = if result.options.repeat > 1 {
            format!("{} #{}", case.case, case.attempt + 1)
        } else {
            case.case.clone()
        };
        let _ = write!(
            xml,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            escape(&name),
            escape(&result.eval),
            seconds(case.latency_ms)
        );
        let graders: Vec<String> = case
            .graders
            .iter()
            .map(|g| {
                format!(
                    "{} {}: {}{}",
                    if g.passed { "PASS" } else { "FAIL" },
                    g.name,
                    g.detail,
                    g.error
                        .as_ref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        let body = format!(
            "run {} · score {:.2} · {}\n{}",
            case.request_id.as_deref().unwrap_or("none"),
            case.score,
            case.status,
            graders.join("\n")
        );
        match (&case.error, case.passed) {
            (Some(error), _) => {
                let _ = writeln!(
                    xml,
                    ">\n      <error message=\"{}\" type=\"not graded\">{}</error>\n    </testcase>",
                    escape(error),
                    escape(&body)
                );
            }
            (None, false) => {
                let _ = writeln!(
                    xml,
                    ">\n      <failure message=\"score {:.2} below {:.2}\" type=\"failed\">{}</failure>\n    </testcase>",
                    case.score,
                    result.pass_score,
                    escape(&body)
                );
            }
            (None, true) => {
                let _ = writeln!(
                    xml,
                    ">\n      <system-out>{}</system-out>\n    </testcase>",
                    escape(&body)
                );
            }
        }
    }
    let _ = writeln!(xml, "  </testsuite>\n</testsuites>");
    xml
}

/// Text for XML attributes and content; characters XML 1.0 cannot hold become `?`.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}
