//! `http_fetch`: fetch a URL the workspace allows, and return its status, a few headers and
//! the body.
//!
//! Only URLs matching `Runtime.spec.tools.httpFetch.allow` may be fetched; the list is empty by
//! default, so nothing is. [`Tool::check`] refuses other URLs (and non-http schemes) before the
//! call, the call checks again, and redirects are followed only to allowed URLs — a redirect
//! elsewhere is returned as is, with a note. The body is read up to `maxBytes` (the rest is
//! never downloaded) and the whole call is bounded by the timeout. The pieces shared with
//! declared `http` tools are in [`crate::http`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_types::{Issue, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use keel_workspace::HttpFetchSettings;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION};
use reqwest::{Method, Url, redirect};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{arg_issue, looks_binary};
use crate::http::{self, AllowList, Clients};
use crate::input;

/// `http_fetch`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpFetchInput {
    /// The http or https URL to fetch.
    #[schemars(length(min = 1))]
    url: String,
    /// The HTTP method.
    #[serde(default)]
    method: FetchMethod,
    /// Request headers.
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    /// POST body: text as is, or an object sent as JSON.
    #[serde(default)]
    body: Option<FetchBody>,
}

/// The methods `http_fetch` sends (the lower-case names are accepted too).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
enum FetchMethod {
    #[default]
    #[serde(rename = "GET", alias = "get")]
    Get,
    #[serde(rename = "POST", alias = "post")]
    Post,
}

/// A POST body.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum FetchBody {
    Text(String),
    Json(Map<String, Value>),
}

/// Redirects followed at most (each to an allowed URL).
const MAX_REDIRECTS: usize = 5;

/// Response headers returned to the model; the others are left out.
const SHOWN_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "location",
    "last-modified",
    "etag",
    "retry-after",
];

/// Where an operator allows URLs, for messages.
const ALLOW_SETTING: &str = "Runtime.spec.tools.httpFetch.allow";

/// Fetches allowed URLs.
#[derive(Debug)]
pub struct HttpFetch {
    spec: ToolSpec,
    allow: Arc<AllowList>,
    timeout: Duration,
    max_bytes: usize,
    clients: Result<Clients, String>,
}

impl HttpFetch {
    /// The tool, with its allow-list, timeout and body cap from `settings`.
    pub fn new(settings: &HttpFetchSettings) -> Self {
        let allow = Arc::new(AllowList::new(&settings.allow));
        let timeout = settings.timeout.0;
        let policy = {
            let allow = Arc::clone(&allow);
            move || {
                let allow = Arc::clone(&allow);
                redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > MAX_REDIRECTS {
                        attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
                    } else if allow.allows(attempt.url()) {
                        attempt.follow()
                    } else {
                        attempt.stop()
                    }
                })
            }
        };
        let allowed = if allow.is_empty() {
            "No URL is allowed in this workspace yet.".to_owned()
        } else {
            format!(
                "Allowed URLs (`*` matches anything): {}.",
                allow.patterns().join(", ")
            )
        };
        Self {
            spec: ToolSpec {
                name: "http_fetch".to_owned(),
                description: format!(
                    "Fetch a URL with GET or POST and return JSON `{{status, headers, body, \
                     truncated}}` (a few response headers; the body as text, cut at {} bytes). \
                     Only http(s) URLs on the workspace's allow-list can be fetched; redirects \
                     are followed only to allowed URLs. {allowed}",
                    settings.max_bytes
                ),
                parameters: input::schema_of::<HttpFetchInput>(),
            },
            clients: Clients::new(timeout, policy),
            allow,
            timeout,
            max_bytes: usize::try_from(settings.max_bytes).unwrap_or(usize::MAX),
        }
    }

    /// The URL to fetch, or the issue that blocks it.
    fn url(&self, text: &str) -> Result<Url, Issue> {
        let issue = |message: String| arg_issue("url", "an allowed http(s) URL", text, message);
        let url = Url::parse(text).map_err(|e| issue(format!("`{text}` is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(issue(format!(
                "only http and https URLs can be fetched, not `{}:`",
                url.scheme()
            )));
        }
        if self.allow.is_empty() {
            return Err(issue(format!(
                "http_fetch may not fetch any URL: the workspace's allow-list is empty. An \
                 operator can allow URLs with patterns such as `https://api.example.com/*` in \
                 `{ALLOW_SETTING}`"
            )));
        }
        if !self.allow.allows(&url) {
            return Err(issue(format!(
                "`{url}` is not on the allow-list ({}); an operator can add a pattern for it \
                 to `{ALLOW_SETTING}`",
                self.allow.patterns().join(", ")
            )));
        }
        Ok(url)
    }
}

