//! What Keel's agent protocols add to a run: the same run — the bench agent on the
//! `keel-mock-llm` server, one `read_file` round and a streamed text answer — made through
//! `/v1/chat/completions` (`stream: true`), AG-UI (`POST /api/agui/{agent}`), A2A
//! (`SendStreamingMessage` on `POST /a2a/{agent}`) and ACP (`keel acp` on stdio), one request
//! at a time, and what each protocol adds over `/v1` at the median.
//!
//! `keel serve` and the mock run as their own processes (as in `serve_load`), and so does
//! `keel acp`, started by this bench as an editor would start it, on the same workspace: ACP's
//! baseline is the same run through `/v1` of that `keel serve`, over another transport (pipes
//! instead of a loopback socket), so its difference is the protocol and the transport
//! together. The HTTP requests go over one kept-alive loopback connection (reqwest, HTTP/1.1)
//! and their SSE frames are read as they arrive. A fifth way, `/v1+session`, is `/v1` with
//! `X-Keel-Session` naming a new session: an A2A task without a context and an ACP prompt (each
//! in a session of its own here) are a session's first turn, and this shows what the session
//! costs apart from the protocol.
//!
//! Request `i` goes through every surface in turn, the order rotating with `i`, so all of them
//! see the same (shared, noisy) machine. For each request the bench takes, from sending it:
//! the *first event* (the first SSE frame; for ACP the first `session/update` line, which is
//! the tool call: ACP has no opening event), the *first text* (the first piece of the
//! answer: a content delta, `TEXT_MESSAGE_CONTENT`, A2A's `answer` artifact — sent whole, at
//! the end — or an `agent_message_chunk`) and the *end of run* (`[DONE]`, `RUN_FINISHED`, the
//! `TASK_STATE_COMPLETED` status update, the prompt's response). Each round prints p50 and p90
//! of the three per surface and the added latency (a surface's p50 minus `/v1`'s p50 of the
//! same round); the summary takes the median over the rounds. Every stream is checked (the
//! answer is the mock's text, the run ends as it should); a failed request is counted and the
//! bench exits non-zero. Timings are reported, never judged; when the HTTP surfaces' runs end
//! 30 ms or more after ACP's, a note says what that is (their streams waiting out the client's
//! delayed ACK: `keel serve`'s connections do not set `TCP_NODELAY`).
//!
//! ```sh
//! cargo build --release -p keel-test-support --bin keel-mock-llm
//! cargo bench -p keel-cli --bench protocols -- [--requests 200] [--rounds 5] [--warmup 20]
//!     [--latency-ms 0] [--keep]
//! ```
//!
//! The flags may also be given as `KEEL_BENCH_REQUESTS`, `KEEL_BENCH_ROUNDS`,
//! `KEEL_BENCH_WARMUP` and `KEEL_BENCH_LATENCY_MS` (`--keep` as `KEEL_BENCH_KEEP=1`).
//! `--latency-ms` is the mock's wait before each answer (0: the run is Keel's own time).
//! `KEEL_MOCK_LLM` names the mock binary; the workspace goes under the target directory (or
//! `KEEL_BENCH_DIR`) and is removed at the end unless `--keep` is given.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// The answer the mock gives once the tool result came back (`FINAL_TEXT` in `keel-mock-llm`).
const EXPECTED: &str = "Done: I read the file.";
/// What every surface asks.
const PROMPT: &str = "Read the README.";
const AGENT: &str = "bench";
/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type Result<T, E = String> = std::result::Result<T, E>;

#[path = "protocols/acp.rs"]
mod acp;
#[path = "protocols/http.rs"]
mod http;
// The flags, the child processes and the workspace, shared with `serve_load` (which uses
// all of it).
#[path = "serve_load/flags.rs"]
mod flags;
#[allow(dead_code)]
#[path = "serve_load/processes.rs"]
mod processes;
#[path = "protocols/report.rs"]
mod report;
#[path = "serve_load/stats.rs"]
mod stats;

use processes::{
    Guard, keel_binary, mock_binary, print_log_tail, spawn_listening, target_dir, write_workspace,
};
use report::{Round, Sample, Surface};

struct Options {
    requests: usize,
    rounds: usize,
    warmup: usize,
    latency_ms: u64,
    keep: bool,
}

fn parse_options() -> Result<Options> {
    let values = flags::read(&[
        ("--requests", "KEEL_BENCH_REQUESTS"),
        ("--rounds", "KEEL_BENCH_ROUNDS"),
        ("--warmup", "KEEL_BENCH_WARMUP"),
        ("--latency-ms", "KEEL_BENCH_LATENCY_MS"),
    ])?;
    let number = |flag: &str, default: u64, zero_ok: bool| -> Result<u64> {
        match values.get(flag).cloned().flatten() {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0 || zero_ok)
                .ok_or_else(|| format!("{flag} wants a positive number, got `{v}`")),
        }
    };
    Ok(Options {
        requests: number("--requests", 200, false)? as usize,
        rounds: number("--rounds", 5, false)? as usize,
        warmup: number("--warmup", 20, true)? as usize,
        latency_ms: number("--latency-ms", 0, true)?,
        keep: std::env::args().any(|a| a == "--keep")
            || std::env::var("KEEL_BENCH_KEEP").is_ok_and(|v| !v.is_empty() && v != "0"),
    })
}

/// Where the requests go.
struct Targets {
    client: reqwest::Client,
    /// `http://ADDR` of `keel serve`.
    base: String,
    acp: acp::Acp,
}

