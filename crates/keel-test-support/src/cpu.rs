//! CPU time of this process and of the local PostgreSQL server, from `/proc`: what benches
//! report beside their throughput (Keel's side and the database's, on the same machine).

/// CPU time in clock ticks (10 ms) from a `/proc/<pid>/stat` line: the process's own user and
/// system time, plus that of its children it has waited for.
fn ticks(stat: &str) -> u64 {
    // After the command name: field 14 is utime (1-based in proc(5)); then stime, cutime,
    // cstime.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    fields
        .get(11..15)
        .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
}

/// CPU time of this process so far, in milliseconds.
pub fn own_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    ticks(&stat) as f64 * 10.0
}

/// CPU time of every local PostgreSQL server process so far (each backend's, and the
/// postmaster's finished children's), in milliseconds: the database's side of the work when
/// it runs on this machine.
pub fn postgres_cpu_ms() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let path = entry.path().join("stat");
        let Ok(stat) = std::fs::read_to_string(path) else {
            continue;
        };
        if stat.contains("(postgres)") {
            total += ticks(&stat);
        }
    }
    total as f64 * 10.0
}
