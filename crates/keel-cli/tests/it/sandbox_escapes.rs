//! The OS sandbox holds against real escape attempts (`fixtures/sandbox_attack.py`) made from
//! every kind of process Keel starts — `shell`, a command tool, a skill script, a command
//! hook and an MCP stdio server (the official Python SDK) — both through `keel tools call`
//! and through a real run with a scripted model: writing outside the workspace, reading a
//! secret file in the user's home, connecting to a listening loopback port, a fork bomb, more
//! memory than the limit, ptrace of the parent, leaving the process group. Every attempt fails;
//! what the profile allows (writing inside, reading the workspace, the network where a tool's
//! profile allows it) still works. Fail-closed: a profile asking for a mechanism the machine
//! is made to hide refuses to start the process, naming what is missing.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use keel_test_support::{Cli, TempWorkspace, WorkspaceBuilder, test_clients};
use serde_json::{Value, json};

use crate::common::keel_in;

const ATTACK: &str = include_str!("fixtures/sandbox_attack.py");
const ATTACK_MCP: &str = include_str!("fixtures/sandbox_attack_mcp.py");

/// What each attempt must come to under the profile.
const DENIED: &[&str] = &[
    "write_outside",
    "read_secret",
    "connect",
    "fork_bomb",
    "ptrace",
    "setsid",
];
const ALLOWED: &[&str] = &["write_inside", "read_workspace"];

/// What enforces the profile: Landlock (bubblewrap hidden), or bubblewrap where it is
/// installed (the test installs Debian's package when it may).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Landlock,
    Bubblewrap,
}

impl Mode {
    /// The modes this machine can test.
    fn all() -> Vec<Mode> {
        let mut modes = vec![Mode::Landlock];
        match test_clients::bubblewrap() {
            Ok(_) => modes.push(Mode::Bubblewrap),
            Err(why) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "the bubblewrap mode is not tested here: {why}"
                );
            }
        }
        modes
    }

    /// `keel` in `ws`, in this mode.
    fn keel(self, ws: &TempWorkspace) -> Cli {
        match self {
            Mode::Landlock => keel_in(ws).env("KEEL_SANDBOX_HIDE", "bwrap"),
            Mode::Bubblewrap => keel_in(ws),
        }
    }

    /// The word its mechanism is recorded with.
    fn mechanism(self) -> &'static str {
        match self {
            Mode::Landlock => "landlock",
            Mode::Bubblewrap => "bubblewrap",
        }
    }
}

/// The targets of the attempts, made by the test and removed after it.
struct Targets {
    outside: tempfile::TempDir,
    home_dir: PathBuf,
    secret: PathBuf,
    listener: TcpListener,
}

impl Targets {
    fn new() -> Targets {
        let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
        let home_dir = home.join(format!(".keel-sandbox-test-{}", keel_types::new_id("t")));
        std::fs::create_dir_all(&home_dir).unwrap();
        let secret = home_dir.join("secret.txt");
        std::fs::write(&secret, "the secret").unwrap();
        Targets {
            outside: tempfile::tempdir().unwrap(),
            home_dir,
            secret,
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        }
    }

    fn config(&self) -> String {
        json!({
            "outside": self.outside.path(),
            "secret": self.secret,
            "port": self.listener.local_addr().unwrap().port(),
        })
        .to_string()
    }

    /// Nothing got out: no file outside, no connection accepted.
    fn assert_untouched(&self) {
        assert!(
            !self.outside.path().join("escaped.txt").exists(),
            "a file was written outside the workspace"
        );
        self.listener.set_nonblocking(true).unwrap();
        assert!(
            self.listener.accept().is_err(),
            "a connection reached the loopback port"
        );
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home_dir);
    }
}

