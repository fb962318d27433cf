//! [`OtlpReceiver`]: a real OTLP receiver for the tests of Keel's OpenTelemetry export.
//!
//! It runs `fixtures/otlp_receiver.py` with the venv of [`otlp_receiver_python`], which decodes
//! OTLP/HTTP protobuf (`/v1/traces`, `/v1/metrics`, gzip or not) and OTLP/gRPC with the
//! official protobuf definitions (PyPI `opentelemetry-proto`) and prints one JSON line per span
//! and per metric data point (the script's docstring and the crate README give their shapes).
//! A background thread collects those lines as they arrive; the `wait_for_*` methods block on
//! a condition variable until a test's condition holds, or panic after its timeout with what
//! did arrive. The receiver process is killed when the `OtlpReceiver` is dropped, and exits on
//! its own when the test process goes (its stdin closes).

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::test_clients::{otlp_receiver_python, otlp_receiver_script};

/// A running `fixtures/otlp_receiver.py` on 127.0.0.1 and the lines it printed so far.
pub struct OtlpReceiver {
    child: Child,
    http: SocketAddr,
    grpc: SocketAddr,
    received: Arc<Received>,
}

/// The lines after the first, shared with the thread that reads them.
#[derive(Default)]
struct Received {
    state: Mutex<Lines>,
    changed: Condvar,
}

#[derive(Default)]
struct Lines {
    lines: Vec<Value>,
    /// The receiver's stdout closed: nothing more will arrive.
    ended: bool,
}

impl Received {
    fn lock(&self) -> MutexGuard<'_, Lines> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, change: impl FnOnce(&mut Lines)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

impl OtlpReceiver {
    /// Starts a receiver that answers every export with success.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a receiver with the script's flags: `--stall` (never answer) or `--status N`
    /// (answer every HTTP export with status N, every gRPC export with UNAVAILABLE).
    ///
    /// # Panics
    /// When the venv cannot be installed or the receiver does not print its ports.
    pub fn start_with(args: &[&str]) -> Self {
        let mut child = Command::new(otlp_receiver_python())
            .arg(otlp_receiver_script())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start the OTLP receiver: {e}"));
        let Some(stdout) = child.stdout.take() else {
            panic!("the OTLP receiver has no stdout");
        };
        let mut stdout = BufReader::new(stdout);
        let (http, grpc) = read_ports(&mut stdout).unwrap_or_else(|why| {
            let _ = child.kill();
            panic!(
                "the OTLP receiver did not start: {why}; exit: {:?}",
                child.wait()
            );
        });
        let received = Arc::new(Received::default());
        let collector = Arc::clone(&received);
        std::thread::spawn(move || collect(stdout, &collector));
        Self {
            child,
            http: SocketAddr::from((Ipv4Addr::LOCALHOST, http)),
            grpc: SocketAddr::from((Ipv4Addr::LOCALHOST, grpc)),
            received,
        }
    }

    /// The OTLP/HTTP endpoint, `http://127.0.0.1:PORT` (exporters add `/v1/traces` and
    /// `/v1/metrics`).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http)
    }

    /// The OTLP/gRPC endpoint, `http://127.0.0.1:PORT`.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// The OTLP/HTTP listener's address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
    }

    /// The OTLP/gRPC listener's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
    }

    /// The span lines received so far, in order of arrival.
    pub fn spans(&self) -> Vec<Value> {
        of_signal(&self.received.lock().lines, "span")
    }

    /// The metric data point lines received so far, in order of arrival.
    pub fn metrics(&self) -> Vec<Value> {
        of_signal(&self.received.lock().lines, "metric")
    }

    /// Blocks until `ready` holds for the span lines received so far, and returns them.
    /// It blocks the thread: call it from a plain `#[test]`, a multi-thread tokio runtime or
    /// `spawn_blocking`, never where it would stop the exporter it waits for.
    ///
    /// # Panics
    /// After `timeout`, or when the receiver exits first, naming `what` and listing the spans
    /// that did arrive.
    #[track_caller]
    pub fn wait_for_spans(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        self.wait_for("span", what, timeout, ready)
    }

    /// [`wait_for_spans`](Self::wait_for_spans) for the metric data point lines.
    #[track_caller]
    pub fn wait_for_metrics(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        self.wait_for("metric", what, timeout, ready)
    }

    #[track_caller]
    fn wait_for(
        &self,
        signal: &str,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        let mut state = self.received.lock();
        loop {
            let lines = of_signal(&state.lines, signal);
            if ready(&lines) {
                return lines;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if state.ended || left.is_zero() {
                let why = match state.ended {
                    true => "the OTLP receiver exited".to_owned(),
                    false => format!("not there after {timeout:?}"),
                };
                let dump: Vec<String> = lines.iter().map(Value::to_string).collect();
                panic!(
                    "{what}: {why}; it received {} {signal} lines:\n{}",
                    lines.len(),
                    dump.join("\n")
                );
            }
            state = match self.received.changed.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first span line named `name`, if any.
pub fn span_named<'a>(spans: &'a [Value], name: &str) -> Option<&'a Value> {
    spans.iter().find(|s| s["name"] == name)
}

/// The lines of one signal (`span`, `metric`).
fn of_signal(lines: &[Value], signal: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["signal"] == signal)
        .cloned()
        .collect()
}

/// The ports of the receiver's first line, `{"http": PORT, "grpc": PORT}`.
fn read_ports(stdout: &mut impl BufRead) -> Result<(u16, u16), String> {
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("cannot read its stdout: {e}"))?;
    let ports: Value =
        serde_json::from_str(&line).map_err(|e| format!("its first line {line:?}: {e}"))?;
    let port = |key: &str| {
        ports[key]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| format!("its first line {line:?} has no {key} port"))
    };
    Ok((port("http")?, port("grpc")?))
}

/// Reads the receiver's lines until its stdout closes. A line that is not JSON is kept as a
/// string, so a wait that fails shows it.
fn collect(stdout: impl BufRead, received: &Received) {
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(_) => Value::String(line),
        };
        received.update(|state| state.lines.push(value));
    }
    received.update(|state| state.ended = true);
}
