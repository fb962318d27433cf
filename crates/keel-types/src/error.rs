//! Helpers for putting errors into words, shared by the crates that talk to the outside
//! (model providers, HTTP tools, hooks). Pure `std`: the error types themselves live next to
//! their ports (`ports.rs`).

use std::error::Error;

/// An error and its sources, joined by `: `, e.g. `error sending request: connection refused`.
/// A source whose text the message already contains is left out, so wrappers that repeat
/// their cause do not say it twice.
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    #[derive(Debug)]
    struct Layer {
        text: &'static str,
        source: Option<Box<Layer>>,
    }

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.text)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.source.as_deref().map(|s| s as &(dyn Error + 'static))
        }
    }

    /// An error saying `first`, caused by an error saying `rest[0]`, caused by …
    fn layers(first: &'static str, rest: &[&'static str]) -> Layer {
        Layer {
            text: first,
            source: rest
                .split_first()
                .map(|(next, rest)| Box::new(layers(next, rest))),
        }
    }

    #[test]
    fn sources_are_joined_and_repeats_left_out() {
        let error = layers(
            "error sending request",
            &["connection refused", "connection refused", "os error 111"],
        );
        assert_eq!(
            error_chain(&error),
            "error sending request: connection refused: os error 111"
        );
    }

    #[test]
    fn a_wrapper_that_repeats_its_cause_says_it_once() {
        let error = layers("timed out: deadline passed", &["deadline passed"]);
        assert_eq!(error_chain(&error), "timed out: deadline passed");
    }
}