/// A workspace whose agent `a` may use every surface, under a workspace-write, network-deny
/// profile with a process and a memory limit; `attack_net` is a command tool whose own profile
/// allows the network.
fn workspace(targets: &Targets, mode: Mode, script: &Value) -> TempWorkspace {
    let python = test_clients::mcp_python();
    let venv = python
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let namespaces = match mode {
        Mode::Landlock => "off",
        Mode::Bubblewrap => "on",
    };
    let runtime = format!(
        "{{ defaultAgent: a, limits: {{ maxSteps: 100 }}, sandbox: {{ filesystem: workspace-write, network: deny, namespaces: {namespaces}, limits: {{ processes: 32, memory: 256MiB }} }} }}"
    );
    WorkspaceBuilder::new()
        .runtime(&runtime)
        .scripted_model("m", script)
        .agent(
            "a",
            "{ model: m, tools: [shell, read_file, attack, attack_net, attack_warn, run_skill_script, exec_start, \"mcp__attack__*\"], skills: [attack] }",
        )
        .policy("open", "rules: [{ tool: \"*\", decision: allow }]")
        .tool(
            "attack",
            "description: Try an escape.\nschema: { type: object, properties: { what: { type: string } } }\nimpl: { kind: command, command: [python3, sandbox_attack.py, --stdin] }\n",
        )
        .tool(
            "attack_net",
            "description: Try an escape with the network allowed.\nschema: { type: object, properties: { what: { type: string } } }\nimpl: { kind: command, command: [python3, sandbox_attack.py, --stdin] }\nsandbox: { network: allow }\n",
        )
        .tool(
            "attack_warn",
            "description: Try an escape where the sandbox may be incomplete.\nschema: { type: object, properties: { what: { type: string } } }\nimpl: { kind: command, command: [python3, sandbox_attack.py, --stdin] }\nsandbox: { fallback: warn }\n",
        )
        .hook(
            "attack",
            "event: PreToolUse\nmatcher: \"^read_file$\"\nhandler: { kind: command, command: [python3, sandbox_attack.py, --hook], timeout: 60s }\n",
        )
        .document(
            "McpServer",
            "attack",
            &format!(
                // A Python server's threads reserve more address space than a script's.
                "transport: stdio\ncommand: [\"{}\", sandbox_attack_mcp.py]\nsandbox: {{ readPaths: [\"{}\"], limits: {{ memory: 8GiB }} }}\n",
                python.display(),
                venv.display()
            ),
        )
        .file("attack.json", targets.config())
        .file("sandbox_attack.py", ATTACK)
        .file("sandbox_attack_mcp.py", ATTACK_MCP)
        .file(
            "resources/skills/attack/SKILL.md",
            "---\nname: attack\ndescription: Escape attempts.\n---\nRun scripts/sandbox_attack.py.\n",
        )
        .file("resources/skills/attack/scripts/sandbox_attack.py", ATTACK)
        .build()
}

/// The call that makes attempt `what` from `surface`: the tool and its arguments (a hook's
/// attempt is the name of the file the `read_file` it guards reads, made here).
fn call_of(ws: &TempWorkspace, surface: &str, what: &str) -> (&'static str, Value) {
    match surface {
        "shell" => (
            "shell",
            json!({"command": format!("python3 sandbox_attack.py {what}")}),
        ),
        "command" => ("attack", json!({ "what": what })),
        "skill" => (
            "run_skill_script",
            json!({"skill": "attack", "script": "scripts/sandbox_attack.py", "args": [what]}),
        ),
        "hook" => {
            ws.write(format!("targets/{what}"), "target");
            ("read_file", json!({ "path": format!("targets/{what}") }))
        }
        "mcp" => ("mcp__attack__attempt", json!({ "what": what })),
        other => panic!("no surface {other}"),
    }
}

