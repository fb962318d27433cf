//! The `http` hook handler: the hook's input POSTed as JSON, the answer read from a 2xx body
//! (at most [`super::MAX_OUTPUT_BYTES`]), no redirects. It runs on the HTTP machinery of
//! `crate::http`, so it needs the crate's `http` feature. Without it every call of an http
//! hook fails with a [`HookError::Invalid`] saying so, which the hook's `onError` settles like
//! any other failure (a hook that cannot run must not vanish: it may be the one that denies a
//! call).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{HookError, HookInput, HookOutcome};

#[cfg(not(feature = "http"))]
pub(super) use disabled::{Client, client, post};
#[cfg(feature = "http")]
pub(super) use enabled::{Client, client, post};

#[cfg(feature = "http")]
mod enabled {
    use super::*;

    use reqwest::{Url, redirect};

    use keel_types::error_chain;

    use crate::http::{Clients, header_map, read_body};

    use super::super::MAX_OUTPUT_BYTES;

    /// The clients an http hook posts with.
    pub(in crate::hooks) type Client = Clients;

    /// The client of hook `name`, or why its URL or headers are unusable.
    pub(in crate::hooks) fn client(
        _name: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<Client, String> {
        Url::parse(url).map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
        header_map(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))?;
        Clients::new(timeout, redirect::Policy::none)
    }

    /// POSTs `input` to `url` and reads the answer.
    pub(in crate::hooks) async fn post(
        clients: &Client,
        url: &str,
        headers: &BTreeMap<String, String>,
        input: &HookInput,
        timeout: Duration,
    ) -> Result<HookOutcome, HookError> {
        let parsed = Url::parse(url).map_err(|e| HookError::Invalid(format!("bad URL: {e}")))?;
        let trace = input
            .traceparent
            .as_deref()
            .map(|parent| ("traceparent", parent));
        let headers = header_map(
            headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .chain(trace),
        )
        .map_err(HookError::Invalid)?;
        let request_failed = |e: reqwest::Error| {
            if e.is_timeout() {
                HookError::Timeout(timeout)
            } else if e.is_connect() {
                HookError::Connect(error_chain(&e))
            } else {
                HookError::Request(error_chain(&e))
            }
        };
        let mut response = clients
            .for_url(&parsed)
            .map_err(HookError::Request)?
            .post(parsed.clone())
            .headers(headers)
            .json(input)
            .send()
            .await
            .map_err(request_failed)?;
        let status = response.status();
        let body = read_body(&mut response, MAX_OUTPUT_BYTES)
            .await
            .map_err(request_failed)?;
        let text = String::from_utf8_lossy(&body.bytes);
        if !status.is_success() {
            return Err(HookError::Http {
                status: status.as_u16(),
                body: crate::hooks::outcome::excerpt(text.trim()),
            });
        }
        if body.truncated {
            return Err(HookError::InvalidOutput {
                message: format!("the body is longer than {MAX_OUTPUT_BYTES} bytes"),
                excerpt: crate::hooks::outcome::excerpt(&text),
            });
        }
        crate::hooks::outcome::parse_output(&text)
    }
}

#[cfg(not(feature = "http"))]
mod disabled {
    use super::*;

    /// The place of an http client in a build without one.
    #[derive(Debug, Clone)]
    pub(in crate::hooks) struct Client;

    /// Accepts any http hook: its calls are what fail.
    pub(in crate::hooks) fn client(
        _name: &str,
        _url: &str,
        _headers: &BTreeMap<String, String>,
        _timeout: Duration,
    ) -> Result<Client, String> {
        Ok(Client)
    }

    /// Fails: this build cannot send a request.
    pub(in crate::hooks) async fn post(
        _client: &Client,
        _url: &str,
        _headers: &BTreeMap<String, String>,
        _input: &HookInput,
        _timeout: Duration,
    ) -> Result<HookOutcome, HookError> {
        Err(HookError::Invalid(
            "http hook handlers need keel-tools' `http` feature, which this build lacks".to_owned(),
        ))
    }
}
