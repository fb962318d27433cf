//! Declared `http` tools ([`HttpTool`]): a tool backed by an HTTP API, on the client plumbing
//! of the parent module.
//!
//! An [`HttpTool`] comes from a `Tool` document with `impl: {kind: http}`: the URL template's
//! `{name}` placeholders are filled from the arguments (URL-encoded), the other arguments go
//! into the query string (`GET`, `DELETE`) or a JSON body (`POST`, `PUT`, `PATCH`), and the
//! document's headers are sent as written (the workspace loader has already interpolated
//! `${VAR}`). A 2xx answer is the result (JSON when it parses, text otherwise); any other
//! status fails the call with the status and an excerpt of the body. Values of secret headers
//! and secret environment variables are masked in whatever comes back, so an API that echoes
//! its credentials cannot hand them to the model.
//!
//! Dropping a call future drops its request, which closes the connection.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use keel_workspace::{HttpMethod, ToolImpl, ToolSpecDoc, looks_secret};
use reqwest::header::HeaderMap;
use reqwest::{Method, Url, redirect};
use serde_json::{Map, Value};

use super::{Clients, header_map, read_body, request_error};

/// The timeout of a declared http tool whose document sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response body a declared http tool reads.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Longest body excerpt in the error of a failed (non-2xx) call.
const ERROR_EXCERPT_BYTES: usize = 1024;

/// Secrets shorter than this are not masked: they would mask ordinary words.
const MIN_SECRET_LEN: usize = 6;

/// What replaces a masked secret.
const MASK: &str = "[redacted]";

/// Whether a header carries credentials.
fn is_secret_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "authorization" | "proxy-authorization" | "cookie"
    ) || looks_secret(name)
        || lower.contains("auth")
}

/// Values to mask in what a tool returns.
#[derive(Debug, Clone, Default)]
struct Secrets(Vec<String>);

impl Secrets {
    /// The values of secret headers (and their last word, the token of `Bearer <token>`) and
    /// of secret-looking environment variables.
    pub(crate) fn new<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        env: &BTreeMap<String, String>,
    ) -> Self {
        let mut values: Vec<String> = Vec::new();
        for (name, value) in headers {
            if is_secret_header(name) {
                values.push(value.to_owned());
                if let Some((_, token)) = value.rsplit_once(' ') {
                    values.push(token.to_owned());
                }
            }
        }
        values.extend(
            env.iter()
                .filter(|(name, _)| looks_secret(name))
                .map(|(_, value)| value.clone()),
        );
        values.retain(|v| v.trim().len() >= MIN_SECRET_LEN);
        // Longest first, so a value containing another is masked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self(values)
    }

    /// `text` with every secret value replaced by a mask.
    pub(crate) fn mask(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.0 {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), MASK);
            }
        }
        text
    }
}

/// What an [`HttpTool`] needs to make requests; built once.
#[derive(Debug)]
struct Prepared {
    clients: Clients,
    method: Method,
    has_body: bool,
    headers: HeaderMap,
}

/// A tool backed by an HTTP API (`impl: {kind: http}`).
#[derive(Debug)]
pub struct HttpTool {
    spec: ToolSpec,
    url: String,
    timeout: Duration,
    idempotent: bool,
    prepared: Result<Prepared, String>,
    secrets: Secrets,
}