/// The attempt's report, from a `keel tools call` of `tool`: the result JSON the surface
/// printed (or the hook wrote), or the error the call failed with.
fn call(ws: &TempWorkspace, mode: Mode, surface: &str, what: &str) -> Value {
    let keel = mode.keel(ws);
    let (tool, args) = call_of(ws, surface, what);
    let out = keel.run(["tools", "call", tool, "--args", &args.to_string(), "--json"]);
    let events = out.json_lines();
    let sandbox = events
        .iter()
        .find(|e| e["type"] == "runtime.tool.sandbox")
        .cloned();
    if surface != "hook" && surface != "mcp" {
        let sandbox = sandbox.unwrap_or_else(|| panic!("{surface}: no sandbox event"));
        assert_eq!(sandbox["filesystem"], "workspace-write", "{sandbox}");
        let mechanisms = sandbox["mechanisms"].to_string();
        assert!(
            mechanisms.contains(mode.mechanism()) && mechanisms.contains("seccomp"),
            "{mechanisms}"
        );
    }
    let completed = events
        .iter()
        .find(|e| e["type"] == "runtime.tool.direct.completed")
        .unwrap_or_else(|| panic!("{surface} {what}: no result: {}", out.stderr));
    let lifecycle: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "runtime.mcp.lifecycle" && e["lifecycle"] != "ready")
        .collect();
    assert!(
        surface != "mcp" || lifecycle.iter().all(|e| e["lifecycle"] == "starting"),
        "{what}: the MCP server did not stay up: {lifecycle:?}"
    );
    if surface == "hook" {
        let ran = events
            .iter()
            .find(|e| e["type"] == "runtime.hook.completed")
            .unwrap_or_else(|| panic!("{what}: the hook did not run: {}", out.stdout));
        let mechanisms = ran["sandbox"]["mechanisms"].to_string();
        assert!(mechanisms.contains(mode.mechanism()), "{ran}");
        let written = ws.read(format!("results/hook-{what}.json"));
        return serde_json::from_str(&written).unwrap();
    }
    report_of(
        completed["output"].as_str().unwrap_or_default(),
        completed["ok"] == true,
    )
}

/// The attempt's report in a tool's output: the JSON line the attack printed (shell and skill
/// scripts wrap it in `stdout`), or the failure itself.
fn report_of(output: &str, ok: bool) -> Value {
    let value: Value = serde_json::from_str(output).unwrap_or(Value::String(output.into()));
    let printed = value
        .get("stdout")
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s.trim()).ok());
    match (printed, &value) {
        (Some(printed), _) => printed,
        (None, v) if v.get("what").is_some() => value,
        (None, v) if v.get("structuredContent").is_some() => v["structuredContent"].clone(),
        _ => json!({ "ok": false, "failed": ok, "detail": value }),
    }
}

/// The attempt ran (the script reported it) and failed.
fn assert_denied(surface: &str, what: &str, report: &Value) {
    assert_eq!(
        report["what"], what,
        "{surface} {what} did not run: {report}"
    );
    assert_eq!(
        report["ok"], false,
        "{surface} {what} got through: {report}"
    );
}

/// Every escape fails from `surface`, what the profile allows works, nothing got out.
fn surface_holds(surface: &str) {
    for mode in Mode::all() {
        let targets = Targets::new();
        let ws = workspace(
            &targets,
            mode,
            &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
        );
        for what in DENIED {
            let report = call(&ws, mode, surface, what);
            assert_denied(&format!("{surface} ({mode:?})"), what, &report);
            if *what == "fork_bomb" {
                let detail = report["detail"].as_str().unwrap_or_default();
                assert!(detail.starts_with("stopped after"), "{surface}: {detail}");
            }
        }
        for what in ALLOWED {
            let report = call(&ws, mode, surface, what);
            assert_eq!(
                report["ok"], true,
                "{surface} ({mode:?}) {what} was refused: {report}"
            );
        }
        targets.assert_untouched();
    }
}

