//! Real counterparts the tests talk to (official clients, MCP servers), installed on first use
//! from the package registries into `target/test-clients`, so `cargo nextest run` works on a
//! fresh machine with `node`/`npm` and `python3`. Test processes run in parallel: each install
//! holds an exclusive file lock, so it happens once and nobody uses a half-installed folder.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/test-clients` of this workspace.
pub fn clients_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-clients");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Runs `install` under the lock `name.lock` unless `ready` says it is not needed.
fn install_once(name: &str, ready: impl Fn() -> bool, install: impl FnOnce()) {
    if ready() {
        return;
    }
    let lock_path = clients_dir().join(format!("{name}.lock"));
    let lock =
        File::create(&lock_path).unwrap_or_else(|e| panic!("create {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", lock_path.display()));
    if !ready() {
        install();
    }
    drop(lock);
}

fn must(command: &mut Command, what: &str) {
    let status = command.status().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}

/// A folder whose `node_modules` holds `packages` (npm specs such as
/// `@modelcontextprotocol/server-everything@2026.8.31`), installed once under
/// `target/test-clients/<name>`. Bins are in `<folder>/node_modules/.bin`.
pub fn npm_packages(name: &str, packages: &[&str]) -> PathBuf {
    let prefix = clients_dir().join(name);
    let marker = prefix.join(".installed");
    let wanted = packages.join("\n");
    let ready = || std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted);
    install_once(name, ready, || {
        std::fs::create_dir_all(&prefix)
            .unwrap_or_else(|e| panic!("create {}: {e}", prefix.display()));
        must(
            Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .args(packages),
            &format!("npm install {wanted}"),
        );
        std::fs::write(&marker, &wanted).unwrap_or_else(|e| panic!("write marker: {e}"));
    });
    prefix
}

/// The Python of a venv `target/test-clients/<name>` with `requirements` pip-installed once.
pub fn python_venv(name: &str, requirements: &[&str]) -> PathBuf {
    let venv = clients_dir().join(name);
    let marker = venv.join(".installed");
    let wanted = requirements.join("\n");
    let ready = || std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted);
    install_once(name, ready, || {
        must(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        must(
            Command::new(venv.join("bin/pip"))
                .args(["install", "-q"])
                .args(requirements),
            &format!("pip install {}", requirements.join(" ")),
        );
        std::fs::write(&marker, &wanted).unwrap_or_else(|e| panic!("write marker: {e}"));
    });
    venv.join("bin/python")
}

/// LangGraph, DeepAgents and what their agents use to reach Keel (the OpenAI chat model and
/// the MCP adapters), as `examples/adapters/*/requirements.txt` pin them.
pub const LANGGRAPH: &[&str] = &[
    "langgraph==1.2.24",
    "deepagents==0.7.32",
    "langchain-openai==1.7.4",
    "langchain-mcp-adapters==0.3.2",
];

/// [`LANGGRAPH`] in the venv `target/test-clients/langgraph`; returns its Python.
pub fn langgraph() -> PathBuf {
    python_venv("langgraph", LANGGRAPH)
}

/// The OpenAI Agents SDK for JavaScript, as `examples/adapters/openai-agents-js/package.json`
/// pins it.
pub const OPENAI_AGENTS_JS: &[&str] = &["@openai/agents@0.20.0", "zod@4.6.7"];

/// [`OPENAI_AGENTS_JS`] under `target/test-clients/openai-agents-js`; returns the folder
/// whose `node_modules` holds it.
pub fn openai_agents_js() -> PathBuf {
    npm_packages("openai-agents-js", OPENAI_AGENTS_JS)
}

/// The official Anthropic Python SDK, checked against the mock's Messages API answers.
pub const ANTHROPIC_PYTHON: &str = "anthropic==2.14.0";

/// [`ANTHROPIC_PYTHON`] in the venv `target/test-clients/anthropic`; returns its Python.
pub fn anthropic_python() -> PathBuf {
    python_venv("anthropic", &[ANTHROPIC_PYTHON])
}

/// The official Anthropic TypeScript SDK, checked against the mock's Messages API answers.
pub const ANTHROPIC_NODE: &str = "@anthropic-ai/sdk@1.14.0";

/// [`ANTHROPIC_NODE`] under `target/test-clients/anthropic-node`; returns the folder whose
/// `node_modules` holds it.
pub fn anthropic_node() -> PathBuf {
    npm_packages("anthropic-node", &[ANTHROPIC_NODE])
}

