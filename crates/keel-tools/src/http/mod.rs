//! HTTP client plumbing shared by every outgoing request a tool makes — the built-in
//! `http_fetch` ([`crate::builtin::HttpFetch`]), declared `http` tools ([`HttpTool`], in
//! `tool.rs`) and http hook handlers ([`crate::hooks`]): building the clients (rustls with
//! the ring provider, timeouts, proxies except for loopback), URL allow-lists
//! ([`AllowList`]), request headers, body reads under a cap, and request failures in words.
//!
//! Nothing here knows about tool arguments or results; dropping a request future closes its
//! connection.

mod tool;

use std::time::Duration;

use keel_types::{ToolError, error_chain};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Url, redirect};

pub use tool::{DEFAULT_TIMEOUT, HttpTool, MAX_RESPONSE_BYTES};

/// The HTTP clients of one tool: rustls with the ring provider, a total timeout, and the
/// environment's proxy settings — except for loopback URLs, which never go through a proxy.
/// Each is built at its first request, not with the tool: building one loads the system's
/// root certificates (milliseconds at every start, for tools most runs never call).
#[derive(Clone)]
pub(crate) struct Clients {
    inner: std::sync::Arc<LazyClients>,
}

struct LazyClients {
    timeout: Duration,
    policy: Box<dyn Fn() -> redirect::Policy + Send + Sync>,
    proxied: std::sync::OnceLock<Result<reqwest::Client, String>>,
    direct: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl Clients {
    /// Clients with `timeout` and the redirect policy `policy()` makes (built when first used).
    pub(crate) fn new(
        timeout: Duration,
        policy: impl Fn() -> redirect::Policy + Send + Sync + 'static,
    ) -> Result<Self, String> {
        Ok(Self {
            inner: std::sync::Arc::new(LazyClients {
                timeout,
                policy: Box::new(policy),
                proxied: std::sync::OnceLock::new(),
                direct: std::sync::OnceLock::new(),
            }),
        })
    }

    fn build(&self, proxy: bool) -> Result<reqwest::Client, String> {
        // reqwest is built without a compiled-in TLS crypto provider; ring is ours. A provider
        // installed earlier by someone else is fine too, hence the ignored result.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = &self.inner;
        let mut builder = reqwest::Client::builder()
            .timeout(inner.timeout)
            .connect_timeout(inner.timeout)
            .redirect((inner.policy)())
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
        if !proxy {
            builder = builder.no_proxy();
        }
        builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))
    }

    /// The client for requests to `url` (built now if it is the first).
    pub(crate) fn for_url(&self, url: &Url) -> Result<&reqwest::Client, String> {
        let (cell, proxy) = match is_loopback(url) {
            true => (&self.inner.direct, false),
            false => (&self.inner.proxied, true),
        };
        cell.get_or_init(|| self.build(proxy))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// URL patterns where `*` matches any run of characters (`/` included) and everything else
/// matches itself. A URL is allowed when a pattern matches its normalised form (lower-case
/// scheme and host, a path of at least `/`), e.g. `https://api.example.com/*`.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    patterns: Vec<String>,
}

impl AllowList {
    /// The list of `patterns`.
    pub fn new(patterns: &[String]) -> Self {
        Self {
            patterns: patterns.to_vec(),
        }
    }

    /// Whether no URL at all is allowed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `url` matches one of the patterns.
    pub fn allows(&self, url: &Url) -> bool {
        self.patterns
            .iter()
            .any(|pattern| wildcard_match(pattern, url.as_str()))
    }

    /// The patterns, for messages.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (pattern, text) = (pattern.as_bytes(), text.as_bytes());
    let (mut p, mut t) = (0usize, 0usize);
    // Where the last `*` was, and the text position it currently stands for.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if text.get(t) == Some(&c) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and retry.
                Some((star_p, star_t)) => {
                    star = Some((star_p, star_t + 1));
                    p = star_p + 1;
                    t = star_t + 1;
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

/// A response body, read up to a cap.
#[derive(Debug)]
pub(crate) struct Body {
    pub bytes: Vec<u8>,
    /// Whether the response had more than was read.
    pub truncated: bool,
}

/// Reads at most `cap` bytes of `response`'s body; the rest is never downloaded.
pub(crate) async fn read_body(
    response: &mut reqwest::Response,
    cap: usize,
) -> Result<Body, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(chunk.get(..room).unwrap_or_default());
            return Ok(Body {
                bytes,
                truncated: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body {
        bytes,
        truncated: false,
    })
}

/// A request failure in words.
pub(crate) fn request_error(what: &str, err: &reqwest::Error, timeout: Duration) -> ToolError {
    if err.is_timeout() {
        ToolError::Timeout(timeout)
    } else if err.is_connect() {
        ToolError::Failed(format!("cannot connect to {what}: {}", error_chain(err)))
    } else {
        ToolError::Failed(format!(
            "the request to {what} failed: {}",
            error_chain(err)
        ))
    }
}

/// Request headers from name/value pairs, or why one is not a valid header.
pub(crate) fn header_map<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        map.append(header, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_any_run_of_characters() {
        assert!(wildcard_match(
            "https://api.example.com/*",
            "https://api.example.com/"
        ));
        assert!(wildcard_match(
            "https://api.example.com/*",
            "https://api.example.com/v1/x?q=1"
        ));
        assert!(!wildcard_match(
            "https://api.example.com/*",
            "https://api.example.com.evil.net/"
        ));
        assert!(wildcard_match(
            "https://*.example.com/*",
            "https://a.b.example.com/x"
        ));
        assert!(wildcard_match("http://h/a*b*c", "http://h/aXbYbZc"));
        assert!(!wildcard_match("http://h/a*b*c", "http://h/aXbYbZ"));
        assert!(wildcard_match("*", "anything"));
        assert!(!wildcard_match("http://h/", "http://h/x"));
    }
}
