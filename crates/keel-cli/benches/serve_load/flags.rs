//! The benches' flags: each `--flag VALUE` (or `--flag=VALUE`) named, over its environment
//! variable. Flags not named (`cargo bench`'s `--bench`, filters, other harness flags) are
//! ignored.

use std::collections::BTreeMap;

/// The value of each `(flag, environment variable)` pair: the command line's, else the
/// environment's, else none. A named flag without a value is an error.
pub(crate) fn read(
    pairs: &[(&'static str, &str)],
) -> Result<BTreeMap<&'static str, Option<String>>, String> {
    let mut values: BTreeMap<&'static str, Option<String>> = pairs
        .iter()
        .map(|(flag, env)| (*flag, std::env::var(env).ok()))
        .collect();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let Some(slot) = values.get_mut(flag.as_str()) else {
            continue;
        };
        let value = match inline {
            Some(value) => value,
            None => args.next().ok_or_else(|| format!("{flag} needs a value"))?,
        };
        *slot = Some(value);
    }
    Ok(values)
}