impl HttpTool {
    /// The tool called `name` described by `doc`. `env` is the workspace's environment (`.env`
    /// and the process): values of secret-looking variables are masked in responses. A
    /// document of another kind, or with invalid headers, gives a tool whose calls fail
    /// saying so.
    pub fn new(name: &str, doc: &ToolSpecDoc, env: &BTreeMap<String, String>) -> Self {
        let spec = ToolSpec {
            name: name.to_owned(),
            description: doc.description.clone(),
            parameters: doc.schema.clone(),
        };
        let ToolImpl::Http {
            method,
            url,
            headers,
            timeout,
        } = &doc.implementation
        else {
            return Self {
                spec,
                url: String::new(),
                timeout: DEFAULT_TIMEOUT,
                idempotent: doc.idempotent,
                prepared: Err(format!("tool `{name}` is not an http tool")),
                secrets: Secrets::default(),
            };
        };
        let timeout = timeout.map_or(DEFAULT_TIMEOUT, |t| t.0);
        let pairs = || headers.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let prepared = header_map(pairs()).and_then(|headers| {
            Ok(Prepared {
                clients: Clients::new(timeout, || redirect::Policy::limited(5))?,
                method: method_of(*method),
                has_body: matches!(
                    method,
                    HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch
                ),
                headers,
            })
        });
        Self {
            spec,
            url: url.clone(),
            timeout,
            idempotent: doc.idempotent,
            prepared: prepared.map_err(|e| format!("tool `{name}` cannot run: {e}")),
            secrets: Secrets::new(pairs(), env),
        }
    }

    /// How long a call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

fn method_of(method: HttpMethod) -> Method {
    match method {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Patch => Method::PATCH,
        HttpMethod::Delete => Method::DELETE,
    }
}

#[async_trait]
impl Tool for HttpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn check(&self, _ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let Value::Object(args) = args else {
            return Vec::new();
        };
        placeholders(&self.url)
            .into_iter()
            .filter_map(|(_, name)| {
                placeholder_value(args, name).err().map(|message| Issue {
                    path: format!("/{name}"),
                    expected: "a string, number or boolean (it fills the URL)".to_owned(),
                    found: args
                        .get(name)
                        .map_or_else(|| "nothing".to_owned(), Value::to_string),
                    message,
                })
            })
            .collect()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let prepared = self
            .prepared
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let empty = Map::new();
        let args = match &args {
            Value::Object(map) => map,
            Value::Null => &empty,
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be an object, found {other}"
                )));
            }
        };
        let (url, rest) = fill_template(&self.url, args).map_err(ToolError::InvalidArguments)?;
        let mut url = Url::parse(&url)
            .map_err(|e| ToolError::Failed(format!("the filled URL `{url}` is not valid: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::Failed(format!(
                "the URL `{url}` must use http or https"
            )));
        }
        if !prepared.has_body && rest.values().any(|v| !v.is_null()) {
            append_query(&mut url, &rest);
        }
        let mut request = prepared
            .clients
            .for_url(&url)
            .map_err(ToolError::Failed)?
            .request(prepared.method.clone(), url.clone())
            .headers(prepared.headers.clone());
        if let Some(parent) = &ctx.traceparent {
            request = request.header("traceparent", parent);
        }
        if prepared.has_body {
            request = request.json(&Value::Object(rest));
        }
        let shown = self.secrets.mask(url.as_str());
        tracing::debug!(tool = %self.spec.name, request_id = %ctx.request_id, "HTTP tool call started.");
        let work = async {
            let mut response = request
                .send()
                .await
                .map_err(|e| request_error(&shown, &e, self.timeout))?;
            let status = response.status();
            let cap = if status.is_success() {
                MAX_RESPONSE_BYTES
            } else {
                ERROR_EXCERPT_BYTES
            };
            let body = read_body(&mut response, cap)
                .await
                .map_err(|e| request_error(&shown, &e, self.timeout))?;
            Ok::<_, ToolError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| ToolError::Timeout(self.timeout))??;
        let text = self.secrets.mask(&String::from_utf8_lossy(&body.bytes));
        if !status.is_success() {
            let excerpt = text.trim();
            let more = if body.truncated { " […]" } else { "" };
            return Err(ToolError::Failed(if excerpt.is_empty() {
                format!("HTTP {status} from {shown}")
            } else {
                format!("HTTP {status} from {shown}: {excerpt}{more}")
            }));
        }
        if body.truncated {
            return Ok(ToolOutput::text(format!(
                "{text}\n[response truncated: only the first {MAX_RESPONSE_BYTES} bytes were read]"
            )));
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => Ok(ToolOutput::json(&value)),
            Err(_) => Ok(ToolOutput::text(text)),
        }
    }
}

