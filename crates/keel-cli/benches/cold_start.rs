//! Cold start: `keel run` on the quickstart workspace, from spawning the process to the first
//! byte of its first model request arriving at a local listener (the quickstart's model
//! pointed at it, an OpenAI-compatible endpoint). The listener answers nothing; the process is
//! killed once the request arrived, so only the start is measured: loading the binary, the
//! workspace (YAML, schemas, checks), the store (opening `.keel/keel.db`, recovery), the
//! runtime and the run's first steps up to the model call.
//!
//! ```sh
//! cargo bench -p keel-cli --bench cold_start      # KEEL_BENCH_ROUNDS=N (default 30)
//! ```
//!
//! Prints the first start (a new workspace: the store is created and migrated) and the median,
//! p90 and minimum of the following starts (the store exists). The workspace goes under the
//! target directory (or `KEEL_BENCH_DIR`).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;

use keel_test_support::bench_dir;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = bench_dir().join("cold_start");
    let _ = std::fs::remove_dir_all(&dir);
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart"),
        &dir,
    );
    std::fs::write(
        dir.join("config/models.yaml"),
        format!(
            "apiVersion: keel/v1\nkind: Model\nmetadata: {{ name: offline }}\nspec:\n  \
             provider: openai\n  baseUrl: http://127.0.0.1:{port}/v1\n  model: bench\n"
        ),
    )
    .unwrap();
    let keel = env!("CARGO_BIN_EXE_keel");
    let mut starts = Vec::with_capacity(rounds + 1);
    for _ in 0..=rounds {
        starts.push(start_once(keel, &dir, &listener));
    }
    let first = starts.remove(0);
    starts.sort();
    let pick = |p: f64| starts[((starts.len() - 1) as f64 * p).round() as usize];
    println!(
        "cold_start: keel run on the quickstart, process spawn to its first model request ({} rounds)",
        starts.len()
    );
    println!("  new workspace (store created): {:.1} ms", ms(first));
    println!(
        "  existing store: median {:.1} ms, p90 {:.1} ms, min {:.1} ms",
        ms(pick(0.5)),
        ms(pick(0.9)),
        ms(starts[0])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Spawns `keel run` and waits for its first request's first bytes.
fn start_once(keel: &str, dir: &Path, listener: &TcpListener) -> Duration {
    let spawned = Instant::now();
    let mut child = Command::new(keel)
        .args(["run", "-w"])
        .arg(dir)
        .arg("What is in this workspace?")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KEEL_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn keel");
    let (mut stream, _) = listener.accept().unwrap();
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).unwrap();
    let elapsed = spawned.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".keel" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