/// The official Python MCP SDK the tests and the MCP benchmark use, pinned (its client API
/// changed at 2.0).
pub const MCP_PYTHON_SDK: &str = "mcp==2.3.0";

/// The official OpenAI Python client, in the venv `target/test-clients/python`; returns its
/// Python.
pub fn openai_python() -> PathBuf {
    python_venv("python", &["openai>=1,<4"])
}

/// The official OpenAI JavaScript client, in `target/test-clients/node`; returns the folder
/// whose `node_modules` holds it.
pub fn openai_node() -> PathBuf {
    npm_packages("node", &["openai@4"])
}

/// LangChain's OpenAI chat model (`ChatOpenAI`), pinned.
pub const LANGCHAIN_OPENAI: &str = "langchain-openai==1.7.4";

/// LangChain's `ChatOpenAI` ([`LANGCHAIN_OPENAI`]), in the venv `target/test-clients/langchain`;
/// returns its Python.
pub fn langchain_openai() -> PathBuf {
    python_venv("langchain", &[LANGCHAIN_OPENAI])
}

/// The OpenAI Agents SDK, pinned.
pub const OPENAI_AGENTS: &str = "openai-agents==0.24.0";

/// The OpenAI Agents SDK ([`OPENAI_AGENTS`]), in the venv `target/test-clients/agents`; returns
/// its Python.
pub fn openai_agents() -> PathBuf {
    python_venv("agents", &[OPENAI_AGENTS])
}

/// The official Python MCP SDK ([`MCP_PYTHON_SDK`]), in the venv `target/test-clients/mcp`;
/// returns its Python.
pub fn mcp_python() -> PathBuf {
    python_venv("mcp", &[MCP_PYTHON_SDK])
}

/// The official OTLP protobuf definitions and the gRPC runtime the OTLP receiver
/// (`fixtures/otlp_receiver.py`) decodes with, pinned together: opentelemetry-proto's code is
/// generated for protobuf >= 5 and grpcio >= 1.63.2; these are what pip resolves for it.
pub const OTLP_RECEIVER: &[&str] = &[
    "opentelemetry-proto==1.45.2",
    "protobuf==7.36.2",
    "grpcio==1.85.3",
];

/// [`OTLP_RECEIVER`] in the venv `target/test-clients/otlp`; returns its Python.
pub fn otlp_receiver_python() -> PathBuf {
    python_venv("otlp", OTLP_RECEIVER)
}

/// The OTLP receiver for tests, `fixtures/otlp_receiver.py` (its docstring gives its flags
/// and the JSON lines it prints); run it with [`otlp_receiver_python`], or through
/// [`crate::otlp::OtlpReceiver`].
pub fn otlp_receiver_script() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/otlp_receiver.py");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The schemathesis release the suite runs (its CLI changed between major versions).
pub const SCHEMATHESIS: &str = "4.32.5";

/// The `schemathesis` command of a venv holding [`SCHEMATHESIS`].
pub fn schemathesis() -> PathBuf {
    let requirement = format!("schemathesis=={SCHEMATHESIS}");
    python_venv("schemathesis", &[&requirement]).with_file_name("schemathesis")
}

/// The `playwright-core` release the browser test drives Chromium with.
pub const PLAYWRIGHT: &str = "playwright-core@1.65.1";

/// A folder whose `node_modules` holds [`PLAYWRIGHT`].
pub fn playwright() -> PathBuf {
    npm_packages("playwright", &[PLAYWRIGHT])
}

/// Installs every counterpart above (Chromium only where this process may install packages),
/// so a test run can have them in place before its tests start: the installs then neither
/// count against a test's time limit nor compete with tests for the CPU. Returns why there is
/// no Chromium, if there is none.
pub fn install_all() -> Result<(), String> {
    openai_python();
    openai_node();
    langchain_openai();
    openai_agents();
    langgraph();
    anthropic_python();
    anthropic_node();
    openai_agents_js();
    mcp_python();
    otlp_receiver_python();
    schemathesis();
    junitparser_python();
    a2a_python();
    protocol_clients_js();
    playwright();
    mcp_server_bin("mcp-server-everything");
    let _ = bubblewrap();
    chromium().map(drop)
}