impl Targets {
    /// Request `n` through `surface`.
    async fn one(&mut self, surface: Surface, n: usize) -> Result<Sample> {
        let request = async {
            match surface {
                Surface::Acp => self.acp.prompt(PROMPT).await,
                _ => http::request(&self.client, &self.base, surface, n).await,
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, request)
            .await
            .unwrap_or_else(|_| Err(format!("no end of run in {REQUEST_TIMEOUT:?}")))
    }

    /// `requests` requests through every surface, interleaved: request `i` goes through the
    /// surfaces in turn, starting with the `i`-th (modulo their number). Failures are counted
    /// by what went wrong.
    async fn interleaved(&mut self, requests: usize, start: usize) -> Round {
        let mut round = Round::default();
        for i in 0..requests {
            for k in 0..Surface::ALL.len() {
                let surface = Surface::ALL[(i + k) % Surface::ALL.len()];
                match self.one(surface, start + i).await {
                    Ok(sample) => round.samples.entry(surface).or_default().push(sample),
                    Err(error) => {
                        *round
                            .errors
                            .entry(format!("{}: {error}", surface.name()))
                            .or_insert(0) += 1;
                    }
                }
            }
        }
        round
    }
}

async fn bench(
    options: &Options,
    targets: &mut Targets,
    serve: &mut Guard,
    mock: &mut Guard,
) -> Result<bool> {
    let mut failed = 0;
    let mut next = 0;
    if options.warmup > 0 {
        let warm = targets.interleaved(options.warmup, next).await;
        next += options.warmup;
        failed += warm.failed();
        warm.print_errors();
        println!("warm-up: {} requests through each surface", options.warmup);
    }
    let mut rounds = Vec::with_capacity(options.rounds);
    for number in 1..=options.rounds {
        serve.check_alive()?;
        mock.check_alive()?;
        targets.acp.check_alive()?;
        let round = targets.interleaved(options.requests, next).await;
        next += options.requests;
        failed += round.failed();
        println!();
        round.print(&format!("round {number}"));
        round.print_errors();
        rounds.push(round.figures());
    }
    println!();
    let summary = report::print_summary(&rounds);
    let end = |surface| report::end_p50(&summary, surface).unwrap_or(f64::NAN);
    if end(Surface::V1) - end(Surface::Acp) > 30.0 {
        // Not a verdict: what the figures above mean.
        println!(
            "note: /v1's runs end {:.1} ms after the request, ACP's {:.1} ms: the HTTP streams wait for \
             the client's delayed ACK after their first frame (keel serve's connections without \
             TCP_NODELAY), so their end-of-run differences are that timer's; --latency-ms 50 hides it",
            end(Surface::V1),
            end(Surface::Acp),
        );
    }
    println!(
        "machine load average at the end: {}",
        report::load_average()
    );
    if failed > 0 {
        println!("FAILED: {failed} request(s) failed (warm-up included)");
    } else {
        println!("no errors");
    }
    Ok(failed == 0)
}

fn run() -> Result<bool> {
    let options = parse_options()?;
    let mut mock_cmd = Command::new(mock_binary()?);
    mock_cmd
        .args(["--listen", "127.0.0.1:0", "--latency-ms"])
        .arg(options.latency_ms.to_string())
        .stderr(Stdio::null());
    let (mut mock, mock_addr) = spawn_listening("keel-mock-llm", mock_cmd)?;
    let mock_url = format!("http://{mock_addr}");

    let parent = std::env::var("KEEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| target_dir());
    std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let ws = tempfile::Builder::new()
        .prefix("protocols-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create the workspace: {e}"))?;
    write_workspace(ws.path(), &mock_url, Some(1024))?;

    let serve_log = ws.path().join("serve.log");
    let acp_log = ws.path().join("acp.log");
    let log = File::create(&serve_log).map_err(|e| format!("{}: {e}", serve_log.display()))?;
    let mut serve_cmd = Command::new(keel_binary());
    serve_cmd
        .arg("serve")
        .arg("-w")
        .arg(ws.path())
        .args(["--listen", "127.0.0.1:0"])
        .stderr(log);
    let (mut serve, addr) = spawn_listening("keel serve", serve_cmd)?;

    println!(
        "protocols: the same run (agent `{AGENT}`: a read_file round, then a streamed text answer) \
         through /v1 (and /v1 with a new session), AG-UI, A2A and ACP, one request at a time; {} requests per surface per round, \
         {} round(s) after {} warm-up; mock latency {} ms per answer",
        options.requests, options.rounds, options.warmup, options.latency_ms,
    );
    println!("machine: {}", report::machine());
    println!(
        "keel serve (pid {}) on {addr}, mock (pid {}) at {mock_url}; workspace {}",
        serve.pid(),
        mock.pid(),
        ws.path().display()
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start tokio: {e}"))?;
    let outcome = rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .http1_only()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let log = File::create(&acp_log).map_err(|e| format!("{}: {e}", acp_log.display()))?;
        let acp = acp::Acp::start(&keel_binary(), ws.path(), AGENT, log).await?;
        println!("keel acp (pid {}) on stdio, the same workspace", acp.pid());
        let mut targets = Targets {
            client,
            base: format!("http://{addr}"),
            acp,
        };
        let outcome = tokio::select! {
            outcome = bench(&options, &mut targets, &mut serve, &mut mock) => outcome,
            _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
        };
        targets.acp.close().await;
        outcome
    });
    drop(rt);
    if !matches!(outcome, Ok(true)) {
        print_log_tail("keel serve", &serve_log);
        print_log_tail("keel acp", &acp_log);
    }
    drop(serve);
    drop(mock);
    if options.keep {
        println!("workspace kept: {}", ws.keep().display());
    }
    outcome
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("protocols: {e}");
            ExitCode::FAILURE
        }
    }
}