#[test]
fn shell_commands_cannot_escape() {
    surface_holds("shell");
    // What the sandbox refused is named in the result the model reads.
    let targets = Targets::new();
    let ws = workspace(
        &targets,
        Mode::Landlock,
        &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
    );
    let out = keel_in(&ws).run([
        "tools",
        "call",
        "shell",
        "--args",
        r#"{"command": "echo x > /etc/keel-sandbox-escape"}"#,
        "--json",
    ]);
    assert!(
        out.stdout.contains(
            "the sandbox blocked writing /etc/keel-sandbox-escape: filesystem is workspace-write"
        ),
        "{}",
        out.stdout
    );
    assert!(!Path::new("/etc/keel-sandbox-escape").exists());
}

#[test]
fn command_tools_cannot_escape() {
    surface_holds("command");
}

#[test]
fn skill_scripts_cannot_escape() {
    surface_holds("skill");
}

#[test]
fn command_hooks_cannot_escape() {
    surface_holds("hook");
}

#[test]
fn mcp_stdio_servers_cannot_escape() {
    surface_holds("mcp");
}

#[test]
fn the_memory_limit_ends_the_attempt_with_a_clear_error_and_allowed_network_works() {
    let targets = Targets::new();
    let ws = workspace(
        &targets,
        Mode::Landlock,
        &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
    );
    for surface in ["shell", "command", "skill"] {
        let report = call(&ws, Mode::Landlock, surface, "memory");
        assert_eq!(report["ok"], false, "{surface}: {report}");
        assert!(
            report.to_string().contains("memory limit (268435456 bytes"),
            "{surface}: {report}"
        );
    }
    let keel = keel_in(&ws);
    let out = keel.run([
        "tools",
        "call",
        "attack_net",
        "--args",
        r#"{"what": "connect_allowed"}"#,
        "--json",
    ]);
    let completed = out
        .json_lines()
        .into_iter()
        .find(|e| e["type"] == "runtime.tool.direct.completed")
        .unwrap();
    let report = report_of(completed["output"].as_str().unwrap(), true);
    assert_eq!(report["ok"], true, "network: allow connects: {report}");
}

#[test]
fn a_run_goes_on_after_every_escape_from_every_surface_fails() {
    for mode in Mode::all() {
        every_escape_in_one_run(mode);
    }
}

/// The scripted model makes every attempt from every surface in one run, in `mode`.
fn every_escape_in_one_run(mode: Mode) {
    let targets = Targets::new();
    // The scripted model makes every attempt from every surface, then writes inside, then
    // answers; the workspace is built once the steps are known.
    let surfaces = ["shell", "command", "skill", "hook", "mcp"];
    let scratch = TempWorkspace::new();
    let mut steps = Vec::new();
    let mut made = Vec::new();
    for surface in surfaces {
        for what in DENIED {
            let (tool, args) = call_of(&scratch, surface, what);
            steps.push(json!({"toolCalls": [{"name": tool, "arguments": args}]}));
            made.push((surface, *what));
        }
    }
    steps.push(json!({"toolCalls": [{"name": "attack", "arguments": {"what": "write_inside"}}]}));
    steps.push(json!({"text": "Still here."}));
    let ws = workspace(
        &targets,
        mode,
        &json!({"conversations": [{"steps": steps}]}),
    );
    for what in DENIED {
        ws.write(format!("targets/{what}"), "target");
    }
    let out = mode.keel(&ws).run(["run", "--json", "try them all"]);
    assert!(out.success(), "{}", out.stderr);
    let events: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"]["phase"] == "agent.tool.result")
        .map(|e| &e["event"])
        .collect();
    assert_eq!(results.len(), made.len() + 1, "one result per call");
    for ((surface, what), result) in made.iter().zip(&results) {
        let report = match *surface {
            "hook" => serde_json::from_str(&ws.read(format!("results/hook-{what}.json"))).unwrap(),
            _ => report_of(
                result["output"].as_str().unwrap_or_default(),
                result["ok"] == true,
            ),
        };
        assert_denied(&format!("run: {surface}"), what, &report);
    }
    let inside = report_of(results[made.len()]["output"].as_str().unwrap(), true);
    assert_eq!(inside["ok"], true, "writing inside: {inside}");
    // Shell, command tool and skill script calls record their sandbox; the write inside too.
    let sandboxed = events
        .iter()
        .filter(|e| e["type"] == "runtime.tool.sandbox")
        .count();
    assert_eq!(sandboxed, 3 * DENIED.len() + 1);
    let completed = events
        .iter()
        .find(|e| e["type"] == "runtime.request.completed")
        .unwrap_or_else(|| panic!("the run did not complete: {}", out.stderr));
    assert_eq!(completed["output"], "Still here.");
    targets.assert_untouched();
}

