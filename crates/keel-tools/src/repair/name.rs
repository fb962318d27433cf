//! Tool-name repair: maps a name the model got slightly wrong onto one of the caller's tools.
//!
//! Candidates are only the names the caller passes (the agent's inventory, restricted to
//! registered tools), so a repair can never reach a tool outside it. A case-insensitive exact
//! match wins; otherwise the unique closest name by optimal-string-alignment distance
//! (Damerau–Levenshtein with adjacent transpositions) on lower-cased names, within a budget
//! that shrinks for short names so `rm` never becomes `ls`. Ties mean no repair.

/// The largest edit distance a repair may bridge, for names of at least 6 characters.
const MAX_DISTANCE: usize = 2;

/// The candidate `sent` most plausibly meant, if exactly one is close enough.
pub fn repair_tool_name<'a>(
    sent: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let sent_lower = sent.to_lowercase();
    let sent_chars: Vec<char> = sent_lower.chars().collect();
    let mut same_case: Option<&'a str> = None;
    let mut same_case_count = 0;
    let mut best: Option<&'a str> = None;
    let mut best_distance = usize::MAX;
    let mut best_count = 0;
    for candidate in candidates {
        let lower = candidate.to_lowercase();
        if lower == sent_lower {
            if same_case != Some(candidate) {
                same_case_count += 1;
            }
            same_case = Some(candidate);
            continue;
        }
        let chars: Vec<char> = lower.chars().collect();
        let budget = budget(sent_chars.len().min(chars.len()));
        if budget == 0 || sent_chars.len().abs_diff(chars.len()) > budget {
            continue;
        }
        let distance = osa_distance(&sent_chars, &chars);
        if distance > budget {
            continue;
        }
        if distance < best_distance {
            best_distance = distance;
            best = Some(candidate);
            best_count = 1;
        } else if distance == best_distance && best != Some(candidate) {
            best_count += 1;
        }
    }
    match (same_case, same_case_count) {
        (Some(name), 1) => Some(name),
        (Some(_), _) => None,
        (None, _) => best.filter(|_| best_count == 1),
    }
}

/// How many edits a name of `len` characters may be away from the name it is repaired to.
fn budget(len: usize) -> usize {
    match len {
        0..=2 => 0,
        3..=5 => 1,
        _ => MAX_DISTANCE,
    }
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// adjacent characters each cost one.
pub(crate) fn osa_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = d;
        }
    }
    rows[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        osa_distance(&a, &b)
    }

    const TOOLS: [&str; 5] = ["get_weather", "read_file", "list_dir", "grep", "ls"];

    #[test]
    fn distance_counts_swaps_as_one_edit() {
        assert_eq!(distance("grep", "gerp"), 1);
        assert_eq!(distance("get_weather", "get_wether"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
    }

    #[test]
    fn case_insensitive_match_wins() {
        assert_eq!(repair_tool_name("Get_Weather", TOOLS), Some("get_weather"));
        assert_eq!(repair_tool_name("LS", TOOLS), Some("ls"));
    }

    #[test]
    fn close_names_are_repaired_within_the_budget() {
        assert_eq!(repair_tool_name("get_wether", TOOLS), Some("get_weather"));
        assert_eq!(repair_tool_name("reed_fil", TOOLS), Some("read_file"));
        assert_eq!(repair_tool_name("gerp", TOOLS), Some("grep"));
        assert_eq!(repair_tool_name("grp", TOOLS), Some("grep"));
    }

    #[test]
    fn far_or_short_names_are_not_repaired() {
        assert_eq!(repair_tool_name("weather", TOOLS), None);
        assert_eq!(repair_tool_name("rm", TOOLS), None);
        assert_eq!(repair_tool_name("gr", TOOLS), None);
        assert_eq!(repair_tool_name("write_file", TOOLS), None);
    }

    #[test]
    fn ties_are_not_repaired() {
        assert_eq!(
            repair_tool_name("read_fil", ["read_file", "read_fill"]),
            None
        );
        assert_eq!(repair_tool_name("FOO", ["Foo", "foo"]), None);
    }
}