/// The `{name}` placeholders of a URL template: byte range and name. A `{` not followed by
/// a name and `}` is an ordinary character.
fn placeholders(template: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = template.get(from..).and_then(|rest| rest.find('{')) {
        let open = from + open;
        let after = open + 1;
        let close = template
            .get(after..)
            .and_then(|rest| rest.find('}'))
            .map(|i| after + i);
        match close.and_then(|close| Some((close, template.get(after..close)?))) {
            Some((close, name)) if is_placeholder_name(name) => {
                found.push((open..close + 1, name));
                from = close + 1;
            }
            _ => from = after,
        }
    }
    found
}

fn is_placeholder_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// The text a placeholder's argument puts in the URL, or why it cannot.
fn placeholder_value(args: &Map<String, Value>, name: &str) -> Result<String, String> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        None | Some(Value::Null) => Err(format!(
            "the URL needs `{name}`, which is missing from the arguments"
        )),
        Some(other) => Err(format!(
            "`{name}` fills the URL and must be a string, number or boolean, not {other}"
        )),
    }
}

/// The template with its placeholders filled (URL-encoded), and the arguments it did not use.
fn fill_template(
    template: &str,
    args: &Map<String, Value>,
) -> Result<(String, Map<String, Value>), String> {
    let mut url = String::with_capacity(template.len());
    let mut rest = args.clone();
    let mut last = 0;
    for (range, name) in placeholders(template) {
        url.push_str(template.get(last..range.start).unwrap_or_default());
        url.push_str(&encode_component(&placeholder_value(args, name)?));
        rest.shift_remove(name);
        last = range.end;
    }
    url.push_str(template.get(last..).unwrap_or_default());
    Ok((url, rest))
}

/// Percent-encodes everything but the unreserved characters of RFC 3986, so a value stays
/// one path segment or query value (`/`, `?`, `&`, `#` are encoded).
fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Adds the arguments to the URL's query: scalars as text, arrays as repeated keys, objects as
/// JSON; `null` is left out.
fn append_query(url: &mut Url, args: &Map<String, Value>) {
    let mut query = url.query_pairs_mut();
    for (name, value) in args {
        let items = match value {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        };
        for item in items {
            match item {
                Value::Null => {}
                Value::String(s) => {
                    query.append_pair(name, s);
                }
                other => {
                    query.append_pair(name, &other.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn placeholders_are_names_in_braces() {
        let names: Vec<_> = placeholders("https://h/{owner}/{repo}/x?{}&{ bad}&q={q_1}")
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        assert_eq!(names, ["owner", "repo", "q_1"]);
    }

    #[test]
    fn templates_are_filled_encoded_and_leave_the_rest() {
        let args = json!({"id": "a b/c?d", "n": 7, "extra": true});
        let (url, rest) =
            fill_template("https://h/items/{id}?n={n}", args.as_object().unwrap()).unwrap();
        assert_eq!(url, "https://h/items/a%20b%2Fc%3Fd?n=7");
        assert_eq!(Value::Object(rest), json!({"extra": true}));
        let err = fill_template("https://h/{missing}", &Map::new()).unwrap_err();
        assert_eq!(
            err,
            "the URL needs `missing`, which is missing from the arguments"
        );
    }

    #[test]
    fn secrets_are_masked_longest_first() {
        let env = BTreeMap::from([
            ("API_TOKEN".to_owned(), "tok-123456".to_owned()),
            ("HOME".to_owned(), "/home/someone".to_owned()),
            ("SHORT_KEY".to_owned(), "abc".to_owned()),
        ]);
        let secrets = Secrets::new(
            [
                ("Authorization", "Bearer sk-abcdefgh"),
                ("Accept", "application/json"),
            ],
            &env,
        );
        assert_eq!(
            secrets.mask("auth=Bearer sk-abcdefgh tok=tok-123456 sk-abcdefgh abc application/json /home/someone"),
            "auth=[redacted] tok=[redacted] [redacted] abc application/json /home/someone"
        );
    }
}