#[test]
fn a_profile_the_machine_cannot_enforce_refuses_the_tool_unless_it_says_warn() {
    let targets = Targets::new();
    let ws = workspace(
        &targets,
        Mode::Landlock,
        &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
    );
    // Neither Landlock nor bubblewrap: a filesystem profile has nothing to enforce it.
    let hidden = keel_in(&ws).env("KEEL_SANDBOX_HIDE", "landlock,bwrap");
    let out = hidden.run([
        "tools",
        "call",
        "attack",
        "--args",
        r#"{"what": "write_inside"}"#,
        "--json",
    ]);
    assert!(
        out.stdout
            .contains("the sandbox cannot be enforced on this machine: Landlock"),
        "{}",
        out.stdout
    );
    assert!(
        !ws.exists("results/inside.txt"),
        "the process did not start"
    );
    let doctor = hidden.run(["doctor"]);
    assert_eq!(doctor.code, Some(1), "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("REFUSED, missing: Landlock"),
        "{}",
        doctor.stdout
    );

    // With `fallback: warn` it runs with what the machine has, and says what is missing.
    let out = hidden.run([
        "tools",
        "call",
        "attack_warn",
        "--args",
        r#"{"what": "write_inside"}"#,
        "--json",
    ]);
    let sandbox = out
        .json_lines()
        .into_iter()
        .find(|e| e["type"] == "runtime.tool.sandbox")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        sandbox["missing"].to_string().contains("Landlock"),
        "{sandbox}"
    );
    assert!(ws.exists("results/inside.txt"));
}

#[test]
fn an_exec_session_runs_in_the_agents_sandbox() {
    let targets = Targets::new();
    let ws = workspace(
        &targets,
        Mode::Landlock,
        &json!({"conversations": [{"steps": [{"text": "hi"}]}]}),
    );
    let args = json!({
        // One program printing both results at once: one read takes them whole.
        "command": ["python3", "-c", "import json, sandbox_attack as a; print(json.dumps([a.result('read_secret'), a.result('write_inside')]))"],
        "waitMs": 20000,
    });
    let out = keel_in(&ws).run([
        "tools",
        "call",
        "exec_start",
        "--args",
        &args.to_string(),
        "--json",
    ]);
    let events: Vec<Value> = out.json_lines();
    let sandbox = events
        .iter()
        .find(|e| e["type"] == "runtime.tool.sandbox")
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        ["landlock", "bubblewrap"]
            .iter()
            .any(|m| sandbox["mechanisms"].to_string().contains(m)),
        "{sandbox}"
    );
    let completed = events
        .iter()
        .find(|e| e["type"] == "runtime.tool.direct.completed")
        .unwrap();
    let result: Value = serde_json::from_str(completed["output"].as_str().unwrap()).unwrap();
    let printed = result["output"].as_str().unwrap();
    assert!(
        printed.contains(r#""what": "read_secret", "ok": false"#),
        "the secret stays out of reach: {printed}"
    );
    assert!(
        printed.contains(r#""what": "write_inside", "ok": true"#),
        "{printed}"
    );
    targets.assert_untouched();
}