#[async_trait]
impl Tool for HttpFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, _ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let mut issues = Vec::new();
        if let Some(text) = args.get("url").and_then(Value::as_str)
            && let Err(issue) = self.url(text)
        {
            issues.push(issue);
        }
        if let Err(message) = headers_of(args) {
            let found = args
                .get("headers")
                .map(Value::to_string)
                .unwrap_or_default();
            issues.push(arg_issue("headers", "valid HTTP headers", found, message));
        }
        if let Err((key, message)) = method_of(args) {
            let found = args.get(key).map(Value::to_string).unwrap_or_default();
            issues.push(arg_issue(key, "a body only with POST", found, message));
        }
        issues
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let clients = self
            .clients
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let input: HttpFetchInput = input::parse(args)?;
        let url = self
            .url(&input.url)
            .map_err(|issue| ToolError::InvalidArguments(issue.message))?;
        let method = method(input.method, input.body.is_some())
            .map_err(|(_, message)| ToolError::InvalidArguments(message))?;
        let mut headers = request_headers(&input.headers.unwrap_or_default())
            .map_err(ToolError::InvalidArguments)?;
        let mut request = clients
            .for_url(&url)
            .map_err(ToolError::Failed)?
            .request(method, url.clone());
        match input.body {
            None => {}
            Some(FetchBody::Text(text)) => request = request.body(text),
            Some(FetchBody::Json(value)) => {
                if !headers.contains_key(CONTENT_TYPE) {
                    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                }
                request = request.body(Value::Object(value).to_string());
            }
        }
        let request = request.headers(headers);
        let work = async {
            let mut response = request
                .send()
                .await
                .map_err(|e| http::request_error(url.as_str(), &e, self.timeout))?;
            let body = http::read_body(&mut response, self.max_bytes)
                .await
                .map_err(|e| http::request_error(url.as_str(), &e, self.timeout))?;
            Ok::<_, ToolError>((response, body))
        };
        let (response, body) = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| ToolError::Timeout(self.timeout))??;
        Ok(ToolOutput::json(&self.result(&url, &response, body)))
    }
}

impl HttpFetch {
    /// The JSON the model reads.
    fn result(&self, requested: &Url, response: &reqwest::Response, body: http::Body) -> Value {
        let status = response.status();
        let mut notes = Vec::new();
        let text = if looks_binary(&body.bytes) {
            notes.push(format!(
                "the body is binary ({} bytes read) and is not shown",
                body.bytes.len()
            ));
            String::new()
        } else {
            String::from_utf8_lossy(&body.bytes).into_owned()
        };
        if body.truncated {
            notes.push(format!(
                "the body is larger than the limit of {} bytes; only the first {} bytes were \
                 read",
                self.max_bytes,
                body.bytes.len()
            ));
        }
        if status.is_redirection()
            && let Some(target) = redirect_target(response)
        {
            notes.push(format!(
                "the redirect to `{target}` was not followed: it is not on the allow-list \
                 (`{ALLOW_SETTING}`)"
            ));
        }
        let mut result = Map::new();
        result.insert("status".to_owned(), json!(status.as_u16()));
        if response.url() != requested {
            result.insert("url".to_owned(), json!(response.url().as_str()));
        }
        result.insert("headers".to_owned(), shown_headers(response.headers()));
        result.insert("body".to_owned(), json!(text));
        result.insert("truncated".to_owned(), json!(body.truncated));
        if !notes.is_empty() {
            result.insert("note".to_owned(), json!(notes.join("; ")));
        }
        Value::Object(result)
    }
}

/// Where a redirect response points, resolved against its URL.
fn redirect_target(response: &reqwest::Response) -> Option<Url> {
    let location = response.headers().get(LOCATION)?.to_str().ok()?;
    response.url().join(location).ok()
}

fn shown_headers(headers: &HeaderMap) -> Value {
    let mut shown = Map::new();
    for name in SHOWN_HEADERS {
        if let Some(value) = headers.get(*name).and_then(|v| v.to_str().ok()) {
            shown.insert((*name).to_owned(), json!(value));
        }
    }
    Value::Object(shown)
}

/// The method of arguments not yet parsed (for [`Tool::check`]), or the argument that is
/// wrong and why.
fn method_of(args: &Value) -> Result<Method, (&'static str, String)> {
    let has_body = args.get("body").is_some_and(|b| !b.is_null());
    let requested = match args.get("method").filter(|m| !m.is_null()) {
        None => FetchMethod::default(),
        Some(m) => serde_json::from_value(m.clone()).map_err(|_| {
            let shown = m.as_str().map_or_else(|| m.to_string(), str::to_owned);
            (
                "method",
                format!("method `{shown}` is not supported; use GET or POST"),
            )
        })?,
    };
    method(requested, has_body)
}

/// The method of the call, or the argument that is wrong and why.
fn method(requested: FetchMethod, has_body: bool) -> Result<Method, (&'static str, String)> {
    match requested {
        FetchMethod::Post => Ok(Method::POST),
        FetchMethod::Get if has_body => Err((
            "body",
            "a `body` can only be sent with method POST".to_owned(),
        )),
        FetchMethod::Get => Ok(Method::GET),
    }
}

/// The request headers of arguments not yet parsed (for [`Tool::check`]).
fn headers_of(args: &Value) -> Result<HeaderMap, String> {
    match args.get("headers").filter(|h| !h.is_null()) {
        None => Ok(HeaderMap::new()),
        Some(Value::Object(map)) => {
            let pairs = map
                .iter()
                .map(|(name, value)| match value {
                    Value::String(v) => Ok((name.as_str(), v.as_str())),
                    other => Err(format!("header `{name}` must be a string, not {other}")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            http::header_map(pairs)
        }
        Some(other) => Err(format!(
            "`headers` must be an object of strings, not {other}"
        )),
    }
}

/// The request headers of the call.
fn request_headers(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    http::header_map(
        headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
    )
}
