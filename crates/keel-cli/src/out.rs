//! Terminal output. The only place that writes to stdout and stderr; write errors (a closed
//! pipe) are ignored rather than panicking.

use std::io::Write;

/// Writes text to stdout without a newline and flushes (streamed answers).
pub(crate) fn stdout_raw(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes a line to stdout.
pub(crate) fn line(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// Writes a line to stderr.
pub(crate) fn status(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// Writes an error to stderr.
pub(crate) fn error(text: &str) {
    status(&format!("error: {text}"));
}

/// Writes a prompt to stderr without a newline.
pub(crate) fn prompt(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Lines of a table: each column as wide as its widest cell (header included, counted in
/// characters) and two spaces apart, so a long value (an agent's name) never shifts the
/// columns after it; the columns in `right` are aligned right, the last is not padded.
pub(crate) fn table(
    headers: &[&str],
    right: &[usize],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> Vec<String> {
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    let rows: Vec<Vec<String>> = std::iter::once(header).chain(rows).collect();
    let mut widths = vec![0; headers.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let last = headers.len().saturating_sub(1);
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let width = widths.get(i).copied().unwrap_or(0);
                    let pad = width.saturating_sub(cell.chars().count());
                    match (i == last, right.contains(&i)) {
                        (true, false) => cell.clone(),
                        (_, true) => format!("{}{cell}", " ".repeat(pad)),
                        (false, false) => format!("{cell}{}", " ".repeat(pad)),
                    }
                })
                .collect();
            cells.join("  ")
        })
        .collect()
}
