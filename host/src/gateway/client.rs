//! The gateway's HTTP client: one bounded POST to a model's endpoint, through the host's
//! client for the operator's own endpoints (`egress::direct`: one deadline for the
//! whole exchange, at most [`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES) read, no socket
//! outliving its call; a flood of 100 MB costs the host 8 MiB).

use std::time::Instant;

use http::{HeaderMap, HeaderValue, Method};

use super::{ANTHROPIC_VERSION, CONNECT_TIMEOUT, MAX_RESPONSE_BYTES};
pub use crate::egress::direct::ClientError;
use crate::egress::direct::{self, Exchange};
use crate::policy::{ModelRule, Provider};

/// The URL a request for `model` goes to.
pub(super) fn url(model: &ModelRule) -> String {
    let base = model.endpoint.trim_end_matches('/');
    match model.provider {
        Provider::Openai => format!("{base}/chat/completions"),
        Provider::Anthropic => format!("{base}/messages"),
    }
}

/// POSTs `body` (JSON) to `model`'s endpoint with `key` as the provider expects, and returns the
/// status and the whole response body, all before `deadline`.
///
/// # Errors
///
/// See [`ClientError`].
pub(super) async fn send(
    model: &ModelRule,
    key: Option<&[u8]>,
    body: Vec<u8>,
    deadline: Instant,
) -> Result<(u16, Vec<u8>), ClientError> {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
    if model.provider == Provider::Anthropic {
        headers.insert("anthropic-version", HeaderValue::from_static(ANTHROPIC_VERSION));
    }
    if let Some(key) = key {
        let key = key.trim_ascii();
        let (name, value) = match model.provider {
            Provider::Openai => ("authorization", [b"Bearer ".as_slice(), key].concat()),
            Provider::Anthropic => ("x-api-key", key.to_vec()),
        };
        let mut value = HeaderValue::from_bytes(&value)
            .map_err(|_| ClientError::NotSent("the credential is not a valid header value".into()))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let exchange = Exchange {
        method: Method::POST,
        url: &url(model),
        headers,
        body,
        max_response_bytes: MAX_RESPONSE_BYTES,
        connect_timeout: CONNECT_TIMEOUT,
    };
    direct::send(exchange, deadline).await
}
