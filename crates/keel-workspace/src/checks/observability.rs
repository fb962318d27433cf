//! Checks of the Runtime's `observability.otlp` beyond its schema (which already bounds
//! `sampling` to 0..=1 and `queueSize`/`batchSize` to at least 1): the endpoint is an http(s)
//! URL with a host, a batch fits in the queue, and header names are HTTP header names.

use super::Checker;
use super::mcp::url_problem;
use crate::OtlpSpec;
use crate::yaml::Node;

impl Checker<'_> {
    pub(super) fn observability(&mut self) {
        let spec: &Node = self.spec;
        let Some(otlp) = spec.get("observability").and_then(|o| o.get("otlp")) else {
            return;
        };
        if let Some(node) = otlp.get("endpoint")
            && let Some(endpoint) = node.as_str()
            && let Some(problem) = url_problem(endpoint)
        {
            self.push(
                &node.loc,
                format!("`observability.otlp.endpoint` `{endpoint}` {problem}"),
                Some(
                    "write the collector's base URL, e.g. `http://127.0.0.1:4318` (gRPC: port 4317)"
                        .into(),
                ),
            );
        }
        self.batch_fits_in_queue(otlp);
        for entry in otlp
            .get("headers")
            .and_then(Node::entries)
            .unwrap_or_default()
        {
            if !is_header_name(&entry.key) {
                self.push(
                    &entry.key_loc,
                    format!(
                        "`observability.otlp.headers` name `{}` is not a valid HTTP header name",
                        entry.key
                    ),
                    Some(
                        "write the name alone, of letters, digits and `-` (no spaces or `:`), e.g. `x-api-key`"
                            .into(),
                    ),
                );
            }
        }
    }

    /// `batchSize` at most `queueSize` (either may be the default); zero is the schema's error.
    fn batch_fits_in_queue(&mut self, otlp: &Node) {
        let size = |key: &str, default: usize| match otlp.get(key) {
            Some(node) => node.as_f64().map(|n| (n, Some(node))),
            None => Some((default as f64, None)),
        };
        let (Some((batch, batch_node)), Some((queue, _))) = (
            size("batchSize", OtlpSpec::DEFAULT_BATCH_SIZE),
            size("queueSize", OtlpSpec::DEFAULT_QUEUE_SIZE),
        ) else {
            return;
        };
        if batch < 1.0 || queue < 1.0 || batch <= queue {
            return;
        }
        let loc = batch_node
            .or_else(|| otlp.get("queueSize"))
            .map_or(&otlp.loc, |n| &n.loc)
            .clone();
        let default = |key: &str| match otlp.get(key) {
            Some(_) => "",
            None => " (the default)",
        };
        self.push(
            &loc,
            format!(
                "`observability.otlp.batchSize` {batch}{} is above `queueSize` {queue}{}",
                default("batchSize"),
                default("queueSize")
            ),
            Some("make `batchSize` at most `queueSize`".into()),
        );
    }
}

/// An HTTP header name: one or more RFC 9110 token characters.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::is_header_name;

    #[test]
    fn header_names_are_tokens() {
        for ok in [
            "authorization",
            "X-Api-Key",
            "x_tenant.id",
            "a!#$%&'*+-.^_`|~9",
        ] {
            assert!(is_header_name(ok), "{ok}");
        }
        for bad in ["", "x api key", "x:y", "clé", "a\"b", "(x)"] {
            assert!(!is_header_name(bad), "{bad}");
        }
    }
}
