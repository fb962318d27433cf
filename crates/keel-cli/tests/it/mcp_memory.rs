//! A large MCP tool result costs Keel at most about one copy of it: `keel tools call` of a
//! tool whose answer is one 20 MB text block (a Python MCP server over stdio) peaks under
//! 50 MB above the same call answering 10 bytes. Peak memory is the kernel's count
//! (`getrusage(RUSAGE_CHILDREN)` after each `keel` has been waited for: `ru_maxrss`, the
//! largest resident set of any child so far — the server writes its answer in 1 MB pieces,
//! so it stays small).

use std::path::Path;

use keel_test_support::WorkspaceBuilder;

use crate::common::keel_in;

const BIG: usize = 20_000_000;
/// How much more a 20 MB result may make Keel's peak resident set grow.
const BOUND_KIB: i64 = 50 * 1024;

/// The largest resident set (KiB) of any child this process has waited for.
#[allow(unsafe_code)]
fn children_max_rss_kib() -> i64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given and touches nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage), 0);
        usage
    };
    usage.ru_maxrss
}

#[test]
fn a_20_mb_mcp_result_raises_peak_memory_by_less_than_50_mb() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/big_result_mcp.py");
    let ws = WorkspaceBuilder::new()
        // Never asked: a direct call involves no model.
        .openai_model_at("m", "http://127.0.0.1:9/v1")
        .agent("a", "{ model: m, tools: [\"mcp__big__*\"] }")
        .document(
            "McpServer",
            "big",
            &format!(
                "transport: stdio\ncommand: [\"python3\", \"{}\"]\n",
                server.display()
            ),
        )
        .policy("big", "rules: [{ tool: \"mcp__big__*\", decision: allow }]")
        .build();
    let keel = keel_in(&ws);
    let call = |size: usize| {
        let args = format!("{{\"size\":{size}}}");
        let out = keel.run(["tools", "call", "mcp__big__big", "--args", &args]);
        assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
        out
    };

    // The small call first: the count only ever grows.
    let small = call(10);
    assert!(small.stdout.contains("xxxxxxxxxx"), "{}", small.stdout);
    let baseline = children_max_rss_kib();
    let big = call(BIG);
    let peak = children_max_rss_kib();
    // The model's view is a preview pointing at the artifact holding all of it.
    assert!(big.stdout.contains("keel://artifacts/"), "{}", big.stdout);
    let at = big.stdout.find("keel://artifacts/").unwrap();
    let uri: String = big.stdout[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || ":/_-".contains(*c))
        .collect();
    let meta = keel.run(["artifacts", "show", &uri, "--meta"]);
    assert!(meta.success(), "{}", meta.stderr);
    assert!(meta.stdout.contains(&BIG.to_string()), "{}", meta.stdout);

    let grew = peak - baseline;
    assert!(
        grew < BOUND_KIB,
        "a 20 MB result raised Keel's peak memory by {grew} KiB (bound {BOUND_KIB} KiB): \
         {baseline} KiB after a 10 B result, {peak} KiB after 20 MB"
    );
}
