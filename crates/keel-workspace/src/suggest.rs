//! "Did you mean …?" helpers: edit distance and the closest candidate name.

/// Levenshtein distance between `a` and `b`, in characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `name`, if it is within `max` edits (case-insensitive match
/// counts as one edit).
pub fn closest<'a, I>(name: &str, candidates: I, max: usize) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let d = if c.to_lowercase() == lower {
                1
            } else {
                edit_distance(&lower, &c.to_lowercase())
            };
            (d, c)
        })
        .filter(|(d, _)| *d <= max)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `` `a`, `b`, `c` ``.
pub(crate) fn list<'a, I>(names: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("model", "modle"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn closest_prefers_the_nearest_within_bounds() {
        let names = ["model", "tools", "limits"];
        assert_eq!(closest("modle", names, 2), Some("model"));
        assert_eq!(closest("tool", names, 2), Some("tools"));
        assert_eq!(closest("zzzzzz", names, 2), None);
        assert_eq!(closest("agent", ["Agent", "Model"], 2), Some("Agent"));
    }
}
