//! Terminal output. The only place that writes to stdout and stderr; write errors (a closed
//! pipe) are ignored rather than panicking.

use std::io::Write;

/// Writes text to stdout without a newline and flushes (streamed answers).
pub fn stdout_raw(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes a line to stdout.
pub fn line(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// Writes a line to stderr.
pub fn status(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// Writes an error to stderr.
pub fn error(text: &str) {
    status(&format!("error: {text}"));
}

/// Writes a prompt to stderr without a newline.
pub fn prompt(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}