/// The MCP servers of the npm registry the tests use, pinned.
pub const MCP_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// See [`MCP_EVERYTHING`].
pub const MCP_FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// A folder with the reference MCP servers installed; returns the path of a server's bin
/// script (`mcp-server-everything`, `mcp-server-filesystem`).
pub fn mcp_server_bin(bin: &str) -> PathBuf {
    let prefix = npm_packages("mcp-servers", &[MCP_EVERYTHING, MCP_FILESYSTEM]);
    let path = prefix.join("node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "{} is missing after npm install",
        path.display()
    );
    path
}

/// The MCP server for fault tests, `fixtures/mcp_fault_server.py`: Python 3 with the standard
/// library only, speaking newline-delimited JSON-RPC on stdio and misbehaving as its flags say
/// (`--never-initialize`, `--garbage`, `--log FILE`, `--pid-file FILE`, `--fork-child FILE`;
/// its docstring lists them and its tools). Run it as `python3 <path> [flags]`.
pub fn mcp_fault_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp_fault_server.py");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// Debian's bubblewrap (`/usr/bin/bwrap`) for the sandbox tests, installed with `apt-get` on
/// first use when it is missing and this process may install packages. `Err` says why there
/// is none.
pub fn bubblewrap() -> Result<PathBuf, String> {
    apt_package("bubblewrap", "/usr/bin/bwrap")
}

/// Debian package `package`, installed with `apt-get` once when `path` is missing.
fn apt_package(package: &str, path: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(path);
    let ready = || path.exists();
    install_once(package, ready, || {
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        // Best effort: a machine without apt or root access has none to offer. A fresh
        // machine's package lists may be missing: update them when the install fails.
        let _ = apt(&["install", "-y", package])
            || (apt(&["update"]) && apt(&["install", "-y", package]));
    });
    match ready() {
        true => Ok(path),
        false => Err(format!(
            "no {package}: {} is missing and `apt-get install {package}` did not install it",
            path.display()
        )),
    }
}

/// The system's Chromium for browser tests (Debian's `chromium` package at `/usr/bin/chromium`),
/// installed with `apt-get` on first use when it is missing and this process may install
/// packages. `Err` says why there is none (the caller skips with that reason).
pub fn chromium() -> Result<PathBuf, String> {
    apt_package("chromium", "/usr/bin/chromium")
}

/// The JUnit XML parser CI systems' reports are read with, for `keel eval --junit`.
pub const JUNITPARSER: &str = "junitparser==5.0.3";

/// [`JUNITPARSER`] in the venv `target/test-clients/junit`; returns its Python.
pub fn junitparser_python() -> PathBuf {
    python_venv("junit", &[JUNITPARSER])
}

/// The official A2A Python SDK with its HTTP server extra (Starlette) and the ASGI server the
/// tests' remote echo agent runs on, pinned; A2A 1.0 (`SendMessage`, `TASK_STATE_*`).
pub const A2A_PYTHON: &[&str] = &["a2a-sdk[http-server]==1.3.0", "uvicorn==0.54.0"];

/// [`A2A_PYTHON`] in the venv `target/test-clients/a2a`; returns its Python.
pub fn a2a_python() -> PathBuf {
    python_venv("a2a", A2A_PYTHON)
}

/// The remote A2A agent for tests, `fixtures/a2a_echo_server.py` (its docstring gives its
/// flags, what it answers and the line it prints); run it with [`a2a_python`], or through
/// [`crate::a2a_server::A2aEchoServer`].
pub fn a2a_echo_server_script() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/a2a_echo_server.py");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The official JavaScript SDKs of the protocols Keel speaks besides OpenAI's, Anthropic's and
/// MCP, pinned: A2A's client, the Agent Client Protocol's (ESM only: run its scripts as
/// `.mjs`) and AG-UI's client.
pub const PROTOCOL_CLIENTS_JS: &[&str] = &[
    "@a2a-js/sdk@1.3.0",
    "@agentclientprotocol/sdk@2.4.0",
    "@ag-ui/client@1.0.0",
    "@ag-ui/core@1.0.0",
];

/// [`PROTOCOL_CLIENTS_JS`] under `target/test-clients/protocols-js`; returns the folder whose
/// `node_modules` holds them.
pub fn protocol_clients_js() -> PathBuf {
    npm_packages("protocols-js", PROTOCOL_CLIENTS_JS)
}
